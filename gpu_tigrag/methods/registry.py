"""One entry point for every retrieval method: `make_retriever` reads `config.method` and returns
the retriever that answers it. Every retriever has the same protocol (`prepare(queries)`,
`run_prepared(batch, k)`, `retrieve(queries, k)`, `batch_size()`, `timer`) and returns
`QueryResult`s, so `query`, `eval`, `run`, Dask runs and reports treat methods alike."""

from __future__ import annotations

from typing import Any

from ..config import RetrievalConfig
from ..index.index import Index


def make_retriever(index: Index, config: RetrievalConfig | None = None, **options: Any) -> Any:
    """The retriever of `config.method` over `index` (default: the `best` preset, TIGRAG). `options`
    go to its constructor: encoder, backend, vector_cache, allow_mixed_encoder."""
    from .tigrag.retriever import Retriever

    if config is None or config.method == "tigrag":
        return Retriever(index, config, **options)
    if config.method == "litesemrag":
        from .litesemrag.retriever import LitesemragRetriever

        options.pop("entity_extractor", None)
        return LitesemragRetriever(index, config, **options)
    from .spectrag.retriever import SpectragRetriever

    return SpectragRetriever(index, config, **options)


def method_available(index: Index, method: str) -> bool:
    """Whether `index` holds the arrays `method` needs (TIGRAG: always; SpectRAG, LiteSemRAG: their stage)."""
    return method == "tigrag" or getattr(index, method, None) is not None
