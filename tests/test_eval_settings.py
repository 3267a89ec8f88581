"""`--set` reaches every system of `tigrag eval` (issue 32, "wrong without a word" item 2): a row pinned to a
preset (`TIGRAG paper`, `best without title links`) runs that preset with the user's settings on top, a row
whose definition fixes a key keeps its own value and says so, and report.md lists each row's settings."""

from __future__ import annotations

import json

from conftest import EXAMPLES

from gpu_tigrag.cli import main
from gpu_tigrag.evaluate.datasets import load_dataset
from gpu_tigrag.evaluate.experiment import fixed_settings, non_default_settings, run_experiment, system_config
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.methods.registry import systems
from gpu_tigrag.presets import preset


def test_set_applies_on_top_of_every_preset_row(example_index, tmp_path):
    out = tmp_path / "report"
    code = main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--out", str(out),
                 "--systems", "TIGRAG paper", "TIGRAG", "TIGRAG 1-hop", "best without title links",
                 "--set", "tigrag.blocks=sparse", "--set", "tigrag.hops=3"])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())["results"]["systems"]
    for name in rows:  # every row, preset-pinned or not, runs the sparse blocks
        assert rows[name]["config"]["tigrag"]["blocks"] == "sparse", name
        assert rows[name]["settings"]["tigrag.blocks"] == "sparse", name
    assert rows["TIGRAG paper"]["config"]["tigrag"]["hops"] == 3
    assert rows["best without title links"]["config"]["tigrag"]["fusion"]["first_hop"] == "hybrid"  # still best
    assert rows["best without title links"]["config"]["tigrag"]["fusion"]["title_links"] is False
    # the 1-hop row's definition fixes hops: it stays one hop and says that the user's value did not apply
    assert rows["TIGRAG 1-hop"]["config"]["tigrag"]["hops"] == 1
    assert rows["TIGRAG 1-hop"]["fixed_settings"] == {"tigrag.hops": 1}
    assert all(not rows[n]["fixed_settings"] for n in rows if n != "TIGRAG 1-hop")
    report = (out / "report.md").read_text()
    assert "## Settings of each row" in report and "`tigrag.hops` (stays 1)" in report
    assert report.index("## Settings of each row") < report.index("## Appendix: the full retrieval configuration")


def test_system_config_keeps_the_preset_and_the_system_on_top():
    table = systems()
    settings = {"th": "0.5", "tigrag.fusion.title_links": "true"}
    paper = system_config(table["TIGRAG paper"], RetrievalConfig(), settings)
    assert paper.tigrag.pool_threshold == 0.5 and paper.tigrag.fusion.title_links is True
    without = system_config(table["best without title links"], RetrievalConfig(), settings)
    assert without.tigrag.fusion.title_links is False and without.tigrag.pool_threshold == 0.5
    assert fixed_settings(table["best without title links"], settings) == {"tigrag.fusion.title_links": False}
    assert fixed_settings(table["TIGRAG paper"], settings) == {}


def test_non_default_settings_name_what_differs_from_the_paper():
    assert non_default_settings(preset("paper")) == {}
    best = non_default_settings(preset("best"))
    assert best["tigrag.fusion.first_hop"] == "hybrid" and best["tigrag.fusion.bridge_entities"] == 8
    assert all(key.startswith("tigrag.") for key in best)  # no other method's section leaks in


def test_api_settings_reach_preset_rows(example_index):
    dataset = load_dataset(EXAMPLES / "questions.json")
    results = run_experiment(example_index.index, dataset, ["TIGRAG paper", "TIGRAG best"], backend="numpy",
                             settings={"tigrag.ppr.method": "push"})
    for row in results["systems"].values():
        assert row["config"]["tigrag"]["ppr"]["method"] == "push"
