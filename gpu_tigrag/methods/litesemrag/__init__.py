"""LiteSemRAG (docs/design-notes.md#litesemrag): spans with contextual vectors, semantic nodes
(prototypes), co-occurrence-weighted node scores and isolated-node recovery. Its stage: the semantic
graph (`IndexConfig.litesemrag`); its query settings: `RetrievalConfig.litesemrag`."""

from ..registry import Method, System, lazy_stage, register
from .config import STAGE_ARRAYS, STAGE_STRINGS, LitesemragIndexConfig, LitesemragQueryConfig


def best_mrr_claim(m: dict, per_query: dict | None = None) -> list[str]:
    """LiteSemRAG's paper (BEIR SciFact, HotpotQA, FEVER): its MRR@10 the best of the systems; checked
    for the paper's behaviour and for `LiteSemRAG best`, each against the systems of other methods. With
    per-query values, "best" is tested against every other system (paired randomisation tests, Holm-corrected
    over those comparisons): significant only if it is above each of them."""
    from ...evaluate.significance import adjust, claim_pvalue

    others = [name for name in m if not name.startswith("LiteSemRAG")]
    if not others:
        return []
    top = max(others, key=lambda name: m[name]["mrr@10"])
    lines = []
    for system in ("LiteSemRAG", "LiteSemRAG best"):
        if system not in m:
            continue
        mrr, best = m[system]["mrr@10"], m[top]["mrr@10"]
        # the tests (10,000 swaps each) only where the claim holds on the means
        pvalues = [claim_pvalue(per_query, (system, "mrr@10"), (other, "mrr@10")) for other in others] \
            if mrr > best else []
        if mrr <= best:
            verdict = "does not hold"
        elif any(p is None for p in pvalues):
            verdict = "holds"
        else:
            corrected = dict(zip(others, adjust(pvalues, "holm")))
            weakest = max(corrected, key=corrected.get)
            verdict = (f"holds, above every other system (Holm p ≤ {corrected[weakest]:.3f})"
                       if corrected[weakest] < 0.05 else
                       f"holds on the means, not significantly above {weakest} (Holm p {corrected[weakest]:.3f})")
        lines.append(f"- {system}'s MRR@10 the best of the systems (its paper, on BEIR SciFact, HotpotQA and "
                     f"FEVER): {verdict} ({100 * mrr:.2f} vs {top}'s {100 * best:.2f}).")
    return lines


#: `LiteSemRAG best` before the title-link lift: the settings chosen on 2Wiki developer queries (the first half
#: of dev500) by `python bench/litesemrag.py --best` (bench/results/litesemrag_best.md)
BEST_WITHOUT_LIFT: dict[str, object] = {"litesemrag.dense_fusion": 2.0, "litesemrag.lexical_fusion": 4.0,
                                        "litesemrag.recovery_order": "weighted"}
#: the title-link lift (the ranking's first chunk and the passages it names, lifted by its own score: above every
#: other chunk), chosen on the developer queries (MuSiQue-100, 2Wiki's first half) of the default index
#: (bench/results/litesemrag_lift.md)
LIFT: dict[str, object] = {"litesemrag.link_seeds": 1, "litesemrag.link_lift": 1.0}
#: `LiteSemRAG best`; the defaults stay the paper's (the public code's behaviour)
BEST: dict[str, object] = {**BEST_WITHOUT_LIFT, **LIFT}
#: what each setting of BEST adds, named for its ablation (the system with that setting at the paper's value);
#: link_lift is the lift's size, removed with link_seeds
BEST_MECHANISMS = {"litesemrag.dense_fusion": "dense fusion", "litesemrag.lexical_fusion": "BM25 fusion",
                   "litesemrag.recovery_order": "weighted recovery", "litesemrag.recovery_share": "recovery share",
                   "litesemrag.link_seeds": "the title-link lift"}


def best_ablations() -> dict[str, dict[str, object]]:
    """Each mechanism of BEST removed (its paper value back): {system name: overrides}."""
    paper = LitesemragQueryConfig()
    return {f"LiteSemRAG best without {BEST_MECHANISMS[key]}":
            {**BEST, key: getattr(paper, key.split(".", 1)[1])} for key in BEST if key in BEST_MECHANISMS}


#: {system name: overrides}: each mechanism of best removed
BEST_ABLATIONS = best_ablations()


METHOD = register(Method(
    name="litesemrag", label="LiteSemRAG",
    description="span prototypes, co-occurrence-weighted node scores, isolated-node recovery",
    retriever=__name__ + ".retriever:LitesemragRetriever",
    query_config=LitesemragQueryConfig,
    stage=lazy_stage(__name__ + ".stage", config=LitesemragIndexConfig, arrays=STAGE_ARRAYS,
                     strings=(STAGE_STRINGS,),
                     rebuilt_because="prototypes are built from all occurrences of a string at once, and new ones "
                                     "move them"),
    claims=best_mrr_claim,
    systems=(
        System("LiteSemRAG", "litesemrag", headline=True),
        System("LiteSemRAG without recovery share", "litesemrag", {"litesemrag.recovery_share": 0.0}),
        System("LiteSemRAG + title-link lift", "litesemrag", LIFT),
        System("LiteSemRAG best", "litesemrag", BEST, headline=True),
        *(System(name, "litesemrag", overrides, ablation_of="LiteSemRAG best")
          for name, overrides in best_ablations().items()),
    ),
))
