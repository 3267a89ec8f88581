"""The chunks × vocab BM25 matrix (eager, as bm25s does): entry (c, v) is BM25(v, c) of eq. 3.7.

BM25(v, c) = idf(v) · tf·(k1+1) / (tf + k1·(1 − b + b·|c|/avgdl)), with Lucene's
non-negative idf(v) = ln(1 + (N − df + 0.5)/(df + 0.5)); |c| is the chunk's number of valid
tokens and tf the count of v among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import Backend, expand_counts
from ..config_types import BM25Config


def term_frequencies(be: Backend, indptr: Any, ids: Any, n_vocab: int) -> Any:
    """chunks × vocab CSR of token counts (float32); `indptr`/`ids` host or backend arrays."""
    xp = be.xp
    indptr, ids = be.asarray(indptr), be.asarray(ids)
    n_chunks = indptr.size - 1
    rows = expand_counts(xp, xp.diff(indptr)).astype(xp.int32)
    data = xp.ones(ids.size, dtype=xp.float32)
    tf = be.sparse.coo_matrix((data, (rows, ids)), shape=(n_chunks, n_vocab)).tocsr()
    tf.sum_duplicates()
    return tf


def idf(n_docs: int, doc_freq: Any, xp: Any) -> Any:
    return xp.log1p((n_docs - doc_freq + 0.5) / (doc_freq + 0.5)).astype(xp.float32)


@dataclass(frozen=True)
class CorpusStatistics:
    """What BM25 needs from the whole corpus; additive over partitions (counts and lengths)."""

    n_docs: int
    total_length: int
    doc_freq: np.ndarray  # int64 per vocabulary token

    @property
    def avgdl(self) -> float:
        return self.total_length / self.n_docs if self.n_docs else 1.0

    def __add__(self, other: "CorpusStatistics") -> "CorpusStatistics":
        return CorpusStatistics(self.n_docs + other.n_docs, self.total_length + other.total_length,
                                self.doc_freq + other.doc_freq)


def corpus_statistics(be: Backend, indptr: Any, ids: Any, n_vocab: int, tf: Any = None) -> CorpusStatistics:
    """Chunk count, total length and document frequencies of these chunks."""
    tf = term_frequencies(be, indptr, ids, n_vocab) if tf is None else tf
    if tf.nnz == 0:  # CuPy's bincount fails on an empty input, whatever minlength says
        doc_freq = np.zeros(n_vocab, dtype=np.int64)
    else:
        doc_freq = be.to_host(be.xp.bincount(tf.indices, minlength=n_vocab)).astype(np.int64)
    return CorpusStatistics(tf.shape[0], int(indptr[-1]) - int(indptr[0]), doc_freq)


def bm25_matrix(be: Backend, indptr: Any, ids: Any, n_vocab: int, config: BM25Config,
                stats: CorpusStatistics | None = None) -> Any:
    """chunks × vocab CSR float32 of BM25(v, c); `stats` of the whole corpus when these chunks
    are one partition of it (default: the chunks themselves are the corpus)."""
    xp = be.xp
    indptr = be.asarray(indptr)
    tf = term_frequencies(be, indptr, ids, n_vocab)
    if stats is None:
        stats = corpus_statistics(be, indptr, ids, n_vocab, tf)
    doc_len = xp.diff(indptr).astype(xp.float32)
    avgdl = stats.avgdl
    doc_freq = be.asarray(stats.doc_freq).astype(xp.float32)
    weights = idf(stats.n_docs, doc_freq, xp)
    row_of_entry = expand_counts(xp, xp.diff(tf.indptr))
    norm = config.k1 * (1.0 - config.b + config.b * doc_len / max(avgdl, 1e-9))
    t = tf.data
    tf.data = (weights[tf.indices] * t * (config.k1 + 1.0) / (t + norm[row_of_entry])).astype(xp.float32)
    return tf
