"""SpectRAG's own BM25: the public code's lexical scores (`query/seed_retrieval.py`), which it
computes with rank_bm25's `BM25Okapi` over the lower-cased `[a-z0-9]+` words of each chunk.

As there (rank_bm25 0.2.2, defaults k1 = 1.5, b = 0.75, ε = 0.25):

    idf(t) = ln(N − df + 0.5) − ln(df + 0.5), and where that is negative, ε · (the mean idf of
             every word of the corpus, negative ones included)
    score(c) = Σ over the query's words, repeats included, of
               idf(t) · tf·(k1 + 1) / (tf + k1·(1 − b + b·|c| / avgdl))

with |c| the chunk's word count (every word, no stopwords removed) and a word not in the corpus
scoring 0. The eager chunks × words matrix holds every (chunk, word) term, so a block of queries
is one sparse product, as the index's BM25 (`ops.fusion.bm25_scores`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse

WORD = re.compile(r"[a-z0-9]+")
K1, B, EPSILON = 1.5, 0.75, 0.25


def okapi_words(text: str) -> list[str]:
    """The public code's BM25 tokens: lower-cased runs of ASCII letters and digits."""
    return WORD.findall(text.lower())


@dataclass
class OkapiBM25:
    """The chunks × words score matrix (float32 CSR) and the word -> column table."""

    matrix: scipy.sparse.csr_matrix
    words: dict[str, int]

    @property
    def n_words(self) -> int:
        return int(self.matrix.shape[1])

    def query_ids(self, text: str) -> np.ndarray:
        """Column ids of a query's words in the corpus, repeats kept (int32)."""
        ids = [self.words[w] for w in okapi_words(text) if w in self.words]
        return np.asarray(ids, dtype=np.int32)


def build_okapi(texts: Sequence[str], k1: float = K1, b: float = B, epsilon: float = EPSILON) -> OkapiBM25:
    """The BM25Okapi matrix of `texts` (module doc)."""
    words: dict[str, int] = {}
    indptr = [0]
    ids: list[int] = []
    for text in texts:
        ids.extend(words.setdefault(w, len(words)) for w in okapi_words(text))
        indptr.append(len(ids))
    n = len(texts)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    counts = scipy.sparse.csr_matrix((np.ones(len(ids)), (rows, np.asarray(ids, dtype=np.int64))),
                                     shape=(n, len(words)))
    counts.sum_duplicates()
    lengths = np.diff(np.asarray(indptr, dtype=np.int64)).astype(np.float64)
    if n == 0 or not words:
        return OkapiBM25(scipy.sparse.csr_matrix((n, len(words)), dtype=np.float32), words)
    avgdl = lengths.sum() / n
    df = np.bincount(counts.indices, minlength=len(words)).astype(np.float64)
    idf = np.log(n - df + 0.5) - np.log(df + 0.5)
    idf = np.where(idf < 0, epsilon * idf.mean(), idf)
    tf = counts.data
    norm = (k1 * (1 - b + b * lengths / avgdl))[np.repeat(np.arange(n), np.diff(counts.indptr))]
    counts.data = idf[counts.indices] * tf * (k1 + 1) / (tf + norm)
    matrix = counts.astype(np.float32)
    matrix.sort_indices()
    return OkapiBM25(matrix, words)
