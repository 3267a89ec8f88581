"""TIGRAG keeps the method contract (tests/method_contract.py), as published and with the `best` preset."""

from method_contract import MethodContract

from gpu_tigrag.presets import preset


class TestPaperContract(MethodContract):
    method = "tigrag"

    def config(self):
        return preset("paper")


class TestBestContract(MethodContract):
    method = "tigrag"

    def config(self):
        return preset("best")
