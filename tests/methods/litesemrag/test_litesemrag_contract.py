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
