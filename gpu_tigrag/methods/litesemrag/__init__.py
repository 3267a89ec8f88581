"""LiteSemRAG (docs/design-notes.md#litesemrag): spans with contextual vectors, semantic nodes
(prototypes), co-occurrence-weighted node scores and isolated-node recovery. Its stage: the semantic
graph (`IndexConfig.litesemrag`); its query settings: `RetrievalConfig.litesemrag`."""

from ..registry import IndexStage, Method, System, register
from . import stage
from .config import LitesemragIndexConfig, LitesemragQueryConfig


def best_mrr_claim(m: dict) -> list[str]:
    """LiteSemRAG's paper (BEIR SciFact, HotpotQA, FEVER): its MRR@10 the best of the systems."""
    others = [name for name in m if not name.startswith("LiteSemRAG")]
    if "LiteSemRAG" not in m or not others:
        return []
    best = max(others, key=lambda name: m[name]["mrr@10"])
    mrr, top = m["LiteSemRAG"]["mrr@10"], m[best]["mrr@10"]
    return [f"- LiteSemRAG's MRR@10 the best of the systems (its paper, on BEIR SciFact, HotpotQA and FEVER): "
            f"{'holds' if mrr > top else 'does not hold'} ({100 * mrr:.2f} vs {best}'s {100 * top:.2f})."]


METHOD = register(Method(
    name="litesemrag", label="LiteSemRAG",
    description="span prototypes, co-occurrence-weighted node scores, isolated-node recovery",
    retriever=__name__ + ".retriever:LitesemragRetriever",
    query_config=LitesemragQueryConfig,
    stage=IndexStage(config=LitesemragIndexConfig, build=stage.build, to_arrays=stage.to_arrays,
                     from_arrays=stage.from_arrays, arrays=stage.ARRAYS, strings=(stage.STRINGS,),
                     summary=stage.summary,
                     rebuilt_because="prototypes are built from all occurrences of a string at once, and new ones "
                                     "move them"),
    claims=best_mrr_claim,
    systems=(
        System("LiteSemRAG", "litesemrag", headline=True),
        System("LiteSemRAG without recovery share", "litesemrag", {"litesemrag.recovery_share": 0.0}),
    ),
))
