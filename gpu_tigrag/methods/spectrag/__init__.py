"""SpectRAG (docs/design-notes.md#spectrag): hybrid seeds, expansion over a weighted chunk graph,
PPR and spectral proximity, token-budgeted context selection. Its stage: the chunk graph and
spectral coordinates (`IndexConfig.spectrag`); its query settings: `RetrievalConfig.spectrag`."""

from ..registry import Method, System, lazy_stage, register
from .config import STAGE_ARRAYS, SpectragIndexConfig, SpectragQueryConfig


def context_recall_claim(m: dict, per_query: dict | None = None) -> list[str]:
    """SpectRAG's paper (MultiHop-RAG): its context recall above Hybrid's R@10, for the paper's behaviour and
    `SpectRAG best`, each with the paired randomisation test over the run's queries."""
    from ...evaluate.significance import claim_pvalue, claim_verdict

    if "Hybrid" not in m:
        return []
    lines = []
    for system in ("SpectRAG", "SpectRAG best"):
        if system not in m or "context_recall" not in m[system]:
            continue
        c, r10 = m[system]["context_recall"], m["Hybrid"]["recall@10"]
        p = claim_pvalue(per_query, (system, "context_recall"), ("Hybrid", "recall@10"))
        lines.append(f"- {system}'s context recall above Hybrid's R@10 (its paper, MultiHop-RAG): "
                     f"{claim_verdict(c - r10, p)} ({100 * c:.2f} vs {100 * r10:.2f}, "
                     f"{m[system]['context_chunks']:.1f} chunks per context).")
    return lines


#: `SpectRAG best` before the title-link lift: the settings chosen on 2Wiki developer queries (the first half of
#: dev500) by `python bench/spectrag.py --best` (bench/results/spectrag_best.md), and the cosine's spread scale in
#: the relevance, chosen on the developer queries (MuSiQue-100, 2Wiki's first half) of the default encoder's index
#: (bench/results/spectrag_default_index.md)
BEST_WITHOUT_LIFT: dict[str, object] = {"spectrag.alpha": 0.05, "spectrag.ppr_norm": "rank",
                                        "spectrag.relevance_scale": "spread"}
#: the title-link lift (the query's most relevant seed and the passages it names, lifted by 0.5), chosen on the
#: same developer queries of the default index (bench/results/spectrag_lift.md)
LIFT: dict[str, object] = {"spectrag.link_seeds": 1, "spectrag.link_lift": 0.5}
#: `SpectRAG best`; the defaults stay the paper's
BEST: dict[str, object] = {**BEST_WITHOUT_LIFT, **LIFT}
#: each mechanism of best removed (its paper value back); spectrag.proximity_floor was swept and not
#: chosen (0, the paper's)
BEST_ABLATIONS = {
    "SpectRAG best without the title-link lift": {"spectrag.link_seeds": 0},
    "SpectRAG best without rank PPR": {"spectrag.ppr_norm": "max"},
    "SpectRAG best with alpha 0.5": {"spectrag.alpha": 0.5},
    "SpectRAG best with the max scale": {"spectrag.relevance_scale": "max"},
}

#: `SpectRAG best + title links`: best (before the lift) with the title-link pairs added to the undirected chunk
#: graph at α 0.3, the query-side variant chosen on the default index's developer queries
#: (bench/results/spectrag_links.md); on 2Wiki's held-back half it was level with that best (R@5 73.0 vs 73.1):
#: the same pairs, undirected and spread over every seed's PPR, carry little of what the directed lift carries
TITLE_LINKS: dict[str, object] = {**BEST_WITHOUT_LIFT, "spectrag.title_links": 0.28, "spectrag.alpha": 0.3}


METHOD = register(Method(
    name="spectrag", label="SpectRAG",
    description="chunk graph of six signals, PPR and spectral proximity, token-budgeted context",
    retriever=__name__ + ".retriever:SpectragRetriever",
    query_config=SpectragQueryConfig,
    stage=lazy_stage(__name__ + ".stage", config=SpectragIndexConfig, arrays=STAGE_ARRAYS,
                     rebuilt_because="the graph is global: new chunks change old neighbours and the eigenvectors",
                     nan_padded=("spectrag_eigenvalues",)),
    claims=context_recall_claim,
    systems=(
        System("SpectRAG", "spectrag", headline=True),
        System("SpectRAG relevance only", "spectrag", {"spectrag.alpha": 0.0}),
        System("SpectRAG spectral proximity only", "spectrag", {"spectrag.spectral_share": 1.0}),
        System("SpectRAG PPR proximity only", "spectrag", {"spectrag.spectral_share": 0.0}),
        System("SpectRAG + title-link lift", "spectrag", LIFT),
        System("SpectRAG best", "spectrag", BEST, headline=True),
        *(System(name, "spectrag", {**BEST, **removed}, ablation_of="SpectRAG best")
          for name, removed in BEST_ABLATIONS.items()),
        System("SpectRAG best + title links", "spectrag", TITLE_LINKS),
    ),
))
