"""TIGRAG (docs/design-notes.md#tigrag-paper): token co-occurrence graph, batched PPR, PPR-weighted
BM25, cumulative-mass pooling, embedding rerank and entity-driven multi-hop. Its index is the base
index (no stage of its own); its query settings are `TigragQueryConfig` (`config.tigrag`); its
systems are the paper's Table-10 ablations, both presets, and each mechanism of `best` added to
`paper` or removed from `best`."""

from ..registry import Method, System, register
from .claims import claims
from .config import TigragQueryConfig

#: the configuration under evaluation and one hop of it (the paper's Table 8 at h = 1)
SYSTEMS = {
    "TIGRAG": {},
    "TIGRAG 1-hop": {"tigrag.hops": 1},
}
#: the paper's Table-10 ablations of the configuration under evaluation
ABLATIONS = {
    "TIGRAG without BM25": {"tigrag.scoring": "graph"},
    "TIGRAG degree centrality": {"tigrag.expansion": "degree"},
    "TIGRAG without reranking": {"tigrag.rerank": False},
}
#: both presets, each mechanism of `best` added to the paper's method alone, and removed from `best`
PRESET_VARIANTS = {
    "TIGRAG paper": ("paper", {}),
    "TIGRAG best": ("best", {}),
    "paper + title links": ("paper", {"tigrag.fusion.title_links": True}),
    "paper + hybrid first hop": ("paper", {"tigrag.fusion.first_hop": "hybrid"}),
    "paper + bridging choice (8)": ("paper", {"tigrag.fusion.bridge_entities": 8}),
    "paper + passage dedup": ("paper", {"tigrag.fusion.dedup_passages": True}),
    "paper + named expansions from the question": ("paper", {"tigrag.fusion.named_expansions": "question"}),
    "paper + contained expansions from the question": ("paper", {"tigrag.fusion.contained_expansions": "question"}),
    "paper + five expansion passes": ("paper", {"tigrag.fusion.expansion_passes": 5}),
    "paper + three typed expansion passes": ("paper", {"tigrag.fusion.expansion_passes": 3,
                                                       "tigrag.fusion.expansion_order": "typed"}),
    "best without title links": ("best", {"tigrag.fusion.title_links": False}),
    "best without hybrid first hop": ("best", {"tigrag.fusion.first_hop": "pool"}),
    "best expanding every entity": ("best", {"tigrag.fusion.bridge_entities": 0}),
    "best without passage dedup": ("best", {"tigrag.fusion.dedup_passages": False}),
    "best with RRF hop fusion": ("best", {"tigrag.fusion.hop_fusion": "rrf"}),
    "best embedding named expansions": ("best", {"tigrag.fusion.named_expansions": "text"}),
    "best embedding repeated expansions": ("best", {"tigrag.fusion.named_expansions": "question"}),
    "best embedding contained expansions": ("best", {"tigrag.fusion.contained_expansions": "text"}),
    "best embedding every expansion": ("best", {"tigrag.fusion.expansion_passes": 0}),
    "best with five bridge-order passes": ("best", {"tigrag.fusion.expansion_passes": 5,
                                                    "tigrag.fusion.expansion_order": "bridge"}),
    "best with three bridge-order passes": ("best", {"tigrag.fusion.expansion_order": "bridge"}),
}

#: the systems of the report's by-question-type table
HEADLINE = ("TIGRAG", "TIGRAG 1-hop", "TIGRAG paper", "TIGRAG best")

METHOD = register(Method(
    name="tigrag", label="TIGRAG",
    description="token graph, batched PPR, PPR-weighted BM25, pooling, embedding rerank, entity multi-hop",
    retriever=__name__ + ".retriever:TigragRetriever",
    query_config=TigragQueryConfig,
    systems=(*(System(name, "tigrag", overrides, headline=name in HEADLINE) for name, overrides in SYSTEMS.items()),
             *(System(name, "tigrag", overrides, ablation_of="TIGRAG") for name, overrides in ABLATIONS.items()),
             *(System(name, "tigrag", overrides, preset, headline=name in HEADLINE)
               for name, (preset, overrides) in PRESET_VARIANTS.items())),
    claims=claims,
    ablation_caption="Table 10 layout",
))
