"""SpectRAG's LLM-free edge signals over chunk pairs (its paper's Table 1, "Edge signals").

Each signal returns a host SciPy CSR matrix n × n of scores in [0, 1], symmetric (the larger
score of (i, j) and (j, i)), without self loops but the entity signal's (below); a pair it does
not link is absent. The heavy
parts run on the backend (`be.xp`, `be.sparse`): the blocked E·Eᵀ of the semantic and question
signals and the X·Xᵀ SpGEMM of the shared-key signals (entities, citations).

- semantic: the top-k chunks by inner product of L2-normalised embeddings, kept from a cosine.
- adjacency: consecutive chunks of one passage (chunk order within a passage = position), score 1.
- section: heading paths; the passages here have none, so it is empty (kept to report 0 edges).
- entity: shared NER entities (the index's entity table, a label filter); count / max count. The
  public code's `ner` mode, our stand-in for its LLM "concepts". Its count (`entity_pairs="labels"`):
  a chunk's distinct (text, label) pairs are its terms, so a text tagged with two labels counts
  twice and pairs with itself (a self loop on the diagonal), and a text counts from two
  occurrences; "distinct": each shared text once, from two chunks, no self pairs. An entity in
  more than `entity_max_share` of the chunks (and over 1,000 of them) is skipped: it links c² pairs (10,000 copies of one
  passage: 50 M) and, as its idf says, tells no chunk apart.
- citation: shared `[n]` markers, "doi:" DOIs and URLs (the public code's patterns); count / max count.
- question: no LLM writes questions here; the `sentences` ablation embeds each chunk's
  sentences as stand-in questions and links chunks whose questions are near (cos >= threshold);
  `links` stands in with what such questions mostly ask about on a Wikipedia-style corpus: a chunk that
  names another passage's title ("Where was the director of X born?" joins X's page to its director's)
  is linked to that passage's chunks, score 1 (text/titles.py finds the mentions).

The shared-key signals (entity, citation) count their chunk pairs before the product and stop with
a clear error where they would not fit `spectrag.memory_budget_mb` (`PairBudget`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse

from ...backend import Backend, get_backend
from ...errors import TigragError
from ...progress import counter
from ...ops.topk import top_k_rows
from ...index.entities import ChunkEntities, label_mask
from ...text.titles import forward_title_links

#: working memory of one block of the blocked similarity products (float32 entries)
BLOCK_ENTRIES = 1 << 24
#: peak bytes per chunk pair of a shared-key signal while it is built and combined into W (the
#: SpGEMM output, its COO copy, the symmetric de-duplication's sort keys, combine_signals' union):
#: 100-106 measured (peak RSS) on 1,000-4,000 chunks sharing every entity, spectral solve included
PAIR_BYTES = 110

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PairBudget:
    """The memory a shared-key signal may take (`PAIR_BYTES` per chunk pair) and the settings a
    user changes when its pairs do not fit (named in the error)."""

    mib: int
    what: str  # e.g. "the entity signal"
    remedy: str  # e.g. "lower spectrag.entity_max_share (now 0.5) or raise spectrag.memory_budget_mb"

    def check(self, pairs: int, widest: int, n: int) -> None:
        """TigragError when `pairs` chunk pairs (the widest key held by `widest` of `n` chunks) need more than the budget."""
        need = pairs * PAIR_BYTES
        if need > self.mib << 20:
            raise TigragError(
                f"SpectRAG: {self.what} would count {pairs:,} chunk pairs (ordered: a key shared by {widest:,} of "
                f"the {n:,} chunks links {widest:,}² of them), about {need / 2**20:,.0f} MiB, over the budget of "
                f"{self.mib:,} MiB; {self.remedy}")


def empty_signal(n: int) -> scipy.sparse.csr_matrix:
    """The n × n matrix of a signal that links nothing."""
    return scipy.sparse.csr_matrix((n, n), dtype=np.float32)


def symmetric_max(rows: np.ndarray, cols: np.ndarray, scores: np.ndarray, n: int,
                  self_pairs: bool = False) -> scipy.sparse.csr_matrix:
    """Symmetric CSR of pairs (rows[e], cols[e]) with the largest score given to each unordered pair;
    self pairs are dropped unless `self_pairs` (then they sit on the diagonal). Host arrays in, host
    matrix out."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    scores = np.asarray(scores, dtype=np.float32)
    off = np.ones(rows.size, dtype=bool) if self_pairs else rows != cols
    lo, hi, scores = np.minimum(rows, cols)[off], np.maximum(rows, cols)[off], scores[off]
    if lo.size == 0:
        return empty_signal(n)
    keys = lo * n + hi
    order = np.lexsort((scores, keys))  # by key, then score ascending: the last of each key is its maximum
    keys, scores = keys[order], scores[order]
    last = np.append(keys[1:] != keys[:-1], True)
    keys, scores = keys[last], scores[last]
    lo, hi = keys // n, keys % n
    two = lo != hi  # a self pair is entered once
    matrix = scipy.sparse.coo_matrix((np.concatenate([scores, scores[two]]),
                                      (np.concatenate([lo, hi[two]]), np.concatenate([hi, lo[two]]))),
                                     shape=(n, n)).tocsr()
    matrix.sort_indices()
    return matrix


def _block_rows(n: int) -> int:
    return max(1, min(n, BLOCK_ENTRIES // max(n, 1)))


def nearest_pairs(be: Backend, vectors: Any, k: int, show_progress: bool = False, desc: str = "similarity",
                  unit: str = "chunk") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query rows, neighbour rows, inner products) of the exact top-k neighbours of every row of
    `vectors` (m × d, on the backend), self excluded; blocks of rows keep the m × block scores bounded.
    Ties at the cut go to the lowest row ids (`top_k_rows`)."""
    xp = be.xp
    m = int(vectors.shape[0])
    k = min(k, m - 1)
    if k < 1:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    step = _block_rows(m)
    sources, targets, values = [], [], []
    bar = counter(m, desc, show_progress, unit=unit)
    for start in range(0, m, step):
        stop = min(m, start + step)
        scores = vectors @ vectors[start:stop].T  # m × b: column j holds row start + j against every row
        cols = xp.arange(stop - start)
        scores[cols + start, cols] = -xp.inf
        ids = top_k_rows(be, scores, k)  # k × b
        sources.append(be.to_host(xp.broadcast_to(cols[None, :] + start, ids.shape).ravel()))
        targets.append(be.to_host(ids.ravel()))
        values.append(be.to_host(xp.take_along_axis(scores, ids, axis=0).ravel()))
        bar.update(stop - start)
    bar.close()
    return (np.concatenate(sources).astype(np.int64), np.concatenate(targets).astype(np.int64),
            np.concatenate(values).astype(np.float32))


def ivf_nearest_pairs(embeddings: np.ndarray, k: int, nprobe: int, show_progress: bool = False,
                      step: int = 65_536) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`nearest_pairs`' answer from an IVF index (index/ann.py's: 4·√n lists, seeded training), each chunk's
    k nearest among the chunks of its `nprobe` nearest lists, self excluded: the cost grows with n·√n, not
    n². The inner products are FAISS's (float32)."""
    from ...config_types import AnnConfig
    from ...index.ann import build_ann, import_faiss

    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), np.float32(1e-12))
    m = int(vectors.shape[0])
    k = min(k, m - 1)
    if k < 1:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.float32)
    faiss = import_faiss("spectrag.semantic_search=ivf")
    index = build_ann(vectors, AnnConfig(), kind="ivf").faiss_index()
    params = faiss.SearchParametersIVF(nprobe=min(nprobe, int(index.nlist)))
    sources, targets, values = [], [], []
    bar = counter(m, "semantic (ivf)", show_progress, unit="chunk")
    for start in range(0, m, step):
        rows = vectors[start:start + step]
        scores, found = index.search(rows, k + 1, params=params)
        own = np.arange(start, start + rows.shape[0])[:, None]
        keep = (found >= 0) & (found != own)
        # each row's k best other chunks (a row whose own id was not returned keeps its first k)
        rank = np.cumsum(keep, axis=1)
        keep &= rank <= k
        sources.append(np.broadcast_to(own, found.shape)[keep])
        targets.append(found[keep])
        values.append(scores[keep])
        bar.update(rows.shape[0])
    bar.close()
    return (np.concatenate(sources).astype(np.int64), np.concatenate(targets).astype(np.int64),
            np.concatenate(values).astype(np.float32))


def _normalised(be: Backend, vectors: np.ndarray) -> Any:
    matrix = be.asarray(np.ascontiguousarray(vectors, dtype=np.float32))
    norms = be.xp.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / be.xp.where(norms > 0, norms, 1.0)


def semantic_signal(embeddings: np.ndarray, top_k: int, threshold: float, backend: Backend | None = None,
                    show_progress: bool = False, search: str = "exact", nprobe: int = 64) -> scipy.sparse.csr_matrix:
    """Top-`top_k` neighbours of each chunk by cosine (self excluded), kept when cos >= `threshold`;
    score = cos, clipped to [0, 1] (float rounding can pass 1 by an ulp). `search` "exact": every pair;
    "ivf": among the chunks of `nprobe` IVF lists (`ivf_nearest_pairs`)."""
    be = backend or get_backend("numpy")
    n = int(embeddings.shape[0])
    if search == "ivf":
        src, dst, cos = ivf_nearest_pairs(embeddings, top_k, nprobe, show_progress)
    else:
        src, dst, cos = nearest_pairs(be, _normalised(be, embeddings), top_k, show_progress, "semantic")
    keep = cos >= threshold
    return symmetric_max(src[keep], dst[keep], np.clip(cos[keep], 0.0, 1.0), n)


def adjacency_signal(chunk_passage: np.ndarray) -> scipy.sparse.csr_matrix:
    """Score 1 between consecutive chunks of the same passage (reading order within a passage)."""
    owner = np.asarray(chunk_passage, dtype=np.int64)
    n = owner.size
    order = np.argsort(owner, kind="stable")  # chunks of a passage in their order; contiguous already when built
    same = owner[order[1:]] == owner[order[:-1]]
    return symmetric_max(order[:-1][same], order[1:][same], np.ones(int(same.sum()), dtype=np.float32), n)


def section_signal(n: int) -> scipy.sparse.csr_matrix:
    """Heading-path links: the passages carry no headings, so none (the public code's output on such text)."""
    return empty_signal(n)


def shared_key_signal(chunks: np.ndarray, keys: np.ndarray, n: int, backend: Backend | None = None,
                      multiplicity: bool = False, max_chunks: int | None = None,
                      pair_budget: PairBudget | None = None) -> scipy.sparse.csr_matrix:
    """Chunks sharing keys: (chunk, key) occurrences -> incidence X, counts = X·Xᵀ (SpGEMM on the
    backend), score = count / max count.

    Default: a key counts once per chunk, keys in >= 2 chunks, the diagonal dropped. With
    `multiplicity` (the public code's term lists): each occurrence counts, keys with >= 2
    occurrences; a pair of chunks counts m_i·m_j and a chunk pairs with itself m_i·(m_i − 1)/2
    times for a key it holds m_i times (its self loop, on the diagonal).

    A key held by more than `max_chunks` distinct chunks is skipped (it would link c² pairs and
    tells the chunks apart no more than a stopword). `pair_budget`: the chunk pairs X·Xᵀ can hold
    (Σ c² over the keys, at most n²) are counted before the product, and a count over the budget
    is a TigragError saying what to change."""
    be = backend or get_backend("numpy")
    chunks, keys = np.asarray(chunks, dtype=np.int64), np.asarray(keys, dtype=np.int64)
    if chunks.size == 0:
        return empty_signal(n)
    width = int(keys.max()) + 1
    pairs, times = np.unique(chunks * width + keys, return_counts=True)
    chunks, keys = pairs // width, pairs % width
    times = times if multiplicity else np.ones_like(times)
    frequent = np.bincount(keys, weights=times, minlength=width) >= 2
    holders = np.bincount(keys, minlength=width)  # distinct chunks per key
    if max_chunks is not None:
        common = frequent & (holders > max_chunks)
        if common.any():
            log.info("%s: %d key(s) held by more than %s chunks skipped (the most common: %s chunks)",
                     pair_budget.what if pair_budget else "shared keys", int(common.sum()), f"{max_chunks:,}",
                     f"{int(holders.max()):,}")
        frequent &= ~common
    if pair_budget is not None:
        pair_budget.check(min(int((holders[frequent].astype(np.int64) ** 2).sum()), n * n), int(holders[frequent].max(
            initial=0)), n)
    keep = frequent[keys]
    chunks, keys, times = chunks[keep], keys[keep], times[keep]
    if chunks.size == 0:
        return empty_signal(n)
    _, keys = np.unique(keys, return_inverse=True)
    incidence = scipy.sparse.csr_matrix((times.astype(np.float32), (chunks, keys)), shape=(n, int(keys.max()) + 1))
    x = be.csr(incidence)
    counts = be.to_host((x @ x.T).tocsr()).tocoo()  # float32 counts: exact up to 2^24
    rows, cols, data = counts.row, counts.col, counts.data.astype(np.float64)
    if multiplicity:  # the diagonal holds Σ m²: the self pairs are Σ m(m − 1)/2
        diagonal = rows == cols
        square = np.bincount(chunks, weights=times.astype(np.float64) ** 2, minlength=n)
        linear = np.bincount(chunks, weights=times.astype(np.float64), minlength=n)
        data[diagonal] = (square[rows[diagonal]] - linear[rows[diagonal]]) / 2
        off = data > 0
    else:
        off = (rows != cols) & (data > 0)
    rows, cols, data = rows[off], cols[off], data[off]
    if data.size == 0:
        return empty_signal(n)
    return symmetric_max(rows, cols, (data / data.max()).astype(np.float32), n, self_pairs=multiplicity)


def entity_signal(entities: ChunkEntities, n: int, labels: Sequence[str], backend: Backend | None = None,
                  pairs: str = "labels", max_chunks: int | None = None,
                  pair_budget: PairBudget | None = None) -> scipy.sparse.csr_matrix:
    """Shared named entities: occurrences whose label is one of `labels`; score = shared-entity
    count / the largest count. `pairs` (module doc): "labels", the public code's count of a
    chunk's distinct (text, label) terms with self pairs, or "distinct". An entity in more than
    `max_chunks` chunks is skipped; `pair_budget` bounds the pairs (`shared_key_signal`)."""
    mask = label_mask(labels)
    counts = np.diff(entities.chunk_indptr).astype(np.int64)
    owner = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    masks = entities.chunk_masks.astype(np.int64)
    keep = (masks & mask) != 0
    owner, ids, masks = owner[keep], entities.chunk_ids[keep].astype(np.int64), masks[keep]
    if pairs == "labels":  # the code's terms: a chunk's distinct (text, label) pairs (one label bit per occurrence)
        owner, ids = np.unique(np.stack([owner, ids, masks]), axis=1)[:2] if owner.size else (owner, ids)
    return shared_key_signal(owner, ids, n, backend, multiplicity=pairs == "labels", max_chunks=max_chunks,
                             pair_budget=pair_budget)


#: the public code's citation keys (`edges/citation.py`): bracketed numbers, "doi:"-prefixed DOIs, URLs
_BRACKET = re.compile(r"\[(\d+(?:[,;]\s*\d+)*)\]")
_DOI = re.compile(r"doi:\s*(10\.\d{4,}/\S+)", re.IGNORECASE)
_URL = re.compile(r"https?://[^\s>\"']+")
_TRAILING = ".,;)"


def citation_keys(text: str) -> set[str]:
    """The citation keys of a text, as the public code reads them: `ref:N` per bracketed number
    ([3], [1, 4]), `doi:...` for a DOI written after "doi:" (lower-cased), `url:...` (trailing
    ".,;)" stripped)."""
    keys = {f"ref:{number.strip()}" for found in _BRACKET.findall(text) for number in re.split(r"[,;]\s*", found)}
    keys.update(f"doi:{doi.lower()}" for doi in _DOI.findall(text))
    keys.update(f"url:{url.rstrip(_TRAILING)}" for url in _URL.findall(text))
    return keys


def citation_signal(chunk_texts: Sequence[str], backend: Backend | None = None,
                    pair_budget: PairBudget | None = None) -> scipy.sparse.csr_matrix:
    """Shared citation keys (`citation_keys`); score = shared-key count / the largest count;
    `pair_budget` bounds the pairs (`shared_key_signal`)."""
    ids: dict[str, int] = {}
    chunks: list[int] = []
    keys: list[int] = []
    for c, text in enumerate(chunk_texts):  # a regex scan per chunk: the one per-chunk loop here
        for key in citation_keys(text):
            chunks.append(c)
            keys.append(ids.setdefault(key, len(ids)))
    return shared_key_signal(np.asarray(chunks), np.asarray(keys), len(chunk_texts), backend,
                             pair_budget=pair_budget)


def link_signal(chunk_texts: Sequence[str], chunk_passage: np.ndarray, titles: Sequence[str],
                title_in_chunk: bool) -> scipy.sparse.csr_matrix:
    """Title links as a graph signal: `forward_title_links` made symmetric (c names p's title: c and p's
    chunks are linked both ways), score 1, no self pairs."""
    forward = forward_title_links(chunk_texts, chunk_passage, titles, title_in_chunk)
    matrix = forward.maximum(forward.T).tocsr()
    matrix.sort_indices()
    return matrix


def question_signal(questions: Sequence[Sequence[str]], encoder: Any, top_k: int, threshold: float,
                    backend: Backend | None = None, show_progress: bool = False) -> scipy.sparse.csr_matrix:
    """Utility-question links: every question (`questions[c]` are chunk c's) is searched against all
    questions, top `top_k` by cosine (itself included, as the public code's FAISS search); chunks
    c != c' are linked when a pair of their questions has cos >= `threshold`; score = the best cos."""
    be = backend or get_backend("numpy")
    n = len(questions)
    owner = np.repeat(np.arange(n, dtype=np.int64), [len(q) for q in questions])
    flat = [q for qs in questions for q in qs]
    if len(flat) < 2:
        return empty_signal(n)
    vectors = _normalised(be, encoder.encode(flat, show_progress=show_progress))  # as documents, as the code
    # the search's first hit is the question itself: top_k − 1 others
    src, dst, cos = nearest_pairs(be, vectors, top_k - 1, show_progress, "questions", "question")
    keep = cos >= threshold
    return symmetric_max(owner[src[keep]], owner[dst[keep]], np.clip(cos[keep], 0.0, 1.0), n)
