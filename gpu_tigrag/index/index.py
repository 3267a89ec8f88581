"""The in-memory index: host arrays of every stage plus the configuration that built them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse

from ..config import IndexConfig
from ..text.tokens import Vocabulary
from ..methods.spectrag.chunk_graph import ChunkGraph
from .entities import ChunkEntities
from ..methods.litesemrag.semantic_graph import SemanticGraph


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
    graph: scipy.sparse.csr_matrix  # vocab × vocab, symmetric, float32 co-occurrence counts
    bm25: scipy.sparse.csr_matrix  # chunks × vocab, float32
    embeddings: np.ndarray  # chunks × dim, float32, L2-normalised
    entities: ChunkEntities
    encoder_name: str
    encoder_fingerprint: str
    encoder_backend: str = "torch"  # the runtime that computed `embeddings` (indexes before it was recorded: torch)
    stats: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    spectrag: ChunkGraph | None = None  # SpectRAG's stage, when built (`tigrag index --methods spectrag`)
    litesemrag: SemanticGraph | None = None  # LiteSemRAG's stage, when built (`--methods litesemrag`)

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

    def chunk_title(self, chunk: int) -> str:
        return self.passage_titles[int(self.chunk_passage[chunk])]
