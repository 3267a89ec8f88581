"""Shared helpers for the benchmark scripts: datasets, cached index builds, cached encoders, timing,
result files. Imported as `bench.common` (scripts run as `python bench/X.py` put the repository root
on the path first; `python -m bench run X` and `python -m bench.X` need nothing)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable


ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TIGRAG_DATA", ROOT.parent / "shared" / "data"))
CACHE = Path(os.environ.get("TIGRAG_BENCH_CACHE", ROOT / ".cache" / "bench"))
RESULTS = ROOT / "bench" / "results"

DATASETS = {
    "2wikimultihopqa": ("2wikimultihopqa/2wikimultihopqa_corpus.json", "2wikimultihopqa/2wikimultihopqa_dev500.json"),
    "musique_train100": ("musique_train100/musique_train_corpus.json", "musique_train100/musique_train.json"),
}

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def code_version() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def machine() -> dict[str, Any]:
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}


def cpu_name() -> str:
    """This machine's CPU as /proc/cpuinfo names it, with its family and model (the machines differ from session to
    session: a figure measured on one is compared only with figures of the same CPU)."""
    path = Path("/proc/cpuinfo")
    text = path.read_text() if path.exists() else ""
    field = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in text.splitlines()[:30])}
    name = field.get("model name", platform.processor() or platform.machine())
    return f"{name} (family {field.get('cpu family', '?')}, model {field.get('model', '?')})"


def synchronize(be: Any) -> None:
    """Wait for the device of backend `be` (a no-op on the CPU), so a clock read afterwards is honest."""
    if be.is_gpu:
        be.xp.cuda.Stream.null.synchronize()


def timed(be: Any, fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """(mean seconds of `repeat` calls of `fn` after one warm-up call, the last result), the device synchronised."""
    fn()  # warm-up: kernel compilation, memory pool
    synchronize(be)
    start = time.perf_counter()
    for _ in range(repeat):
        result = fn()
    synchronize(be)
    return (time.perf_counter() - start) / repeat, result


def bench_index_config():
    """The configuration of the benchmark scripts' reference indexes: the defaults with all-MiniLM-L6-v2 on
    torch, the encoder of every figure since the project began (the engine's default encoder is now
    multilingual-e5-small; bench/studies/encoders.py re-embeds these indexes' chunks for every other encoder)."""
    from gpu_tigrag.config import EncoderConfig, IndexConfig

    return IndexConfig(encoder=EncoderConfig(model="all-MiniLM-L6-v2", backend="torch"))


def dataset_index(name: str, rebuild: bool = False):
    """Load (building once, cached under .cache/bench) the reference index of a dataset (bench_index_config)."""
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import load_index, save_index

    corpus, _ = DATASETS[name]
    path = CACHE / f"index_{name}"
    if rebuild or not (path / "manifest.json").is_file():
        print(f"[{name}] building index (cached at {path})", file=sys.stderr)
        save_index(build_index(load_corpus(DATA / corpus), bench_index_config(), show_progress=True), path)
    index = load_index(path)
    if index.encoder_name != bench_index_config().encoder.model:
        raise SystemExit(f"{path} was built with {index.encoder_name}, not the reference encoder; rebuild it "
                         "(remove the folder)")
    return index


def default_encoder_index(name: str):
    """The dataset `name` (a folder of ../shared/data) indexed with the engine's defaults (multilingual-e5-small),
    built once and cached at .cache/bench/e5_NAME."""
    from gpu_tigrag.config import IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import load_index, save_index

    path = CACHE / f"e5_{name}"
    if not (path / "manifest.json").is_file():
        print(f"[{name}] building the default-encoder index (cached at {path})", file=sys.stderr)
        save_index(build_index(load_corpus(load_dataset(DATA / name).corpus_paths), IndexConfig(), show_progress=True),
                   path)
    return load_index(path)


def dataset_queries(name: str):
    from gpu_tigrag.evaluate.queries import load_queries

    return load_queries(DATA / DATASETS[name][1])


def dataset_runs(names: list[str]):
    """(name, index, queries, cached encoder) per dataset, for scripts that try many retrieval
    settings on the same index: each distinct text is encoded once."""
    from gpu_tigrag.encoders import CachingEncoder, index_encoder_config, load_encoder

    for name in names:
        index = dataset_index(name)
        yield name, index, dataset_queries(name), CachingEncoder(load_encoder(index_encoder_config(index)))


def igraph_graph(adjacency: Any):
    """The undirected python-igraph graph (weights in "weight") of a symmetric scipy CSR adjacency, for
    the comparisons with igraph's personalized_pagerank (throughput.py, ppr_sparse.py)."""
    import igraph
    import numpy as np
    import scipy.sparse

    upper = scipy.sparse.triu(adjacency, k=1).tocoo()
    graph = igraph.Graph(n=adjacency.shape[0], edges=np.column_stack([upper.row, upper.col]).tolist(), directed=False)
    graph.es["weight"] = upper.data.astype(float).tolist()
    return graph


def write_results(stem: str, payload: dict[str, Any], markdown: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"generated": time.strftime("%Y-%m-%d %H:%M:%S"), "code_version": code_version(),
               "machine": machine(), **payload}
    (RESULTS / f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n")
    (RESULTS / f"{stem}.md").write_text(markdown.rstrip() + "\n")
    print(f"wrote {RESULTS / stem}.json and .md", file=sys.stderr)


def checkout_environment(code: Path) -> dict[str, str]:
    """The environment of a process of the checkout `code`: its package first on the path, bytecode written and
    read as an installed package's is (PYTHONDONTWRITEBYTECODE, set on some machines, would compile every module
    in every process and time the compiler)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPATH": str(code)}
