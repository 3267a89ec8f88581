"""CI keeps the GPU check runnable: `bench/gpu_check.py --smoke` (numpy in the GPU's place, tiny inputs,
a tiny stand-in index of examples/corpus.json) runs every section, `bench/gpu_workers.py --smoke`
among them, and each section must succeed with its figures, so a section that breaks fails here."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_check)

SECTIONS = ("parity", "indexing", "pair_count", "load_index", "ppr", "engine", "encoder", "workers")


def positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("gpu_check")
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--smoke", "--out", str(out),
                           "--deadline-s", "240"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"gpu_check.py --smoke failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads((out / gpu_check.REPORT_FILE).read_text()), out


def test_every_section_ran_and_succeeded(smoke):
    report, _ = smoke
    assert report["smoke"] is True and report["backends"] == ["numpy", "numpy"]
    assert report["status"] == dict.fromkeys(SECTIONS, "ok")
    assert all(positive(report["section_seconds"][name]) for name in SECTIONS)
    assert "finished" in report


def test_parity_ran_its_tests(smoke):
    report, out = smoke
    counts = report["parity"]["counts"]
    assert counts["passed"] > 0 and counts["failed"] == counts["errors"] == 0
    assert report["parity"]["tests"] == gpu_check.SMOKE_PARITY_TESTS
    assert "passed" in (out / "parity_pytest.txt").read_text()


def test_indexing_figures_and_identical_arrays(smoke):
    indexing = smoke[0]["indexing"]
    assert len(indexing["rows"]) == 2  # both backends at the one smoke size
    for row in indexing["rows"]:
        assert positive(row["seconds"]) and positive(row["chunks_per_second"])
        assert row["graph_nnz"] > 0 and row["bm25_nnz"] > 0 and row["tokens"] > row["chunks"]
        assert set(row["digests"]) == {"graph", "bm25"}
    assert indexing["identical"] and all(indexing["identical"].values())


def test_pair_count_methods_agree(smoke):
    rows = smoke[0]["pair_count"]["rows"]
    assert len(rows) == 2
    for row in rows:
        assert row["equal"] is True and row["keys"] > row["distinct"] > 0
        assert positive(row["sort_seconds"]) and positive(row["hash_seconds"]) and positive(row["hash_over_sort"])


def test_ppr_figures_per_backend_and_batch(smoke):
    report = smoke[0]
    assert report["load_index"]["queries"] == 15 and report["load_index"]["chunks"] > 0
    rows = report["ppr"]["rows"]
    assert [(r["backend"], r["batch"]) for r in rows] == [("numpy", 4), ("numpy", 16)] * 2
    for row in rows:
        assert row["sweeps"] >= 1
        assert positive(row["queries_per_second"]) and positive(row["bytes_per_second"])


def test_engine_figures_and_same_rankings(smoke):
    engine = smoke[0]["engine"]
    assert len(engine["rows"]) == 8 and engine["same_top5_as_cpu"] == 1.0
    assert sorted({row["preset"] for row in engine["rows"]}) == ["best", "paper"]
    for row in engine["rows"]:
        assert positive(row["queries_per_second_without_encoder"]) and row["same_top5_as_cpu"] == 1.0
        assert row["queries"] >= 15 and {"ppr", "score", "pool"} <= set(row["stage_seconds"])


def test_encoder_section_measures_the_torch_runtime(smoke):
    encoder = smoke[0]["encoder"]
    from gpu_tigrag.config import EncoderConfig

    assert encoder["weights"] == "real" and encoder["model"] == EncoderConfig().model  # installed here
    assert positive(encoder["cpu_passages_per_second"]) and positive(encoder["cpu_queries_per_second"])
    assert encoder["ok"] is True


def test_the_encoder_architecture_runs_with_random_weights_where_the_model_is_absent(tmp_path, monkeypatch):
    import gpu_tigrag.encoders as encoders
    from gpu_tigrag.errors import ModelError
    sys.path.insert(0, str(ROOT / "bench"))
    from prepare_gpu_check import copy_encoder_architecture

    copy_encoder_architecture(tmp_path / "inputs" / "encoder_architecture")
    assert not list((tmp_path / "inputs" / "encoder_architecture").glob("*.safetensors"))

    def absent(name):
        raise ModelError("not installed")

    monkeypatch.setattr(encoders, "resolve_model", absent)
    model, weights = gpu_check.encoder_folder(tmp_path / "inputs", tmp_path)
    assert weights == "random" and (Path(model) / "model.safetensors").is_file()


def test_workers_runs_and_same_rankings(smoke):
    workers = smoke[0]["workers"]
    assert workers["returncode"] == 0 and workers["gpu_backend"] == "numpy" and positive(workers["index_seconds"])
    assert set(workers["runs"]) == {"gpu_1_worker", "gpu_1_worker_batch_2048", "cpu_1_workers"}
    for run in workers["runs"].values():
        assert positive(run["queries_per_second"]) and run["same_top5_as_cpu"] == 1.0


def test_a_broken_section_is_recorded_and_the_report_kept(tmp_path):
    report: dict[str, Any] = {}
    gpu_check.section(report, "good", lambda: {"ok": True}, tmp_path)
    gpu_check.section(report, "wrong", lambda: {"ok": False}, tmp_path)
    gpu_check.section(report, "broken", lambda: 1 / 0, tmp_path)
    assert report["status"] == {"good": "ok", "wrong": "failed", "broken": "error"}
    assert "ZeroDivisionError" in report["broken"]["error"]
    written = json.loads((tmp_path / gpu_check.REPORT_FILE).read_text())
    assert written["status"] == report["status"]  # rewritten after every section
