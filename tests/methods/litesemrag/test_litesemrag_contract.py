"""LiteSemRAG keeps the method contract (tests/method_contract.py) over the example index with its stage
(the settings of test_litesemrag.py, so that a few of the example's strings are clustered)."""

import pytest
from method_contract import MethodContract

from gpu_tigrag.config import EntityConfig
from gpu_tigrag.index.build import add_method
from gpu_tigrag.methods.litesemrag.config import LitesemragIndexConfig


class TestLitesemragContract(MethodContract):
    method = "litesemrag"

    def index(self, example_index):
        pytest.importorskip("spacy")
        pytest.importorskip(EntityConfig().model)
        stage = LitesemragIndexConfig(min_occurrences=3, concentration=0.99, min_samples_offset=0)
        return add_method(example_index.index, "litesemrag", config=stage)


class TestLitesemragBestContract(TestLitesemragContract):
    """`LiteSemRAG best`: fused with the dense and BM25 lists, then the title-link lift."""

    def config(self):
        from gpu_tigrag.config import RetrievalConfig
        from gpu_tigrag.methods.litesemrag import BEST

        return RetrievalConfig.of("litesemrag", **{key.split(".", 1)[1]: value for key, value in BEST.items()})
