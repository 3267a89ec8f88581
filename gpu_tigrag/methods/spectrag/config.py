"""SpectRAG's settings: its index stage (the chunk graph) and its query stage."""

from __future__ import annotations

from dataclasses import dataclass

from ...config_types import (ENTITY_LABELS, INT32_MAX, MAX_HOPS, MAX_MEMORY_MB, MAX_RANKED, MAX_SWEEPS, CheckedConfig, require,
                       setting)

#: the most neighbours per chunk of a similarity signal: its pairs take n × k entries
MAX_NEIGHBOURS = 100_000
#: the most spectral coordinates: each is an eigenvector of the chunk graph, n × d floats
MAX_DIMENSIONS = 4096

#: SpectRAG's edge signals (section "Edge signals" of its paper)
CHUNK_GRAPH_SIGNALS: tuple[str, ...] = ("semantic", "adjacency", "section", "entity", "question", "citation")
#: the paper's signal weights: configuration 2 (Table 10, the public code's default) and configuration 1 (Table 9)
SIGNAL_WEIGHTS: dict[str, dict[str, float]] = {
    "config2": {"semantic": 0.15, "section": 0.20, "entity": 0.25, "adjacency": 0.10, "question": 0.28, "citation": 0.02},
    "config1": {"semantic": 0.30, "section": 0.25, "entity": 0.20, "adjacency": 0.084, "question": 0.083,
                "citation": 0.083},
}


@dataclass(frozen=True)
class SpectragIndexConfig(CheckedConfig):
    """SpectRAG's index stage: the weighted chunk graph and its spectral coordinates (paper Tables 1
    and 3, code defaults where the paper gives none). Built only when asked for (`--methods spectrag`)."""

    weights: str = setting("config2", 'signal weights: "config2" (Table 10, code default), "config1" (Table 9), or "calibrate" (the public code\'s per-corpus weighting; adjacency keeps config2\'s)')
    semantic_top_k: int = setting(7, "nearest chunks per chunk by cosine, itself excluded (the code's k_neighbors: a search of k + 1 that finds the chunk itself first)", bounds=(1, MAX_NEIGHBOURS))
    semantic_threshold: float = setting(0.75, '... kept from this cosine', bounds=(-1.0, 1.0))
    semantic_search: str = setting("auto", 'how the nearest chunks are found: "exact", every pair (the public code\'s flat FAISS search; time grows with the square of the chunks: 120 s of a 130 s stage at 128,000 chunks); "ivf", among the chunks of `semantic_nprobe` of 4·√n IVF lists (FAISS); "auto": exact below ann.min_chunks (200,000) chunks, ivf from there (bench/results/spectrag_semantic_ivf.md)')
    semantic_nprobe: int = setting(64, 'IVF lists searched per chunk (semantic_search=ivf)', bounds=(1, MAX_NEIGHBOURS))
    question_signal: str = setting("none", 'no LLM here: "none" drops the utility-question signal (weights not renormalised); "sentences" uses chunk sentences as stand-in questions (ablation); "links" links a chunk to the chunks of every passage whose title it names, what utility questions mostly ask about on a Wikipedia-style corpus (bench/results/spectrag_links.md)')
    question_top_k: int = setting(20, 'nearest chunks per stand-in question (question_signal=sentences)', bounds=(1, MAX_NEIGHBOURS))
    question_threshold: float = setting(0.80, '... kept from this cosine', bounds=(-1.0, 1.0))
    entity_labels: tuple[str, ...] = setting(ENTITY_LABELS, "the public code's NER mode keeps every label")
    entity_pairs: str = setting("labels", '"labels": the public code\'s count of shared entities, one term per distinct (text, label) of a chunk: a text tagged with two labels counts twice and links the chunk to itself (a self loop, read by PPR only); "distinct": each shared text once, no self pairs')
    entity_max_share: float = setting(0.5, 'an entity in more than this share of the chunks (and more than 1,000 of them) is skipped by the entity signal: it links c² chunk pairs (10,000 copies of one passage: 50 M) and, as its idf says, tells no chunk apart (not in the paper; no entity of 2Wiki, MuSiQue-100 or SciFact is in more than 16% of the chunks, so their graphs are the public code\'s; 1 keeps every entity)', bounds="(0, 1]")
    memory_budget_mb: int = setting(2048, 'working memory of the entity and citation signals\' chunk pairs (about 110 bytes each); a build that needs more stops before it allocates them, naming the settings to change', bounds=(1, MAX_MEMORY_MB))
    edge_threshold: float = setting(0.1, 'combined weights below this are dropped', bounds=(-1.0, 1.0))
    dimensions: int = setting(32, 'spectral coordinates: eigenvectors after the lowest', bounds=(1, MAX_DIMENSIONS))
    eigensolver: str = setting("host", 'the solver of the spectral coordinates: "host" (SciPy\'s ARPACK by components, the public code\'s solver) or "device" (Lanczos on the build\'s --backend: CuPy on a GPU)')
    null_space: str = setting("random", 'on a graph of several components, the coordinates inside the null space of the Laplacian: "random", a seeded random subspace (what the public code\'s ARPACK returns there, a basis that changes from run to run: the rows of one component are parallel, none is zero); "largest", the indicators of the largest components, the chunks of the others at zero')

    def _check(self) -> None:
        require(self.weights in (*SIGNAL_WEIGHTS, "calibrate"),
                 f"spectrag.weights must be one of {', '.join(SIGNAL_WEIGHTS)}, calibrate; got {self.weights!r}")
        require(self.entity_pairs in ("labels", "distinct"),
                f"spectrag.entity_pairs must be 'labels' or 'distinct', got {self.entity_pairs!r}")
        require(self.eigensolver in ("host", "device"),
                f"spectrag.eigensolver must be 'host' or 'device', got {self.eigensolver!r}")
        require(self.null_space in ("random", "largest"),
                f"spectrag.null_space must be 'random' or 'largest', got {self.null_space!r}")
        require(self.semantic_search in ("auto", "exact", "ivf"),
                f"spectrag.semantic_search must be 'auto', 'exact' or 'ivf', got {self.semantic_search!r}")
        require(self.question_signal in ("none", "sentences", "links"),
                 f"spectrag.question_signal must be 'none', 'sentences' or 'links', got {self.question_signal!r}")
        unknown = set(self.entity_labels) - set(ENTITY_LABELS)
        require(not unknown, f"unknown entity label(s) {sorted(unknown)}; known: {', '.join(ENTITY_LABELS)}")


@dataclass(frozen=True)
class SpectragQueryConfig(CheckedConfig):
    """SpectRAG's query stage (paper Table 2; the public code's values where the paper gives none)."""

    seeds: int = setting(20, 'dense top-20 and BM25 top-20 fused by RRF; S0 = the top 20 of the fusion', bounds=(1, MAX_RANKED))
    bm25: str = setting("okapi", 'BM25 of the seeds and the relevance: "okapi", the public code\'s (rank_bm25\'s BM25Okapi over the lower-cased [a-z0-9]+ words of each chunk, k1 1.5, b 0.75, idf floor 0.25 × the mean idf), built from the chunk texts when the retriever starts; "index", the index\'s BM25 (the engine\'s tokens and Lucene idf)')
    rrf_k: int = setting(60, 'RRF constant k of the seed fusion, 1 / (k + rank + 1)', bounds=(0, MAX_RANKED))
    dense_share: float = setting(0.7, 'relevance = .7 cos/max cos + .3 bm25/max bm25', bounds=(0.0, 1.0))
    relevance_scale: str = setting("auto", 'the cosine\'s scale in the relevance: "max", cos / max cos (the paper\'s and code\'s, which assumes its encoder\'s cosine range: with one whose cosines are compressed, multilingual-e5\'s, every chunk is near 1 and the proximity terms decide); "spread", (cos - mean cos) / (max cos - mean cos) over the query\'s chunks, the same on any encoder; "auto", "max" on an index embedded by the public code\'s encoder (all-MiniLM-L6-v2), "spread" on any other (bench/results/spectrag_default_index.md)')
    hops: int = setting(2, 'breadth-first expansion from S0 over the chunk graph ...', bounds=(1, MAX_HOPS))
    max_candidates: int = setting(200, '... capped at this many chunks (an overflowing hop is cut by relevance)', bounds=(1, MAX_RANKED))
    damping: float = setting(0.85, "PPR on the candidates' induced subgraph, restarting at S0", bounds="(0, 1)")
    ppr_tol: float = setting(1e-6, 'PPR stops when its L1 change is below this × |candidates|', bounds="(0, 1]")
    ppr_max_iter: int = setting(200, 'PPR sweeps at most', bounds=(1, MAX_SWEEPS))
    alpha: float = setting(0.5, 'score = (1 - α) relevance + α proximity', bounds=(0.0, 1.0))
    spectral_share: float = setting(0.5, 'proximity = share × spectral closeness + (1 - share) × PPR', bounds=(0.0, 1.0))
    ppr_norm: str = setting("max", 'PPR proximity of a candidate: "max", π / max π over the query\'s candidates (the paper\'s and code\'s: a chunk with an edge inside the candidates is lifted whatever its relevance); "rank", the share of the query\'s candidates with a smaller π (equal π, equal rank); "off", no PPR term (proximity = the spectral term alone)')
    title_links: float = setting(0.0, 'weight of title-link edges added to the stage\'s chunk graph when the retriever starts: chunk c and every chunk of each other passage whose title c names (the pairs of the stage setting question_signal=links, found the same way), what an LLM\'s utility questions mostly ask about on a Wikipedia-style corpus. They widen the expansion and carry PPR; the spectral coordinates stay the stage\'s. 0: none (the paper); 0.28 is the utility-question signal\'s weight in the code\'s configuration 2 (bench/results/spectrag_links.md)', bounds=(0.0, 1.0))
    link_seeds: int = setting(0, 'the title-link lift: the query\'s this many most relevant seeds of S0 and every chunk of each passage they name by title (directed title links, what their utility questions would ask about: "the director it names") join the candidates and score link_lift more; 0: none (the paper) (bench/results/spectrag_lift.md)', bounds=(0, MAX_RANKED))
    link_lift: float = setting(0.5, 'what the title-link lift adds to the score of those chunks (link_seeds > 0): relevance and proximity are at most 1, so 1 puts them first; 0.5 (SpectRAG best\'s) lets a chunk of high enough relevance stay above them', bounds=(0.0, 10.0))
    proximity_floor: float = setting(0.0, 'proximity is added only to candidates whose relevance is at least this × the best candidate relevance of the query; the others score (1 - α) relevance, as non-candidates do (0: every candidate, the paper)', bounds=(0.0, 1.0))
    token_budget: int = setting(0, "context budget in cl100k tokens; 0 = 10 × the index's mean chunk (12k for 1200-token chunks)", bounds=(0, INT32_MAX))
    core_size: int = setting(5, 'the protected core: the first chunks need only the core floor', bounds=(1, MAX_RANKED))
    core_floor: float = setting(0.30, '× the top score', bounds=(0.0, 1.0))
    tail_floor: float = setting(0.55, '× the top score, for chunks after the core', bounds=(0.0, 1.0))
    tie_band: float = setting(0.98, 'chunks within this fraction of the best remaining score are ordered by document coverage', bounds=(0.0, 1.0))

    def _check(self) -> None:
        require(self.bm25 in ("okapi", "index"), f"spectrag.bm25 must be 'okapi' or 'index', got {self.bm25!r}")
        require(self.relevance_scale in ("auto", "max", "spread"),
                f"spectrag.relevance_scale must be 'auto', 'max' or 'spread', got {self.relevance_scale!r}")
        require(self.ppr_norm in ("max", "rank", "off"),
                f"spectrag.ppr_norm must be 'max', 'rank' or 'off', got {self.ppr_norm!r}")


def resolve_relevance_scale(settings: SpectragQueryConfig, encoder_model: str) -> tuple[SpectragQueryConfig, dict[str, str]]:
    """`settings` with relevance_scale "auto" resolved for an index embedded by `encoder_model`: "max" (the
    code's cos / max cos) for the public code's encoder, whose cosine range that scale was made for,
    "spread" for any other; and {setting: what "auto" chose} (empty when it was not "auto")."""
    from dataclasses import replace

    from ...encoders.models import MINILM_MODEL

    if settings.relevance_scale != "auto":
        return settings, {}
    chosen = "max" if encoder_model == MINILM_MODEL else "spread"
    return replace(settings, relevance_scale=chosen), {"spectrag.relevance_scale": chosen}


#: aliases of the stage settings (the chunk graph's) and the query settings, kept importable for
#: callers that use these names
ChunkGraphConfig = SpectragIndexConfig
SpectragConfig = SpectragQueryConfig


#: the stage's arrays in the index directory (stage.py writes and reads them)
STAGE_ARRAYS = ("spectrag_weights_indptr", "spectrag_weights_indices", "spectrag_weights_data",
                "spectrag_coords", "spectrag_eigenvalues", "spectrag_chunk_tokens")
