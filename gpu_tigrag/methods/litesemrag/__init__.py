"""LiteSemRAG (docs/design-notes.md#litesemrag): spans with contextual vectors, semantic nodes
(prototypes), co-occurrence-weighted node scores and isolated-node recovery. Its stage: the semantic
graph (`IndexConfig.litesemrag`); its query settings: `RetrievalConfig.litesemrag`."""

from ..registry import IndexStage, Method, System, register
from . import stage
from .config import LitesemragIndexConfig, LitesemragQueryConfig

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
    systems=(
        System("LiteSemRAG", "litesemrag"),
        System("LiteSemRAG without recovery share", "litesemrag", {"litesemrag.recovery_share": 0.0}),
    ),
))
