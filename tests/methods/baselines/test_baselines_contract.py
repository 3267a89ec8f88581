"""The baselines keep the method contract (tests/method_contract.py)."""

from method_contract import MethodContract


class TestNaiveragContract(MethodContract):
    method = "naiverag"


class TestBm25Contract(MethodContract):
    method = "bm25"


class TestHybridContract(MethodContract):
    method = "hybrid"


class TestBm25PassagesContract(MethodContract):
    method = "bm25passages"
