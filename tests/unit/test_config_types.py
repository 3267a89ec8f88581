"""Typed configuration: `--set` and `--sweep` parse by the declared field types (issue 11, part 3)."""

import json

import pytest

from gpu_tigrag.cli import main
from gpu_tigrag.config import (
    SYMBOLS, TIGRAG_LEGACY_KEYS, BM25Config, FusionConfig, IndexConfig, PPRConfig, RetrievalConfig, config_from_dict, config_to_dict,
    replace_path,
)
from gpu_tigrag.errors import TigragError
from gpu_tigrag.evaluate.experiment import SWEEP_KEYS, parse_sweeps
from gpu_tigrag.index.store import read_manifest
from gpu_tigrag.presets import PRESETS

pytestmark = [pytest.mark.reliability]

PASSAGES = [
    {"title": "Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
    {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
    {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."},
]
FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]


@pytest.fixture(scope="module")
def tiny_index(tmp_path_factory):
    folder = tmp_path_factory.mktemp("types")
    corpus = folder / "corpus.json"
    corpus.write_text(json.dumps(PASSAGES))
    assert main(["index", str(corpus), "-o", str(folder / "idx"), *FAST]) == 0
    return folder / "idx"


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tigrag: error: "), err
    return err[0]


def test_tuples_are_comma_lists():
    config = replace_path(RetrievalConfig(), "entity_labels", "PERSON, ORG,")
    assert config.tigrag.entity_labels == ("PERSON", "ORG")
    with pytest.raises(TigragError, match="unknown entity label"):
        replace_path(RetrievalConfig(), "entity_labels", "PERSON,ORGANISATION")


@pytest.mark.parametrize("text, value", [("true", True), ("False", False), ("1", True), ("0", False),
                                         ("yes", True), ("NO", False)])
def test_booleans_are_strict(text, value):
    assert replace_path(RetrievalConfig(), "rerank", text).tigrag.rerank is value


@pytest.mark.parametrize("text", ["flase", "maybe", "", "2", "on"])
def test_bad_booleans_are_errors(text):
    with pytest.raises(TigragError, match="rerank \\(tigrag.rerank\\) expects a boolean"):
        replace_path(RetrievalConfig(), "rerank", text)


@pytest.mark.parametrize("key, text, message", [
    ("hops", "2.5", "expects an integer"), ("hops", "two", "expects an integer"),
    ("ppr.damping", "abc", "expects a number"), ("ppr.damping", "nan", "expects a number"),
    ("ppr.tol", "inf", "expects a number"),
])
def test_numbers_are_strict(key, text, message):
    with pytest.raises(TigragError, match=message):
        replace_path(RetrievalConfig(), key, text)


def test_values_of_each_type_are_parsed():
    config = replace_path(RetrievalConfig(), "ppr.tol", "1e-3")
    config = replace_path(config, "hops", " 3 ")
    config = replace_path(config, "fusion.first_hop", "hybrid")
    tigrag = config.tigrag
    assert (tigrag.ppr.tol, tigrag.hops, tigrag.fusion.first_hop) == (1e-3, 3, "hybrid")
    assert isinstance(tigrag.ppr.tol, float) and isinstance(tigrag.hops, int)


@pytest.mark.parametrize("key, value", [("ppr", "3"), ("fusion", "1"), ("ppr", PPRConfig())])
def test_a_nested_config_cannot_be_replaced(key, value):
    with pytest.raises(TigragError, match=f"{key} is a group of settings"):
        replace_path(RetrievalConfig(), key, value)


def test_unknown_fields_and_properties_are_rejected_naming_the_valid_ones():
    with pytest.raises(TigragError, match="chunk.stride is derived.*sentences_per_chunk, overlap"):
        replace_path(IndexConfig(), "chunk.stride", "3")
    with pytest.raises(TigragError, match="unknown setting 'dampng'.*beta.*tigrag.*symbols: th"):
        replace_path(RetrievalConfig(), "dampng", "0.5")
    with pytest.raises(TigragError, match="PPRConfig has the fields damping, top_gamma, tol, max_iter"):
        replace_path(RetrievalConfig(), "ppr.dampng", "0.5")
    with pytest.raises(TigragError, match="hops is a single value"):
        replace_path(RetrievalConfig(), "hops.x", "1")


def test_paper_symbols_are_one_table_for_set_and_sweep():
    assert replace_path(RetrievalConfig(), "th", "0.5").tigrag.pool_threshold == 0.5
    assert replace_path(RetrievalConfig(), "gamma", "20").tigrag.ppr.top_gamma == 20
    assert replace_path(IndexConfig(), "w", "5").graph.window == 5
    assert all(SYMBOLS[key] == path for key, path in SWEEP_KEYS.items())
    assert {"th", "beta", "iota", "h", "gamma", "damping", "w"} <= set(SWEEP_KEYS)
    with pytest.raises(TigragError, match="w \\(graph.window\\) is an index setting"):
        replace_path(RetrievalConfig(), "w", "5")
    with pytest.raises(TigragError, match="th \\(tigrag.pool_threshold\\) is a retrieval setting"):
        replace_path(IndexConfig(), "th", "0.5")


def test_sweep_values_are_typed_before_the_run():
    assert parse_sweeps(["th=0.1,0.5", "w=3"]) == {"th": ["0.1", "0.5"], "w": ["3"]}
    for spec, message in [("th=abc", "th \\(tigrag.pool_threshold\\) expects a number"), ("gamma=1.5", "expects an integer"),
                          ("th=2", "pool_threshold must be in"), ("w=1", "graph.window must be in \\[2, 1000\\], got 1"),
                          ("s=4", "index setting"), ("theta=1", "NAME one of th")]:
        with pytest.raises(TigragError, match=message):
            parse_sweeps([spec])


def test_python_api_checks_declared_types():
    with pytest.raises(TigragError, match="TigragQueryConfig.hops must be an integer"):
        RetrievalConfig.of("tigrag", hops="2")
    with pytest.raises(TigragError, match="TigragQueryConfig.rerank must be a boolean"):
        RetrievalConfig.of("tigrag", rerank=1)
    with pytest.raises(TigragError, match="BM25Config.k1 must be a number"):
        BM25Config(k1="1.2")
    assert RetrievalConfig.of("tigrag", entity_labels=["PERSON"]).tigrag.entity_labels == ("PERSON",)
    assert BM25Config(k1=1).k1 == 1  # an int is a number


def test_defaults_and_presets_are_unchanged():
    assert PRESETS["paper"] == RetrievalConfig()
    best = PRESETS["best"].tigrag.fusion
    assert best == FusionConfig(first_hop="hybrid", title_links=True, question_link_bonus=5.0, bridge_link_bonus=2.0,
                                link_bonus_unit="cosine_std", bridge_entities=8, dedup_passages=True,
                                named_expansions="repeats", contained_expansions="question", expansion_passes=3,
                                expansion_order="typed")
    for config in (*PRESETS.values(), IndexConfig()):
        assert config_from_dict(type(config), config_to_dict(config)) == config


def test_the_old_layout_of_tigrag_settings_still_reads():
    """TIGRAG's settings were top-level keys before they became the `tigrag` section: old run files
    and `--set` paths keep their meaning; a key given in both places is an error."""
    best = PRESETS["best"]
    old = config_to_dict(best)
    section = old.pop("tigrag")
    old.update({key: section[key] for key in TIGRAG_LEGACY_KEYS})  # settings added since have no old place
    assert config_from_dict(RetrievalConfig, old) == best
    assert replace_path(best, "fusion.title_links", "no") == replace_path(best, "tigrag.fusion.title_links", "no")
    both = {**config_to_dict(best), "hops": 1}
    with pytest.raises(TigragError, match="'hops' is given both at the top level"):
        config_from_dict(RetrievalConfig, both)


def test_cli_set_parses_tuples(tiny_index, capsys):
    assert main(["query", str(tiny_index), "Mirela Vantz film", "--set", "entity_labels=PERSON,ORG",
                 "--set", "th=0.5", "-k", "1", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)[0]["chunk_ids"]) == 1


@pytest.mark.parametrize("setting, message", [
    ("rerank=flase", "--set rerank=flase: rerank (tigrag.rerank) expects a boolean"),
    ("ppr=3", "--set ppr=3: tigrag.ppr is a group of settings"),
    ("fusion=1", "fusion is a group of settings"),
    ("chunk.stride=3", "unknown setting 'chunk.stride'"),
    ("hops=2.5", "hops (tigrag.hops) expects an integer"),
    ("w=5", "index setting"),
    ("nonsense", "--set expects KEY=VALUE"),
])
def test_cli_bad_set_is_one_line_and_exit_2(tiny_index, capsys, setting, message):
    assert main(["query", str(tiny_index), "film", "--set", setting]) == 2
    assert message in one_line_error(capsys)


def test_cli_index_set_is_typed(tmp_path, capsys):
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps(PASSAGES))
    assert main(["index", str(corpus), "-o", str(tmp_path / "i"), "--set", "chunk.stride=3"]) == 2
    assert "chunk.stride is derived" in one_line_error(capsys)
    assert main(["index", str(corpus), "-o", str(tmp_path / "i"), "--set", "chunk.title_in_chunk=nope"]) == 2
    assert "expects a boolean" in one_line_error(capsys)
    assert not (tmp_path / "i").exists()
    assert main(["index", str(corpus), "-o", str(tmp_path / "i"), "--set", "w=3", "--set",
                 "chunk.title_in_chunk=no", *FAST]) == 0
    manifest = read_manifest(tmp_path / "i")
    assert manifest["config"]["graph"]["window"] == 3 and manifest["config"]["chunk"]["title_in_chunk"] is False


def test_cli_sweep_with_a_bad_value_is_one_line(tiny_index, tmp_path, capsys):
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"question": "Where was Mirela Vantz born?", "gold_titles": ["Mirela Vantz"]}]))
    assert main(["eval", str(tiny_index), str(queries), "--systems", "TIGRAG", "--sweep", "th=abc", "-q"]) == 2
    assert "--sweep 'th=abc': th (tigrag.pool_threshold) expects a number, got 'abc'" in one_line_error(capsys)
