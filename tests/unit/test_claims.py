"""The methods' published claims checked on a run (report "The paper's claims on this run"): each verdict says
whether the comparison holds on the means and, where the run kept per-query values, whether its paired
randomisation test finds it significant (issue 35, item 3)."""

from __future__ import annotations

import numpy as np

from gpu_tigrag.evaluate.report import claims
from gpu_tigrag.evaluate.significance import claim_pvalue, claim_verdict
from gpu_tigrag.methods.litesemrag import best_mrr_claim
from gpu_tigrag.methods.spectrag import context_recall_claim
from gpu_tigrag.methods.tigrag.claims import claims as tigrag_claims

N = 60


def values(mean: float, spread: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return np.clip(mean + spread * rng.standard_normal(N), 0, 1).tolist()


def test_verdict_names_significance_or_its_absence():
    assert claim_verdict(0.05, 0.001) == "holds (p 0.001)"
    assert claim_verdict(0.05, 0.2) == "holds on the means, not significantly (p 0.200)"
    assert claim_verdict(-0.05, 0.001) == "does not hold (p 0.001, significantly below)"
    assert claim_verdict(0.0, 1.0) == "does not hold (p 1.000)"
    assert claim_verdict(0.05, None) == "holds" and claim_verdict(-0.05, None) == "does not hold"


def test_pvalue_needs_paired_values_of_both():
    per_query = {"A": {"m": [1.0, 0.0, 1.0]}, "B": {"m": [0.0, 0.0, 0.0], "short": [1.0]}}
    assert claim_pvalue(per_query, ("A", "m"), ("B", "m")) is not None
    assert claim_pvalue(per_query, ("A", "m"), ("B", "short")) is None  # do not pair up
    assert claim_pvalue(per_query, ("A", "m"), ("C", "m")) is None
    assert claim_pvalue({}, ("A", "m"), ("B", "m")) is None and claim_pvalue(None, ("A", "m"), ("B", "m")) is None


def spectrag_run(context: list[float], hybrid: list[float]):
    m = {"SpectRAG": {"context_recall": float(np.mean(context)), "context_chunks": 9.5},
         "Hybrid": {"recall@10": float(np.mean(hybrid))}}
    return m, {"SpectRAG": {"context_recall": context}, "Hybrid": {"recall@10": hybrid}}


def test_spectrag_claim_is_tested_on_the_paired_queries():
    base = values(0.6, 0.2, 1)
    clearly = [min(1.0, v + 0.2) for v in base]
    m, per_query = spectrag_run(clearly, base)
    (line,) = context_recall_claim(m, per_query)
    assert "holds (p 0.000)" in line
    barely = list(base)
    barely[0] = min(1.0, barely[0] + 0.05)  # above on the means by one query's small gain
    m, per_query = spectrag_run(barely, base)
    (line,) = context_recall_claim(m, per_query)
    assert "holds on the means, not significantly" in line
    (line,) = context_recall_claim(m, {})  # an older results.json: the means alone
    assert ": holds (" in line and "p " not in line


def test_litesemrag_best_is_tested_against_every_other_system_with_holm():
    lite = values(0.7, 0.2, 2)
    far = [max(0.0, v - 0.3) for v in lite]
    close = list(lite)
    close[0] = max(0.0, close[0] - 0.05)  # one system within a query of LiteSemRAG
    m = {"LiteSemRAG": {"mrr@10": float(np.mean(lite))}, "BM25": {"mrr@10": float(np.mean(far))},
         "Hybrid": {"mrr@10": float(np.mean(close))}}
    per_query = {"LiteSemRAG": {"mrr@10": lite}, "BM25": {"mrr@10": far}, "Hybrid": {"mrr@10": close}}
    (line,) = best_mrr_claim(m, per_query)
    assert "holds on the means, not significantly above Hybrid (Holm p" in line
    per_query["Hybrid"]["mrr@10"] = far
    m["Hybrid"]["mrr@10"] = m["BM25"]["mrr@10"]
    (line,) = best_mrr_claim(m, per_query)
    assert "holds, above every other system (Holm p ≤ 0.000)" in line
    m["BM25"]["mrr@10"] = 0.99
    (line,) = best_mrr_claim(m, per_query)
    assert ": does not hold (" in line


def test_tigrag_claim_adds_both_recalls_p_values_and_the_report_passes_them():
    tig, naive = values(0.7, 0.2, 3), values(0.5, 0.2, 4)
    systems = {name: {"metrics": {k: float(np.mean(v)) for k in ("recall@2", "recall@5", "recall@10", "mrr@10")},
                      "per_query": {"recall@2": v, "recall@5": v}}
               for name, v in (("TIGRAG", tig), ("NaiveRAG", naive))}
    (line,) = [c for c in claims(systems) if c.startswith("- TIGRAG > NaiveRAG")]
    assert line.endswith("p 0.000 / 0.000).")
    m = {name: s["metrics"] for name, s in systems.items()}
    (line,) = [c for c in tigrag_claims(m) if c.startswith("- TIGRAG > NaiveRAG")]
    assert "p " not in line
