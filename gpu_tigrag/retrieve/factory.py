"""The retriever of a configuration: the method registry says which class answers `config.method`;
this module builds it (the registry itself is a table and builds nothing)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TigragError
from ..methods.registry import get_method, methods

if TYPE_CHECKING:
    from ..index.index import Index
    from .base import BaseRetriever


def make_retriever(index: "Index", config: Any = None, **options: Any) -> "BaseRetriever":
    """The retriever of `config.method` over `index` (default config: the `best` preset, TIGRAG).
    `options` go to its constructor: encoder, backend, vector_cache, allow_mixed_encoder, and
    method-specific ones (e.g. TIGRAG's entity_extractor), which other methods ignore."""
    from .base import check_retriever_arguments

    check_retriever_arguments(index, config)
    if config is None:
        from ..presets import preset

        config = preset()
    cls = get_method(config.method).retriever_class()
    accepted = getattr(cls, "OPTIONS", None)
    if accepted is not None:
        known = set().union(*(getattr(m.retriever_class(), "OPTIONS", ()) for m in methods()))
        unknown = sorted(set(options) - known)
        if unknown:
            raise TigragError(f"unknown retriever option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        options = {k: v for k, v in options.items() if k in accepted}  # the others belong to other methods
    return cls(index, config, **options)
