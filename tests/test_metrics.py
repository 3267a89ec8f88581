import pytest

from gpu_tigrag.evaluate.metrics import dedup_titles, per_query_recall, recall_at_k
from gpu_tigrag.evaluate.queries import Query
from gpu_tigrag.evaluate.run import recall_metrics


def test_recall_at_k_hand_computed():
    ranked = [["A", "X", "B", "Y"], ["Y", "Y", "C", "D"]]
    gold = [["A", "B"], ["C"]]
    assert recall_at_k(ranked, gold, 2) == pytest.approx((0.5 + 0.0) / 2)
    assert recall_at_k(ranked, gold, 3) == pytest.approx((1.0 + 1.0) / 2)
    assert per_query_recall(["A", "A"], ["A", "B"], 2) == 0.5


def test_dedup_variant_frees_slots_taken_by_repeated_passages():
    ranked = [["A", "A", "B", "C", "D", "E"]]
    queries = [Query("q", "question", ("A", "B"))]
    metrics = recall_metrics(ranked, queries, ks=(2, 5))
    assert metrics["recall@2"] == 0.5 and metrics["recall_dedup@2"] == 1.0
    assert dedup_titles(["A", "A", "B", "A"]) == ["A", "B"]
    # rankings no deeper than k: no dedup variant reported
    assert "recall_dedup@2" not in recall_metrics([["A", "B"]], queries, ks=(2,))


def test_mrr_and_ndcg_hand_computed():
    import math

    from gpu_tigrag.evaluate.metrics import mrr_at_k, ndcg_at_k

    ranked = [["x", "a", "b"], ["c", "y"], ["z"]]
    gold = [["a", "b"], ["c"], ["q"]]
    assert mrr_at_k(ranked, gold, 10) == pytest.approx((1 / 2 + 1 + 0) / 3)
    grades = [{"a": 2, "b": 1}, {"c": 1}, {"q": 1}]
    first = (2 / math.log2(3) + 1 / math.log2(4)) / (2 / math.log2(2) + 1 / math.log2(3))
    assert ndcg_at_k(ranked, grades, 10) == pytest.approx((first + 1.0 + 0.0) / 3)
    assert ndcg_at_k([["b", "a"]], [{"a": 2, "b": 1}], k=1) == pytest.approx(1 / 2)
