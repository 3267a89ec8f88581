"""`tigrag.blocks=auto` and `tigrag.ppr.algorithm=auto` (issue 33 item 1): below `tigrag.sparse_min_chunks`
the defaults rank exactly as the exact reference (full blocks, exact PPR); from there they are the
sparse path (sparse blocks, push PPR); an explicit mode is kept; the retriever's config, the evaluation
report and `query -v` say what ran."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import QUESTIONS, ROOT
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.errors import TigragError
from gpu_tigrag.methods.tigrag.config import SPARSE_MIN_CHUNKS, resolve_modes
from gpu_tigrag.presets import preset, preset_with


def test_the_defaults_are_auto_for_both_presets():
    for config in (RetrievalConfig(), preset("paper"), preset("best")):
        assert (config.tigrag.blocks, config.tigrag.ppr.algorithm) == ("auto", "auto")
        assert config.tigrag.sparse_min_chunks == SPARSE_MIN_CHUNKS


@pytest.mark.parametrize("n_chunks, expected", [(1, ("full", "exact")), (SPARSE_MIN_CHUNKS - 1, ("full", "exact")),
                                                (SPARSE_MIN_CHUNKS, ("sparse", "push")), (10**7, ("sparse", "push"))])
def test_auto_resolves_by_the_index_size(n_chunks, expected):
    resolved, chosen = resolve_modes(RetrievalConfig().tigrag, n_chunks)
    assert (resolved.blocks, resolved.ppr.algorithm) == expected
    assert chosen == {"tigrag.blocks": expected[0], "tigrag.ppr.algorithm": expected[1]}


def test_an_explicit_mode_is_kept():
    explicit = preset_with("paper", {"tigrag.blocks": "full", "tigrag.ppr.algorithm": "push"}).tigrag
    resolved, chosen = resolve_modes(explicit, 10**7)
    assert resolved is explicit and chosen == {}
    half = preset_with("paper", {"tigrag.blocks": "sparse"}).tigrag
    resolved, chosen = resolve_modes(half, 10)
    assert (resolved.blocks, resolved.ppr.algorithm, chosen) == ("sparse", "exact", {"tigrag.ppr.algorithm": "exact"})


def test_unknown_modes_are_refused():
    for key, value in (("tigrag.blocks", "fast"), ("tigrag.ppr.algorithm", "sparse"), ("tigrag.sparse_min_chunks", "0")):
        with pytest.raises(TigragError, match=key.rsplit(".", 1)[-1]):
            preset_with("best", {key: value})


@pytest.mark.parametrize("preset_name", ["paper", "best"])
def test_auto_ranks_as_the_explicit_mode_it_chose(example_index, preset_name):
    """Below the crossover the defaults give the reference's rankings bit for bit; with the crossover
    under the example's size they give the sparse mode's."""
    from gpu_tigrag.methods.tigrag.retriever import Retriever

    index = example_index.index

    def ranked(settings):
        retriever = Retriever(index, preset_with(preset_name, settings), backend="numpy")
        return retriever, [(r.chunk_ids, r.scores) for r in retriever.retrieve(QUESTIONS, k=8)]

    auto, small = ranked({})
    assert auto.chosen_modes == {"tigrag.blocks": "full", "tigrag.ppr.algorithm": "exact"}
    assert (auto.config.tigrag.blocks, auto.config.tigrag.ppr.algorithm) == ("full", "exact")
    assert small == ranked({"tigrag.blocks": "full", "tigrag.ppr.algorithm": "exact"})[1]
    large_auto, large = ranked({"tigrag.sparse_min_chunks": str(index.n_chunks)})
    assert large_auto.chosen_modes == {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"}
    assert large == ranked({"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"})[1]


def test_query_verbose_and_the_report_say_what_auto_chose(example_index, tmp_path):
    cli = [sys.executable, "-m", "gpu_tigrag.cli"]
    done = subprocess.run([*cli, "query", str(example_index.path), QUESTIONS[0], "-k", "2", "-v"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "auto chose tigrag.blocks=full, tigrag.ppr.algorithm=exact" in done.stderr
    questions = ROOT / "examples" / "questions.json"
    done = subprocess.run([*cli, "eval", str(example_index.path), str(questions), "--systems", "TIGRAG", "-q",
                           "--set", "tigrag.sparse_min_chunks=1", "--out", str(tmp_path / "run")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    row = json.loads((tmp_path / "run" / "results.json").read_text())["results"]["systems"]["TIGRAG"]
    assert row["auto_chose"] == {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"}
    assert row["config"]["tigrag"]["blocks"] == "sparse"
    report = (tmp_path / "run" / "report.md").read_text()
    assert "auto chose `tigrag.blocks=sparse`, `tigrag.ppr.algorithm=push`" in report


def test_older_names_of_the_modes_still_read():
    """`tigrag.ppr.method` (now `tigrag.ppr.algorithm`: *method* names a retrieval method) and
    `tigrag.blocks=dense` (now `full`: *dense* names the dense first stage) are read as the names now,
    from `--set` and from a stored configuration (a run's description written before the rename)."""
    from gpu_tigrag.config import RetrievalConfig, config_from_dict, config_to_dict
    from gpu_tigrag.errors import TigragError
    from gpu_tigrag.presets import preset_with

    old = preset_with("paper", {"tigrag.ppr.method": "push", "tigrag.blocks": "dense"}).tigrag
    assert (old.ppr.algorithm, old.blocks) == ("push", "full")
    stored = config_to_dict(preset_with("paper", {"tigrag.ppr.algorithm": "push"}))
    assert stored["tigrag"]["ppr"]["algorithm"] == "push" and "method" not in stored["tigrag"]["ppr"]
    stored["tigrag"]["ppr"]["method"] = stored["tigrag"]["ppr"].pop("algorithm")
    stored["tigrag"]["blocks"] = "dense"
    assert config_from_dict(RetrievalConfig, stored) == preset_with("paper", {"tigrag.ppr.algorithm": "push",
                                                                             "tigrag.blocks": "full"})
    stored["tigrag"]["ppr"]["algorithm"] = "exact"
    with pytest.raises(TigragError, match="'method' .the older name. and 'algorithm' are both given"):
        config_from_dict(RetrievalConfig, stored)
