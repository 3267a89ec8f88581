"""gpu_tigrag: TIGRAG graph-RAG retrieval (token co-occurrence graph, batched PPR,
PPR-weighted BM25, cumulative-mass pooling, embedding rerank, entity-driven multi-hop)
on NumPy/SciPy/Numba or CuPy with one code path.

The main entry points are importable from the package itself::

    from . import IndexConfig, Retriever, build_index, load_corpus, preset

    index = build_index(load_corpus("corpus.json"), IndexConfig())
    results = Retriever(index, preset("best")).retrieve(["Who directed The Glass Orchard?"], k=5)

They are loaded on first use (module `__getattr__`), so `import gpu_tigrag` alone stays cheap
and imports neither NumPy nor torch nor numba; `__all__` lists them.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: OpenBLAS's worker threads go to sleep as soon as a product ends (2**4 cycles of waiting, the least it allows)
#: instead of spinning for ~2**28 cycles beside the numba kernels that follow. Only the dense search's large
#: products use more than one BLAS thread (threads.wide_blas), so the wake-up is noise beside them; the spinning
#: cost SpectRAG 0.8x its rate at 10,000 stand-in passages. Read when OpenBLAS loads (with NumPy), so it is set
#: before anything of the engine imports NumPy; a value the user set is kept.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


def _checkout_kernels() -> None:
    """`gpu_tigrag.kernels` is the repository's top-level kernels/ folder. A wheel installs it inside the
    package (pyproject.toml's package-dir); in a checkout (an editable install, or the repository root on
    the path) it stays at the top, without an __init__.py (so that `import kernels` from the root never
    finds it), and this makes that folder the package's `kernels` before anything imports it."""
    here = Path(__file__).resolve().parent
    folder = here.parent / "kernels"
    if (here / "kernels").is_dir() or not folder.is_dir() or f"{__name__}.kernels" in sys.modules:
        return
    spec = importlib.machinery.ModuleSpec(f"{__name__}.kernels", None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    sys.modules[spec.name] = importlib.util.module_from_spec(spec)


_checkout_kernels()

#: public name -> the module (relative to this package) that defines it
_EXPORTS: dict[str, str] = {
    # configuration and presets
    "IndexConfig": ".config",
    "RetrievalConfig": ".config",
    "replace_path": ".config",
    "TigragQueryConfig": ".methods.tigrag.config",
    "preset": ".presets",
    "PRESETS": ".presets",
    # corpus and queries
    "Passage": ".corpus",
    "load_corpus": ".corpus",
    "Query": ".evaluate.queries",
    "load_queries": ".evaluate.queries",
    "load_dataset": ".evaluate.datasets",
    # evaluation
    "run_experiment": ".evaluate.experiment",
    "parse_system": ".evaluate.experiment",
    "to_run": ".retrieve.results",
    # indexes
    "Index": ".index.index",
    "build_index": ".index.build",
    "build_index_streaming": ".index.stream",
    "add_passages": ".index.add",
    "add_method": ".index.build",
    "load_index": ".index.store",
    "save_index": ".index.store",
    # retrieval
    "Retriever": ".methods.tigrag.retriever",
    "TigragRetriever": ".methods.tigrag.retriever",
    "BaseRetriever": ".retrieve.base",
    "Method": ".methods.registry",
    "register_method": ".methods.registry",
    "SpectragRetriever": ".methods.spectrag.retriever",
    "LitesemragRetriever": ".methods.litesemrag.retriever",
    "make_retriever": ".retrieve.factory",
    "QueryResult": ".retrieve.results",
    "get_backend": ".backend",
    # query runs over files
    "run_queries": ".batch_run",
    "run_distributed": ".dask_run",
    # errors
    "TigragError": ".errors",
}

#: the public names: those of _EXPORTS (a test checks that the two agree) and the version
__all__ = [
    "BaseRetriever", "Index", "IndexConfig", "Method", "LitesemragRetriever", "PRESETS", "Passage", "Query", "QueryResult", "RetrievalConfig", "Retriever",
    "SpectragRetriever", "TigragError", "TigragQueryConfig", "TigragRetriever", "__version__", "add_method", "add_passages", "build_index",
    "build_index_streaming", "get_backend", "load_corpus", "load_dataset", "load_index", "load_queries",
    "make_retriever", "parse_system", "preset", "register_method", "replace_path", "run_distributed", "run_experiment",
    "run_queries", "save_index", "to_run",
]


def __getattr__(name: str) -> Any:
    """Import the module defining `name` on first access and cache the value here."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # for type checkers and editors; never executed
    from .backend import get_backend
    from .batch_run import run_queries
    from .config import IndexConfig, RetrievalConfig, replace_path
    from .corpus import Passage, load_corpus
    from .dask_run import run_distributed
    from .errors import TigragError
    from .evaluate.datasets import load_dataset
    from .evaluate.experiment import parse_system, run_experiment
    from .evaluate.queries import Query, load_queries
    from .retrieve.results import to_run
    from .index.add import add_passages
    from .index.build import add_method, build_index
    from .index.index import Index
    from .index.store import load_index, save_index
    from .index.stream import build_index_streaming
    from .presets import PRESETS, preset
    from .retrieve.results import QueryResult
    from .retrieve.factory import make_retriever
    from .methods.registry import Method
    from .methods.registry import register as register_method
    from .methods.tigrag.retriever import Retriever, TigragRetriever
    from .methods.tigrag.config import TigragQueryConfig
    from .retrieve.base import BaseRetriever
    from .methods.litesemrag.retriever import LitesemragRetriever
    from .methods.spectrag.retriever import SpectragRetriever
