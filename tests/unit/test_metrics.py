import pytest

from gpu_tigrag.evaluate.metrics import RECALL_KS, dedup_titles, per_query_recall, recall_at_k, score_rankings
from gpu_tigrag.evaluate.queries import Query


def test_recall_at_k_hand_computed():
    ranked = [["A", "X", "B", "Y"], ["Y", "Y", "C", "D"]]
    gold = [["A", "B"], ["C"]]
    assert recall_at_k(ranked, gold, 2) == pytest.approx((0.5 + 0.0) / 2)
    assert recall_at_k(ranked, gold, 3) == pytest.approx((1.0 + 1.0) / 2)
    assert per_query_recall(["A", "A"], ["A", "B"], 2) == 0.5


def test_dedup_variant_frees_slots_taken_by_repeated_passages():
    ranked = [["A", "A", "B", "C", "D", "E"]]
    queries = [Query("q", "question", ("A", "B"))]
    metrics = score_rankings(ranked, queries)
    assert metrics["recall@2"] == 0.5 and metrics["recall_dedup@2"] == 1.0
    assert dedup_titles(["A", "A", "B", "A"]) == ["A", "B"]


def test_score_rankings_reports_every_metric_with_one_k_list():
    ranked = [["x", "a", "x", "b"], ["c", "y"]]
    queries = [Query("1", "q1", ("a", "b"), qtype="bridge"), Query("2", "q2", ("c",), qtype="comparison")]
    metrics = score_rankings(ranked, queries)
    assert RECALL_KS == (2, 5, 10)
    assert set(metrics) == {*(f"recall{d}@{k}" for k in RECALL_KS for d in ("", "_dedup")), "mrr@10", "ndcg@10",
                            "by_type"}
    assert metrics["recall@2"] == pytest.approx((0.5 + 1.0) / 2) and metrics["recall_dedup@2"] == 0.75
    assert metrics["recall_dedup@5"] == 1.0 and metrics["mrr@10"] == pytest.approx((1 / 2 + 1) / 2)
    assert metrics["by_type"] == {"bridge": {"recall@2": 0.5, "recall@5": 1.0, "queries": 1},
                                  "comparison": {"recall@2": 1.0, "recall@5": 1.0, "queries": 1}}
    assert "by_type" not in score_rankings([["a"]], [Query("3", "q3", ("a",))])
    with pytest.raises(ValueError, match="one ranking per query"):
        score_rankings([], queries)


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


def test_context_recall_counts_each_querys_whole_context():
    ranked = [["a", "x", "b", "y"], ["y", "c", "z"]]
    queries = [Query("1", "q1", ("a", "b")), Query("2", "q2", ("c",))]
    metrics = score_rankings(ranked, queries, contexts=[3, 1])
    assert metrics["context_recall"] == pytest.approx((1.0 + 0.0) / 2)  # q1: a, b in its 3; q2: c is 2nd of 1
    assert metrics["context_chunks"] == 2.0
    assert "context_recall" not in score_rankings(ranked, queries)
    with pytest.raises(ValueError, match="one ranking per query"):
        score_rankings(ranked, queries, contexts=[3])
