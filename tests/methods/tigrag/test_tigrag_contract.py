"""TIGRAG keeps the method contract (tests/method_contract.py), as published and with the `best` preset, on its
full blocks and exact PPR (the defaults below tigrag.sparse_min_chunks) and on the sparse path."""

from method_contract import MethodContract

from gpu_tigrag.presets import preset, preset_with


class TestPaperContract(MethodContract):
    method = "tigrag"

    def config(self):
        return preset("paper")


class TestBestContract(MethodContract):
    method = "tigrag"

    def config(self):
        return preset("best")


class TestSparsePaperContract(MethodContract):
    """The sparse path (what `auto` runs from tigrag.sparse_min_chunks chunks on), forced on the example."""

    method = "tigrag"

    def config(self):
        return preset_with("paper", {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"})


class TestSparseBestContract(MethodContract):
    method = "tigrag"

    def config(self):
        return preset_with("best", {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"})
