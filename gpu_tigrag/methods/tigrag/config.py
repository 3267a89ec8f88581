"""TIGRAG's query settings: PPR expansion, scoring, pooling, rerank, multi-hop (sections 3.4-3.7;
defaults from section 4.1.5) and the mechanisms beyond the paper (`fusion`, off by default). Read as
`RetrievalConfig().tigrag`, set with `--set tigrag.KEY` (the paper's symbols `th`, `iota`, `h`,
`gamma`, `damping` name them too). TIGRAG has no index stage: it queries the base index."""

from __future__ import annotations

from dataclasses import dataclass

from ...config_types import (DEFAULT_ENTITY_LABELS, ENTITY_LABELS, INT32_MAX, MAX_HOPS, MAX_RANKED, MAX_SWEEPS, MAX_WEIGHT,
                       CheckedConfig, require, setting)

#: the largest title-link bonus: a bonus times the query's cosine spread (at most 1, or 1 in "absolute"
#: units) is added to cosine-scale scores in float32; at 1,000 (500 times the whole cosine range, so a
#: larger bonus reorders nothing) the linked scores stay near 2,000, where float32 still resolves 2.4e-4,
#: far from float32's 3.4e38 (a bonus of 1e308 is inf in float32: inf scores drop results from the top k)
MAX_LINK_BONUS = 1000.0
#: what `tigrag.blocks` and `tigrag.ppr.algorithm` accept ("auto" chooses by the index's size, `resolve_modes`)
BLOCKS: tuple[str, ...] = ("auto", "full", "sparse")
PPR_ALGORITHMS: tuple[str, ...] = ("auto", "exact", "push")
#: older names of values, read as the names now: `tigrag.blocks=dense` was the full chunks × B blocks
#: ("dense" names the dense first stage)
BLOCK_ALIASES = {"dense": "full"}
#: the values of tigrag.fusion.named_expansions: which expanded queries take the question's vector (expansion.py)
NAMED_EXPANSIONS = ("text", "question", "repeats", "unlinked")
#: the values of tigrag.fusion.expansion_order: which pairs the expansion passes embed first (expansion.py)
EXPANSION_ORDERS = ("bridge", "typed")
#: tigrag.sparse_min_chunks: from 50,000 chunks "auto" takes the sparse path. Below it every dataset the
#: project evaluates (2Wiki 7,870 chunks, HotpotQA, MuSiQue) keeps the exact reference bit for bit; at
#: 10k passages the exact mode answers at 71 q/s without the encoder and at 100k at 9.5 q/s (the sparse
#: mode 128-133 q/s, bench/results/query_scale.md): by 50k the exact scoring costs ~50 ms a query, more
#: than the encoder's texts of a question on this machine class, so the corpus, not the method, would set
#: the figure users see.
SPARSE_MIN_CHUNKS = 50_000


@dataclass(frozen=True)
class PPRConfig(CheckedConfig):
    """Personalized PageRank expansion (section 3.4). Not given by the paper: see bench/results/sweep."""

    damping: float = setting(0.5, 'continue probability; restart = 1 - damping', bounds="(0, 1)")
    top_gamma: int = setting(100, 'γ, expanded tokens kept per query', bounds=(1, MAX_RANKED))
    tol: float = setting(1e-4, 'L1 change per column below which a column has converged (bench/results/ppr_tolerance.md; '
                                'a column sums to 1, so 1 stops after one sweep)', bounds="(0, 1]")
    max_iter: int = setting(50, 'PPR sweeps at most per block (push: rounds at most per query)', bounds=(1, MAX_SWEEPS))
    algorithm: str = setting("auto", '(older name: tigrag.ppr.method) "auto": "exact" below tigrag.sparse_min_chunks chunks, "push" from there; "exact": power iteration over the whole graph (vocab × B per block); "push": forward push per query, work bounded by the mass pushed, not the vocabulary (bench/results/ppr_sparse.md)')
    push_epsilon: float = setting(1e-6, 'push: the threshold ε: a node u is pushed while its residual r(u) ≥ ε·(edges of u) ("edges") or ≥ ε ("mass"); under "edges" a query visits at most 1/((1 − damping)·ε) edges whatever the graph\'s size; scores p(u) + (1 − damping)·r(u) never exceed PPR and their L1 error is the residual left, damping·Σr', bounds="(0, 1)")
    push_threshold: str = setting("edges", 'push: "edges" (r(u) ≥ ε·edges of u, Andersen-Chung-Lang) or "mass" (r(u) ≥ ε: the hubs are pushed too, so its work grows with their degree)')

    #: older names of fields, read as their names now (stored configs, `--set`): *method* names a retrieval method
    _renamed = {"method": "algorithm"}

    def _check(self) -> None:
        require(self.algorithm in PPR_ALGORITHMS,
                f"tigrag.ppr.algorithm must be one of {', '.join(PPR_ALGORITHMS)}, got {self.algorithm!r}")
        require(self.push_threshold in ("mass", "edges"),
                f"tigrag.ppr.push_threshold must be 'mass' or 'edges', got {self.push_threshold!r}")


@dataclass(frozen=True)
class FusionConfig(CheckedConfig):
    """Mechanisms beyond the paper (bench/results/quality.md measures each). The defaults switch
    every one off, which is the paper's TIGRAG; the `best` preset (presets.py) turns them on."""

    first_hop: str = setting("pool", 'top-ι chunks of hop 1 by "pool" (pooled cosine, paper) or "hybrid" (RRF of cosine, BM25, ρ, links)')
    hop_fusion: str = setting("max", 'merge of the hops: "max" (eq. 3.16) or "rrf" (reciprocal-rank fusion of the hop rankings)')
    title_links: bool = setting(False, "passages whose title the question or a hop's top chunk mentions are linked in")
    question_link_bonus: float = setting(5.0, 'added to the final score of chunks of passages the question names',
                                         bounds=(0.0, MAX_LINK_BONUS))
    bridge_link_bonus: float = setting(2.0, 'added for chunks of passages named by an expanded bridging entity',
                                       bounds=(0.0, MAX_LINK_BONUS))
    link_bonus_unit: str = setting("cosine_std", 'bonuses in units of the query\'s cosine spread over all chunks (the same weight for any encoder\'s cosine scale), or "absolute" (cosine units)')
    bridge_entities: int = setting(0, 'entities expanded per hop: 0 = every new one (paper), n = the n best',
                                   bounds=(0, MAX_RANKED))
    dedup_passages: bool = setting(False, 'the final top-k holds one chunk (the best) per passage')
    rrf_k: int = setting(60, 'RRF constant k in 1 / (k + rank)', bounds=(0, MAX_RANKED))
    rrf_depth: int = setting(100, 'ranks per list that RRF counts', bounds=(1, MAX_RANKED))
    expansion_vectors: str = setting("text", 'vectors of the expanded queries μ ⊕ e that rerank hop 2+: "text" embeds each "question entity" in its own encoder pass (paper, eq. 3.15); "sum" is normalize(vec(question) + w·vec(entity)), each distinct entity of a batch embedded alone once; "joint" embeds one text "question entity1 entity2 …" per question (bench/results/expansion.md)')
    named_expansions: str = setting("text", 'expanded queries whose entity the question already names ("Who directed The Glass Orchard?" expanded by "The Glass Orchard"; 16-19% of them on MuSiQue-100 and 2Wiki): "text" embeds "question entity" as any other (the paper); "question" takes the question\'s own hop-1 vector for it, no encoder pass; "repeats" also takes it for an entity whose graph tokens repeat the question\'s (all of them the question\'s, or all but one and at least two: "Jonathan Douglass Reid" beside "Jonathan Reid"; bench/results/repeated_expansions.md); "unlinked" also takes it for every entity that names no passage beyond hop 1\'s (needs fusion.title_links): 2Wiki\'s recall within 0.2 point with 2.4 texts per question instead of 6.9, MuSiQue-100 loses 11 points of R@5, so not in `best` (bench/results/named_expansions.md)')
    contained_expansions: str = setting("text", 'expanded queries whose entity is contained in another of the same question (its title tokens a run of the other\'s: "Begum" beside "Ameena Begum"): "text" embeds "question entity" as any other (the paper); "question" takes the question\'s own hop-1 vector for it, no encoder pass (the longer entity\'s pass covers it; its tokens still seed the hop): with every expansion embedded, recall unchanged on 2Wiki and MuSiQue-100 with 0.36-0.48 fewer texts per question (bench/results/contained_expansions.md)')
    expansion_passes: int = setting(0, 'encoder passes for a question\'s expanded queries "question entity" (expansion_vectors="text" only; "sum" and "joint" make their vectors otherwise): 0 = one per expanded query (the paper); n = only the n first in the bridging order get one, the others take the question\'s hop-1 vector (their tokens still seed the hop)',
                                    bounds=(0, MAX_RANKED))
    expansion_order: str = setting("bridge", 'which of a question\'s expanded queries `expansion_passes` embeds first: "bridge": the bridging order (an earlier hop first, then entities naming a passage, then the hop\'s PPR mass on their tokens); "typed": entities naming a passage first, then those whose NER label is a type the question names ("the city where …" → GPE/LOC/FAC/NORP, "the composer of …" → PERSON; text/answer_types.py), then the bridging order: at 3 passes recall within 0.5 point of 5 bridge-order passes on 2Wiki and MuSiQue-100 (bench/results/typed_expansions.md). No effect without expansion_passes')
    expansion_weight: float = setting(0.5, 'w of expansion_vectors="sum": the weight of the entity\'s vector beside the question\'s (0.5: the best of 0.2-1.0 on the first half of 2Wiki, bench/results/expansion.md)',
                                      bounds=f"(0, {MAX_WEIGHT:g}]")

    def _check(self) -> None:
        require(self.expansion_vectors in ("text", "sum", "joint"),
                f"tigrag.fusion.expansion_vectors must be 'text', 'sum' or 'joint', got {self.expansion_vectors!r}")
        require(self.named_expansions in NAMED_EXPANSIONS, "tigrag.fusion.named_expansions must be 'text', "
                f"'question', 'repeats' or 'unlinked', got {self.named_expansions!r}")
        require(self.expansion_order in EXPANSION_ORDERS, "tigrag.fusion.expansion_order must be 'bridge' or 'typed', "
                f"got {self.expansion_order!r}")
        require(self.contained_expansions in ("text", "question"), "tigrag.fusion.contained_expansions must be "
                f"'text' or 'question', got {self.contained_expansions!r}")
        require(self.named_expansions != "unlinked" or self.title_links,
                "tigrag.fusion.named_expansions='unlinked' needs tigrag.fusion.title_links=true: without title links "
                "no entity names a passage, so every expanded query would be the question alone")
        require(self.first_hop in ("pool", "hybrid"),
                 f"tigrag.fusion.first_hop must be 'pool' or 'hybrid', got {self.first_hop!r}")
        require(self.link_bonus_unit in ("cosine_std", "absolute"),
                 f"tigrag.fusion.link_bonus_unit must be 'cosine_std' or 'absolute', got {self.link_bonus_unit!r}")
        require(self.hop_fusion in ("max", "rrf"), f"tigrag.fusion.hop_fusion must be 'max' or 'rrf', got {self.hop_fusion!r}")


@dataclass(frozen=True)
class TigragQueryConfig(CheckedConfig):
    """Scoring, pooling, rerank and multi-hop of TIGRAG; the defaults are the paper's method."""

    ppr: PPRConfig = setting(help='Personalized PageRank expansion', factory=PPRConfig)
    pool_threshold: float = setting(0.8, 'th_ρ: share of the graph-score mass kept in the pool (eq. 3.9)', bounds="(0, 1]")
    iota: int = setting(1, 'ι, chunks whose entities drive the next hop (each adds its entities\' expanded queries)',
                        bounds=(1, 1000))
    hops: int = setting(2, 'h: hops of entity-driven expansion', bounds=(1, MAX_HOPS))
    entity_labels: tuple[str, ...] = setting(DEFAULT_ENTITY_LABELS, 'NER labels that count as bridging entities')
    entities_at: str = setting("index", '"index": look up the NER run at build time; "query": run NER on H (eq. 3.10) per hop')
    scoring: str = setting("bm25", 'ablation (Table 10): "bm25" (eq. 3.7) or "graph": token presence instead of BM25')
    expansion: str = setting("ppr", 'ablation (Table 10): "ppr" or "degree": top-γ tokens by weighted degree centrality instead of PPR')
    rerank: bool = setting(True, 'ablation (Table 10): False ranks the pool by the graph score ρ instead of the embedding cosine')
    blocks: str = setting("auto", '"auto": "full" below tigrag.sparse_min_chunks chunks (rankings identical to the reference), "sparse" from there; "full" (older name: "dense"): scores as chunks × B blocks over the whole corpus (the reference); "sparse": each query scores only its candidates (the postings of its top-γ tokens, the dense first stage\'s top chunks), so no chunks × B block is made and a query\'s cost follows its candidates, not the corpus (bench/results/scale.md)')
    sparse_min_chunks: int = setting(SPARSE_MIN_CHUNKS, 'where "auto" (tigrag.blocks, tigrag.ppr.algorithm) turns to the sparse path: an index of at least this many chunks gets sparse blocks and push PPR; below it, the exact reference (bench/results/query_scale.md: the exact mode\'s cost per query grows with the corpus, about 14 ms at 10k chunks and 105 ms at 100k without the encoder, the sparse mode\'s stays near 8 ms)', bounds=(1, INT32_MAX))
    pool_max: int = setting(1000, 'sparse blocks only: a pool holds at most this many chunks (the highest ρ, then the lowest chunk id), so the rerank\'s work is bounded whatever the corpus; 0 = no cap (the paper\'s pool)', bounds=(0, INT32_MAX))
    postings_max: int = setting(300, 'sparse blocks only: each expanded token adds ρ to its this many highest-BM25 chunks, so scoring is bounded whatever the corpus (300: the least of 250/300/400 within 0.5 point of the exact mode\'s recall on 2Wiki and MuSiQue-100, both presets and indexes); 0 = every posting (the paper\'s ρ)', bounds=(0, INT32_MAX))
    fusion: FusionConfig = setting(help='beyond the paper: off by default', factory=FusionConfig)

    def _check(self) -> None:
        if self.blocks in BLOCK_ALIASES:  # an older name of the value
            object.__setattr__(self, "blocks", BLOCK_ALIASES[self.blocks])
        require(self.blocks in BLOCKS, f"tigrag.blocks must be one of {', '.join(BLOCKS)}, got {self.blocks!r}")
        require(self.scoring in ("bm25", "graph"), f"tigrag.scoring must be 'bm25' or 'graph', got {self.scoring!r}")
        require(self.expansion in ("ppr", "degree"), f"tigrag.expansion must be 'ppr' or 'degree', got {self.expansion!r}")
        require(self.entities_at in ("index", "query"),
                f"tigrag.entities_at must be 'index' or 'query', got {self.entities_at!r}")
        unknown = set(self.entity_labels) - set(ENTITY_LABELS)
        require(not unknown, f"unknown entity label(s) {sorted(unknown)}; known: {', '.join(ENTITY_LABELS)}")


def resolve_modes(settings: TigragQueryConfig, n_chunks: int) -> tuple[TigragQueryConfig, dict[str, str]]:
    """`settings` with "auto" of `blocks` and `ppr.algorithm` resolved for an index of `n_chunks` chunks
    (sparse and push from `sparse_min_chunks` on), and {setting: what "auto" chose} for the report and
    `query -v` (empty when neither was "auto")."""
    from dataclasses import replace

    large = n_chunks >= settings.sparse_min_chunks
    chosen: dict[str, str] = {}
    if settings.blocks == "auto":
        chosen["tigrag.blocks"] = "sparse" if large else "full"
    if settings.ppr.algorithm == "auto":
        chosen["tigrag.ppr.algorithm"] = "push" if large else "exact"
    if not chosen:
        return settings, chosen
    resolved = replace(settings, blocks=chosen.get("tigrag.blocks", settings.blocks),
                       ppr=replace(settings.ppr, algorithm=chosen.get("tigrag.ppr.algorithm", settings.ppr.algorithm)))
    return resolved, chosen
