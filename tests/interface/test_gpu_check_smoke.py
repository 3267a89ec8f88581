"""CI keeps the GPU check runnable: its smoke run (`python -m bench smoke gpu_check`: bench/checks/gpu_check.py
--smoke, numpy in the GPU's place, tiny inputs, a tiny stand-in index of examples/corpus.json) runs every
section, `bench/gpu_workers.py --smoke` among them, and each section must succeed with its figures, so a
section that breaks fails here. The script runs in its own process: this module imports nothing of bench/."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import ROOT

REPORT_FILE = "gpu_check.json"
SECTIONS = ("parity", "indexing", "pair_count", "dense_search", "load_index", "ppr", "engine", "encoder", "workers", "scale")


def positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> tuple[dict[str, Any], Path]:
    scratch = tmp_path_factory.mktemp("gpu_check")
    proc = subprocess.run([sys.executable, "-m", "bench", "smoke", "gpu_check", "--tmp", str(scratch)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    out = scratch / "gpu_check"  # the registry's smoke arguments: --out {tmp}/gpu_check
    assert proc.returncode == 0, f"gpu_check.py --smoke failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads((out / REPORT_FILE).read_text()), out


def test_every_section_ran_and_succeeded(smoke):
    report, _ = smoke
    assert report["smoke"] is True and report["backends"] == ["numpy", "numpy"]
    assert report["status"] == dict.fromkeys(SECTIONS, "ok")
    assert all(positive(report["section_seconds"][name]) for name in SECTIONS)
    assert "finished" in report


def test_parity_selects_the_gpu_marker_and_its_tests_skip_cleanly(smoke):
    """`pytest -m gpu` collects the CuPy cases (more than a few dozen) and deselects the rest; without a device
    every one is skipped, none fails or errs (with one, the device run needs some to pass)."""
    report, out = smoke
    parity = report["parity"]
    counts = parity["counts"]
    assert parity["marker"] == "gpu" and parity["returncode"] == 0
    assert counts["skipped"] >= 30 and counts["deselected"] > counts["skipped"]
    assert counts["failed"] == counts["errors"] == 0
    assert "skipped" in (out / "parity_pytest.txt").read_text()


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


def test_dense_search_screened_equals_the_scan_per_backend_and_batch(smoke):
    section = smoke[0]["dense_search"]
    assert section["ok"] is True
    assert [(r["backend"], r["chunks"], r["batch"]) for r in section["rows"]] == [("numpy", 3000, 1), ("numpy", 3000, 16)] * 2
    for row in section["rows"]:
        assert row["identical"] is True
        assert positive(row["screened_seconds"]) and positive(row["scan_seconds"]) and positive(row["scan_over_screened"])


def test_ppr_figures_per_backend_and_batch(smoke):
    report = smoke[0]
    assert report["load_index"]["queries"] == 15 and report["load_index"]["chunks"] > 0
    rows = report["ppr"]["rows"]
    assert [(r["backend"], r["batch"]) for r in rows] == [("numpy", 4), ("numpy", 16)] * 2
    for row in rows:
        assert row["sweeps"] >= 1
        assert positive(row["queries_per_second"]) and positive(row["bytes_per_second"])
    push = report["ppr"]["push"]
    assert [(r["backend"], r["batch"]) for r in push] == [("numpy", 4), ("numpy", 16)] * 2
    for row in push:
        assert positive(row["queries_per_second"]) and positive(row["push_over_exact"])
        assert 0.5 < row["top_gamma_overlap"] <= 1.0


def test_engine_figures_and_same_rankings(smoke):
    engine = smoke[0]["engine"]
    assert len(engine["rows"]) == 16 and engine["same_top5_as_cpu"] == 1.0
    assert sorted({row["preset"] for row in engine["rows"]}) == ["best", "best sparse", "paper", "paper sparse"]
    for row in engine["rows"]:
        assert positive(row["queries_per_second_without_encoder"]) and row["same_top5_as_cpu"] == 1.0
        assert row["queries"] >= 15 and {"ppr", "score", "pool"} <= set(row["step_seconds"])


def test_encoder_section_measures_the_torch_runtime(smoke):
    encoder = smoke[0]["encoder"]
    from gpu_tigrag.config import EncoderConfig

    assert encoder["weights"] == "real" and encoder["model"] == EncoderConfig().model  # installed here
    assert positive(encoder["cpu_passages_per_second"]) and positive(encoder["cpu_queries_per_second"])
    # the fixed batches the GPU run times (256 and 1024 there), run here on the CPU at small batches
    assert [row["batch"] for row in encoder["fixed_batches"]] == [2, 4]
    assert all(positive(row["passages_per_second"]) and positive(row["queries_per_second"])
               for row in encoder["fixed_batches"])
    assert encoder["ok"] is True


def test_the_encoder_architecture_runs_with_random_weights_where_the_model_is_absent(smoke):
    """The GPU machine's path: the architecture carried without weights, given random ones, loaded and run."""
    random = smoke[0]["encoder"]["random_weights"]
    assert random["weights"] == "random" and random["carried_weight_files"] == []
    assert random["saved_random_weights"] is True and random["shape"][0] == 2 and random["ok"] is True


def test_workers_runs_and_same_rankings(smoke):
    workers = smoke[0]["workers"]
    assert workers["returncode"] == 0 and workers["gpu_backend"] == "numpy" and positive(workers["index_seconds"])
    assert set(workers["runs"]) == {"gpu_1_worker", "gpu_1_worker_batch_2048", "cpu_1_workers"}
    for run in workers["runs"].values():
        assert positive(run["queries_per_second"]) and run["same_top5_as_cpu"] == 1.0


def test_the_scale_section_times_the_default_modes(smoke):
    """The scale section builds a synthetic index and times both presets with their default (auto) modes
    on the device backend and on the CPU; here a 300-passage index, below the crossover: dense and exact."""
    scale = smoke[0]["scale"]
    (size,) = scale["sizes"]
    assert size["passages"] == 300 and size["build_seconds"] > 0
    assert [(s["system"], s["backend"]) for s in size["systems"]] == [
        ("TIGRAG paper", "numpy"), ("TIGRAG paper", "numpy"), ("TIGRAG best", "numpy"), ("TIGRAG best", "numpy")]
    for system in size["systems"]:
        assert positive(system["queries_per_second"]) and system["modes"]
        assert system["modes"] == {"tigrag.blocks": "full", "tigrag.ppr.algorithm": "exact"}
