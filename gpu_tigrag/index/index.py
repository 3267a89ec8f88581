"""The in-memory index: host arrays of the base index, the method stages built over it, and the
configuration that built them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import scipy.sparse

from ..config import IndexConfig
from ..text.tokens import Vocabulary
from .entities import ChunkEntities


@dataclass
class Index:
    config: IndexConfig
    passage_titles: list[str]
    passage_ids: list[str]
    chunk_texts: list[str]
    chunk_passage: np.ndarray  # int32 chunk -> passage
    vocab: Vocabulary
    token_indptr: np.ndarray  # int64, chunk -> its valid token ids (reading order)
    token_ids: np.ndarray  # int32
    graph: scipy.sparse.csr_matrix  # the token graph: vocab × vocab, symmetric, float32 co-occurrence counts
    bm25: scipy.sparse.csr_matrix  # chunks × vocab, float32
    embeddings: np.ndarray  # chunks × dim, float32, L2-normalised
    entities: ChunkEntities
    encoder_name: str
    encoder_fingerprint: str
    encoder_backend: str = "torch"  # the runtime that computed `embeddings` (indexes before it was recorded: torch)
    stats: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    stages: dict[str, Any] = field(default_factory=dict)  # method name -> its index stage (or a StageLoader)
    ann: Any = None  # the ANN index of `embeddings` (index/ann.py: AnnIndex), None when it holds none

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_texts)

    @property
    def n_vocab(self) -> int:
        return len(self.vocab)

    @property
    def encoder_identity(self) -> tuple[str, str, str]:
        """(model name, weights fingerprint, backend) of the passage vectors."""
        return self.encoder_name, self.encoder_fingerprint, self.encoder_backend

    def has_stage(self, method: str) -> bool:
        """Whether the index holds `method`'s stage (without loading it)."""
        return self.stages.get(method) is not None

    def stage(self, method: str) -> Any:
        """`method`'s stage, None when the index has none; a stored stage is read and validated here,
        on first use, so a damaged stage fails only the method that uses it."""
        value = self.stages.get(method)
        if isinstance(value, StageLoader):
            value = value(self)
            self.stages[method] = value
        return value

    def stage_loaded(self, method: str) -> bool:
        """Whether `method`'s stage is in memory (built here, or stored and already read)."""
        return self.has_stage(method) and not isinstance(self.stages[method], StageLoader)

    def with_stage(self, method: str, stage: Any) -> "Index":
        """A copy of this index whose stage of `method` is `stage` (None: without one)."""
        stages = {**self.stages, method: stage}
        if stage is None:
            del stages[method]
        return dataclasses.replace(self, stages=stages)

    def __getattr__(self, name: str) -> Any:
        """A stage also reads as an attribute of its method's name (`index.spectrag`)."""
        if name.startswith("_") or name == "stages":
            raise AttributeError(name)
        from ..methods.registry import stage_methods

        if any(m.name == name for m in stage_methods()):
            return self.stage(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def chunk_title(self, chunk: int) -> str:
        return self.passage_titles[int(self.chunk_passage[chunk])]


@dataclass
class StageLoader:
    """A stored stage not read yet: `load(index)` reads and validates it against `index` (load.py).
    `stored` says where its files are, so that saving the index carries them over unread (a damaged
    stage then fails only its own method, never a write of the rest)."""

    method: str
    load: Callable[["Index"], Any]
    stored: Any = None

    def __call__(self, index: "Index") -> Any:
        return self.load(index)
