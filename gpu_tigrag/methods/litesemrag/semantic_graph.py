"""LiteSemRAG's index stage (paper sections 3.1-3.2; docs/design-notes.md#litesemrag-index): the
heterogeneous semantic graph over the index's chunks, stored as arrays.

- *Token nodes* are the distinct span strings (entities, noun-chunk phrases, content tokens:
  `spans.py`), `strings`.
- *Semantic nodes* are their prototypes (`prototypes.py`): `proto_ptr` (string → its prototypes)
  and `proto_vectors` (unit rows).
- *Chunk edges*: `tf`, prototypes × chunks, how often a chunk's occurrences of the string were
  assigned to the prototype; `chunk_len`, the chunk's length in spaCy tokens (of the raw text, as the
  public code counts it). BM25 per prototype (`bm25`) derives from them: idf_p = ln((N+1)/(df_p+1))
  + 1, k1 and b of the config.
- *Span vectors* are read from the raw chunk text by default, as the public code's index side does
  (`litesemrag.encode_cleaned_text` false: the offsets index the cleaned text, so after a deleted
  quote they point a few characters off), or from the cleaned text (true).
- The word → phrase index of partial matching derives from `strings` (`phrase_index`).

The chunks are the index's own (`Index.chunk_texts`), so LiteSemRAG, TIGRAG and SpectRAG rank
the same units.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse

from .config import LitesemragIndexConfig
from ...errors import TigragError

log = logging.getLogger(__name__)

#: the version of the stage's rules, recorded in its stats: 2 = the public code's span rules and chunk
#: lengths; a stage of another version is refused at load (stage.py) and rebuilt by
#: `tigrag extend INDEX --methods litesemrag`
STAGE_VERSION = 2


@dataclass
class SemanticGraph:
    strings: list[str]  # token nodes: distinct span keys
    proto_ptr: np.ndarray  # int64 (strings + 1)
    proto_vectors: np.ndarray  # float32 prototypes × d, unit rows
    tf: scipy.sparse.csr_matrix  # float32 prototypes × chunks, occurrence counts
    chunk_len: np.ndarray  # int32 per chunk, spaCy tokens of its raw text (spans.parse_spans)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def n_chunks(self) -> int:
        return int(self.chunk_len.size)

    @property
    def n_prototypes(self) -> int:
        return int(self.proto_vectors.shape[0])

    @cached_property
    def proto_string(self) -> np.ndarray:
        """int64 per prototype: its string."""
        return np.repeat(np.arange(len(self.strings)), np.diff(self.proto_ptr))

    @cached_property
    def string_ids(self) -> dict[str, int]:
        return {s: i for i, s in enumerate(self.strings)}

    @cached_property
    def phrase_index(self) -> dict[str, np.ndarray]:
        """word → ids of the phrase strings (>= 2 words) that contain it (the index of partial matching)."""
        index: dict[str, list[int]] = {}
        for i, s in enumerate(self.strings):
            words = s.split()
            if len(words) >= 2:
                for w in set(words):
                    index.setdefault(w, []).append(i)
        return {w: np.array(ids, dtype=np.int64) for w, ids in index.items()}

    def bm25(self, k1: float, b: float) -> scipy.sparse.csr_matrix:
        """Prototypes × chunks float32 BM25 weights (module doc)."""
        n = self.n_chunks
        tf = self.tf.tocsr()
        df = np.diff(tf.indptr).astype(np.float64)
        idf = np.log((n + 1) / (df + 1)) + 1.0
        lengths = self.chunk_len.astype(np.float64)
        avg = float(lengths.mean()) if n and lengths.mean() > 0 else 1.0
        counts = tf.data.astype(np.float64)
        norm = k1 * (1 - b + b * lengths[tf.indices] / avg)
        rows = np.repeat(np.arange(tf.shape[0]), np.diff(tf.indptr))
        data = idf[rows] * counts * (k1 + 1) / (counts + norm)
        return scipy.sparse.csr_matrix((data.astype(np.float32), tf.indices.copy(), tf.indptr.copy()), shape=tf.shape)


@dataclass
class SpanOccurrences:
    """Every span of the chunks with its vector(s): the inputs of the prototypes (a layer sweep keeps
    these and assembles one semantic graph per setting)."""

    spans: list  # per chunk: its spans (spans.Span)
    lengths: np.ndarray  # int32 per chunk: spaCy tokens
    vectors: list[np.ndarray]  # per requested layer: float32 spans × d
    keep: np.ndarray  # bool per span: it overlapped an encoded sub-word
    encoder_name: str
    encoder_fingerprint: str
    encoder_max_length: int
    seconds: dict[str, float]


def extract_occurrences(chunk_texts: list[str], config: LitesemragIndexConfig, nlp=None, encoder=None,
                        show_progress: bool = False, layers: list[int] | None = None) -> SpanOccurrences:
    """Spans of `chunk_texts` and their vectors at `layers` (default: config.layer). `nlp`: the span
    pipeline (default: config.spacy_model's); `encoder`: a `TokenStateEncoder` (default: config's)."""
    from .spans import clean_text, load_span_pipeline, parse_spans
    from .token_states import TokenStateEncoder

    timings: dict[str, float] = {}
    t = time.perf_counter()
    if nlp is None:
        nlp = load_span_pipeline(config.spacy_model)
    spans, lengths = parse_spans(chunk_texts, nlp, show_progress=show_progress,
                                 protect_single_capitals=config.protect_single_capitals)
    t = _lap(timings, "spans", t)
    encoder = encoder or TokenStateEncoder(config.token_encoder, config.layer, config.max_length, config.batch_size)
    encoded = [clean_text(text, config.protect_single_capitals) for text in chunk_texts] \
        if config.encode_cleaned_text else list(chunk_texts)
    vectors, keep = encoder.span_vectors_by_layer(encoded, spans, layers or [config.layer], show_progress)
    _lap(timings, "token_states", t)
    return SpanOccurrences(spans, lengths.astype(np.int32), vectors, keep, encoder.name, encoder.fingerprint,
                           encoder.max_length, timings)


def build_semantic_graph(chunk_texts: list[str], config: LitesemragIndexConfig, nlp=None, encoder=None,
                         show_progress: bool = False) -> SemanticGraph:
    """The stage over `chunk_texts` (module doc). `nlp`: the span pipeline (default: config.spacy_model's,
    `spans.load_span_pipeline`); `encoder`: a `TokenStateEncoder` (default: config.token_encoder)."""
    found = extract_occurrences(chunk_texts, config, nlp, encoder, show_progress)
    return assemble_semantic_graph(found, 0, config, show_progress, in_place=True)


def assemble_semantic_graph(found: SpanOccurrences, layer_slot: int, config: LitesemragIndexConfig,
                            show_progress: bool = False, in_place: bool = False) -> SemanticGraph:
    """The stage from extracted occurrences, with the vectors of `found.vectors[layer_slot]`. With `in_place` those
    vectors are normalised where they lie (`found` is not used again: a build), so the span vectors, the largest
    array of a build, are held once; without it (a sweep assembling several stages) they are copied once."""
    from .prototypes import build_prototypes

    timings = dict(found.seconds)
    t = time.perf_counter()
    spans, keep, vectors = found.spans, found.keep, found.vectors[layer_slot]
    keys = [span.text for chunk_spans in spans for span in chunk_spans]
    chunk_of = np.repeat(np.arange(len(spans)), [len(s) for s in spans])
    kept = np.nonzero(keep)[0]
    if kept.size < keep.size:  # spans past the encoder's window: their rows out, in one copy that is then owned
        vectors, in_place = vectors[kept], True
    strings = sorted({keys[i] for i in kept})
    ids = {s: i for i, s in enumerate(strings)}
    string_ids = np.array([ids[keys[i]] for i in kept], dtype=np.int64)
    single_word = np.array([" " not in s for s in strings], dtype=bool)
    protos = build_prototypes(string_ids, vectors, chunk_of[kept], len(strings), single_word, config,
                              show_progress, in_place=in_place)
    t = _lap(timings, "prototypes", t)
    n_protos = protos.vectors.shape[0]
    tf = scipy.sparse.csr_matrix((np.ones(kept.size, dtype=np.float32), (protos.assignment, chunk_of[kept])),
                                 shape=(n_protos, len(spans)))
    tf.sum_duplicates()
    tf.sort_indices()
    _lap(timings, "postings", t)
    stats = {**protos.stats, "stage_version": STAGE_VERSION, "spans": int(len(keys)),
             "dropped_spans": int(len(keys) - kept.size),
             "token_encoder": found.encoder_name, "token_encoder_fingerprint": found.encoder_fingerprint,
             "token_encoder_dim": int(vectors.shape[1]), "seconds": {k: round(v, 3) for k, v in timings.items()}}
    if stats["dropped_spans"]:
        log.info("LiteSemRAG: %d of %d spans lie past the token encoder's %d sub-words and were dropped",
                 stats["dropped_spans"], len(keys), found.encoder_max_length)
    return SemanticGraph(strings=strings, proto_ptr=protos.ptr, proto_vectors=protos.vectors, tf=tf,
                         chunk_len=found.lengths, stats=stats)


def _lap(timings: dict[str, float], stage: str, start: float) -> float:
    now = time.perf_counter()
    timings[stage] = now - start
    return now


def check_stage(stage: SemanticGraph, n_chunks: int) -> None:
    """TigragError unless the stage's arrays agree with each other and with an index of `n_chunks`."""
    problems = []
    if stage.n_chunks != n_chunks:
        problems.append(f"it covers {stage.n_chunks} chunks but the index has {n_chunks}")
    if stage.proto_ptr.size != len(stage.strings) + 1 or int(stage.proto_ptr[-1]) != stage.n_prototypes:
        problems.append("its string → prototype pointers do not match its prototypes")
    if stage.tf.shape != (stage.n_prototypes, stage.n_chunks):
        problems.append(f"its postings are {stage.tf.shape}, not prototypes × chunks")
    if problems:
        raise TigragError("the index's LiteSemRAG stage is inconsistent: " + "; ".join(problems)
                          + "; rebuild it with `tigrag extend INDEX --methods litesemrag`")
