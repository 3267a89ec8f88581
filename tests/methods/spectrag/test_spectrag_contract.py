"""SpectRAG keeps the method contract (tests/method_contract.py) over the example index with its stage."""

from method_contract import MethodContract

from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.index.build import add_method


class TestSpectragContract(MethodContract):
    method = "spectrag"

    def index(self, example_index):
        return add_method(example_index.index, "spectrag")


class TestSpectragSpreadContract(TestSpectragContract):
    """With `spectrag.relevance_scale=spread` (a per-query mean over every chunk: batch-independent bits)."""

    def config(self):
        return RetrievalConfig.of("spectrag", relevance_scale="spread")


class TestSpectragBestContract(TestSpectragContract):
    """`SpectRAG best`, the title-link lift included (each query's own seeds and the passages they name)."""

    def config(self):
        from gpu_tigrag.methods.spectrag import BEST

        return RetrievalConfig.of("spectrag", **{key.split(".", 1)[1]: value for key, value in BEST.items()})
