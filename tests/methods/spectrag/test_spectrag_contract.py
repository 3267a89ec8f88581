"""SpectRAG keeps the method contract (tests/method_contract.py) over the example index with its stage."""

from method_contract import MethodContract

from gpu_tigrag.index.build import add_method


class TestSpectragContract(MethodContract):
    method = "spectrag"

    def index(self, example_index):
        return add_method(example_index.index, "spectrag")
