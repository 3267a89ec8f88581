"""Every numeric setting has a declared range, refused past it with one line naming the setting, the
value and the range (issue 30, item 5); duplicate or colliding ids are an error naming both records
(item 4)."""

import json
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from gpu_tigrag.cli import main
from gpu_tigrag.config import (IndexConfig, RetrievalConfig, config_from_dict, describe_settings, replace_path,
                               setting_bounds)
from gpu_tigrag.corpus import Passage, load_corpus
from gpu_tigrag.errors import CorpusError, TigragError
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import load_index
from gpu_tigrag.methods.tigrag.config import PPRConfig

pytestmark = [pytest.mark.reliability]

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
FAST_CONFIG = replace_path(replace_path(IndexConfig(), "encoder.model", "hashing:64"), "entities.model", "capitalized")
PASSAGES = [
    {"title": "The Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
    {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
    {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."},
    {"title": "Winter Tide", "text": "Winter Tide is a thriller film directed by Oskar Helm."},
    {"title": "Oskar Helm", "text": "Oskar Helm is a film director born in the mountain village Dravna."},
    {"title": "Dravna", "text": "Dravna is a mountain village with a stone bridge and a mill."},
    {"title": "Selvan Sea", "text": "The Selvan Sea is fished by the fleets of Korvath and other towns."},
]
QUESTION = "Where was the director of The Glass Orchard born?"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NUMERIC = ("an integer", "a number", "a comma-separated list of numbers")
#: every numeric setting: (side, path, type, range)
SETTINGS = [(side, row.path, row.type, row.range) for side, rows in describe_settings().items() for row in rows
            if row.type.startswith(NUMERIC)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bounds")
    (folder / "corpus.json").write_text(json.dumps(PASSAGES))
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(folder / "idx"), *FAST]) == 0
    return folder


def one_line_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("loaded ")]
    assert len(err) == 1 and err[0].startswith("tigrag: error: "), err
    return err[0]


def config_class(path: str):
    """The config class (from the index or retrieval side) declaring the setting `path`, and its field."""
    side = next(side for side, p, _, _ in SETTINGS if p == path)
    cls = IndexConfig if side == "index" else RetrievalConfig
    *groups, name = path.split(".")
    for group in groups:
        cls = type(getattr(cls(), group))
    return cls, name


def outside(path: str, kind: str) -> list[str]:
    """Values of setting `path` just outside its range on both sides, and the non-finite ones."""
    bounds = setting_bounds(*config_class(path))
    if kind == "an integer":
        low = bounds.low if bounds.low_open else bounds.low - 1
        high = bounds.high if bounds.high_open else bounds.high + 1
        return [str(low), str(high)]
    low = bounds.low if bounds.low_open else math.nextafter(bounds.low, -math.inf)
    high = bounds.high if bounds.high_open else math.nextafter(bounds.high, math.inf)
    return [repr(float(low)), repr(float(high)), "nan", "inf", "-inf", "1e400"]


def set_value(path: str, value: str) -> str:
    """`--set` text: a list setting (litesemrag.level_weights) gets the value as its first of 4."""
    kind = next(t for _, p, t, _ in SETTINGS if p == path)
    return f"{path}={value},1,1,1" if kind.startswith("a comma-separated") else f"{path}={value}"


# --- ranges of the settings ----------------------------------------------------------------------------

def test_every_numeric_setting_declares_its_range_and_its_default_is_inside():
    assert len(SETTINGS) > 60
    assert not [path for _, path, _, rng in SETTINGS if not rng], "numeric settings without a declared range"
    for side, path, kind, rng in SETTINGS:
        config = IndexConfig() if side == "index" else RetrievalConfig()
        bounds = setting_bounds(*config_class(path))
        assert str(bounds) == rng
        default = config
        for part in path.split("."):
            default = getattr(default, part)
        assert all(v in bounds for v in (default if isinstance(default, tuple) else (default,))), path


def inside(side: str, path: str, kind: str) -> tuple[object, list[str]]:
    """(a base config, the values at the ends of the range of `path`: a closed end itself, the nearest
    value inside an open one), the base adjusted where a relation to another field needs it."""
    bounds = setting_bounds(*config_class(path))
    base = IndexConfig() if side == "index" else RetrievalConfig()
    if path == "chunk.overlap":  # o < s: the largest overlap needs the largest chunk
        base = replace_path(base, "chunk.sentences_per_chunk", str(setting_bounds(*config_class(
            "chunk.sentences_per_chunk")).high))
    if path == "chunk.sentences_per_chunk":  # ... and the smallest chunk no overlap
        base = replace_path(base, "chunk.overlap", "0")
    values = []
    for end, is_open, inward in ((bounds.low, bounds.low_open, math.inf), (bounds.high, bounds.high_open, -math.inf)):
        value = math.nextafter(end, inward) if is_open else end
        values.append(str(value) if kind == "an integer" else repr(float(value)))
    return base, values


@pytest.mark.parametrize("side, path, kind, rng", SETTINGS, ids=[s[1] for s in SETTINGS])
def test_each_bound_is_refused_by_the_cli_naming_setting_value_and_range(files, tmp_path, capsys, side, path, kind,
                                                                           rng):
    """Past either end of its range, and NaN or infinite, a `--set` is one line (exit 2) before any
    work: for an index setting nothing is written, for a retrieval setting the index is not read.
    The ends themselves (the nearest value inside an open end) are accepted."""
    base, ends = inside(side, path, kind)
    for value in ends:
        replace_path(base, path, set_value(path, value).partition("=")[2])
    for value in outside(path, kind):
        item = set_value(path, value)
        if side == "index":
            argv = ["index", str(files / "corpus.json"), "-o", str(tmp_path / "never"), "--set", item, "-q"]
        else:
            argv = ["query", str(files / "idx"), "film", "--set", item, "-q"]
        assert main(argv) == 2, item
        err = one_line_error(capsys)
        assert f"--set {item}:" in err and path in err, err
        if value in ("nan", "inf", "-inf", "1e400"):
            assert "expects a" in err, err  # not a finite number: refused as it is read
        else:
            assert f"{path} must be in {rng}, got " in err and value.split(",")[0] in err, err
        assert not (tmp_path / "never").exists()


def test_stored_or_api_settings_outside_their_range_are_refused():
    """The range is checked by the config classes themselves: a stored config (manifest, run sidecar)
    and the API are refused as `--set` is."""
    with pytest.raises(TigragError, match=r"bm25.k1 must be in \[0, 1000\], got 1e\+308"):
        config_from_dict(IndexConfig, {"bm25": {"k1": 1e308}})
    with pytest.raises(TigragError, match=r"tigrag.fusion.question_link_bonus must be in \[0, 1000\], got nan"):
        config_from_dict(RetrievalConfig, {"tigrag": {"fusion": {"question_link_bonus": float("nan")}}})
    with pytest.raises(TigragError, match=r"spectrag.dimensions must be in \[1, 4096\]"):
        config_from_dict(IndexConfig, {"spectrag": {"dimensions": 10**20}})
    with pytest.raises(TigragError, match=r"tigrag.ppr.top_gamma must be in \[1, 1000000\], got 2147483648"):
        PPRConfig(top_gamma=2**31)


def test_an_integer_past_int64_is_one_line_not_a_traceback(files, tmp_path, capsys):
    """`spectrag.dimensions=99999999999999999999` passed `>= 1` and crashed the SpectRAG build with an
    OverflowError traceback; an integer of hundreds of digits is named by its length."""
    out = tmp_path / "spectral"
    assert main(["index", str(files / "corpus.json"), "-o", str(out), "--methods", "tigrag,spectrag", "--set",
                 "spectrag.dimensions=99999999999999999999", *FAST]) == 2
    assert "spectrag.dimensions must be in [1, 4096], got 99999999999999999999" in one_line_error(capsys)
    assert not out.exists()
    assert main(["index", str(files / "corpus.json"), "-o", str(out), "--methods", "tigrag,spectrag", "--set",
                 "spectrag.semantic_top_k=" + "9" * 400, *FAST]) == 2
    assert "spectrag.semantic_top_k must be in [1, 100000], got an integer of about 400 digits" in one_line_error(capsys)
    for item in ("tigrag.ppr.top_gamma=99999999999999999999", "tigrag.pool_max=9223372036854775808"):
        assert main(["query", str(files / "idx"), QUESTION, "--set", item, "-q"]) == 2
        assert f"--set {item}: tigrag." in one_line_error(capsys)


@pytest.mark.parametrize("bonus", ["question_link_bonus", "bridge_link_bonus"])
def test_a_link_bonus_of_1e308_is_refused_and_the_largest_allowed_keeps_every_result(files, capsys, bonus):
    """`question_link_bonus=1e308` returned 4 results for -k 5 and dropped the passage the question
    names (the bonus is inf in float32); the range's top, 1,000 (500 times the cosine range), gives
    k finite results with that passage first."""
    assert main(["query", str(files / "idx"), QUESTION, "-k", "5", "--set", f"tigrag.fusion.{bonus}=1e308", "-q"]) == 2
    assert f"tigrag.fusion.{bonus} must be in [0, 1000], got 1e+308" in one_line_error(capsys)
    capsys.readouterr()
    assert main(["query", str(files / "idx"), QUESTION, "-k", "5", "--json", "--set", f"tigrag.fusion.{bonus}=1000",
                 "-q"]) == 0
    result = json.loads(capsys.readouterr().out)[0]
    assert len(result["chunk_ids"]) == 5 and all(math.isfinite(s) for s in result["scores"])
    assert "The Glass Orchard" in result["titles"]
    if bonus == "question_link_bonus":
        assert result["titles"][0] == "The Glass Orchard"


def test_bm25_k1_of_1e308_is_refused_and_the_largest_allowed_indexes_finite_scores(files, tmp_path, capsys):
    """`bm25.k1=1e308` wrote an all-NaN BM25 matrix that every later command called damaged; the
    range's top, 1,000, builds finite, positive weights."""
    assert main(["index", str(files / "corpus.json"), "-o", str(tmp_path / "nan"), "--set", "bm25.k1=1e308", *FAST]) == 2
    assert "bm25.k1 must be in [0, 1000], got 1e+308" in one_line_error(capsys)
    assert not (tmp_path / "nan").exists()
    assert main(["index", str(files / "corpus.json"), "-o", str(tmp_path / "k1"), "--set", "bm25.k1=1000", *FAST]) == 0
    bm25 = load_index(tmp_path / "k1").bm25
    assert bm25.nnz and np.isfinite(bm25.data).all() and (bm25.data > 0).all()


# --- duplicate and colliding ids -----------------------------------------------------------------------

def with_ids(ids, passages=PASSAGES):
    return [{"id": i, **p} for i, p in zip(ids, passages)]


def test_a_duplicate_id_in_a_json_corpus_is_an_error_naming_both_records(files, tmp_path, capsys, caplog):
    corpus = tmp_path / "dup.json"
    corpus.write_text(json.dumps(with_ids(["a", "b", "a"])))
    with pytest.raises(CorpusError, match=r"dup.json: record 2: passage id 'a' is also the id of .*dup.json: record 0"):
        load_corpus(corpus)
    assert main(["index", str(corpus), "-o", str(tmp_path / "i"), *FAST]) == 2
    assert "record 2: passage id 'a' is also the id of" in one_line_error(capsys)
    assert not (tmp_path / "i").exists()
    # across files: the second file's record is named with the first file's
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    first.write_text(json.dumps(with_ids(["x", "y"])))
    second.write_text(json.dumps(with_ids(["z", "x"], PASSAGES[3:])))
    with pytest.raises(CorpusError, match=r"two.json: record 1: passage id 'x' is also the id of .*one.json: record 0"):
        load_corpus([first, second])
    # the same file given twice repeats every passage whole: a repeat (warned, or dropped), not a clash
    with caplog.at_level(logging.WARNING):
        assert main(["index", str(first), str(first), "-o", str(tmp_path / "twice"), *FAST]) == 0
    assert "2 of 4 passages repeat" in caplog.text
    assert main(["index", str(first), str(first), "-o", str(tmp_path / "once"), "--drop-duplicates", *FAST]) == 0
    assert load_index(tmp_path / "once").passage_ids == ["x", "y"]


def test_a_duplicate_id_in_jsonl_and_parquet_is_an_error_naming_both_lines_or_rows(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    jsonl = tmp_path / "dup.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in with_ids(["d1", "d2", "d3"])) + "\n\n"
                     + json.dumps({"_id": "d2", "title": "Other", "text": "Another passage."}) + "\n")
    with pytest.raises(CorpusError, match=r"dup.jsonl: line 5: passage id 'd2' is also the id of .*dup.jsonl: line 2"):
        load_corpus(jsonl)
    parquet = tmp_path / "dup.parquet"
    pq.write_table(pa.table({"_id": ["p0", "p1", "p0"], "title": ["A", "B", "C"], "text": ["x y", "z w", "u v"]}),
                   parquet)
    with pytest.raises(CorpusError, match=r"dup.parquet: row 2: passage id 'p0' is also the id of .*dup.parquet: row 0"):
        load_corpus(parquet)
    assert main(["index", str(parquet), "-o", str(tmp_path / "i"), *FAST]) == 2
    assert "row 2: passage id 'p0' is also the id of" in one_line_error(capsys)


def test_a_streamed_build_finds_a_duplicate_id_across_partitions(files, tmp_path, capsys):
    """The streamed build sees one partition at a time; the ids seen (one entry each, no text) find
    a clash between partitions and files, and no index is written."""
    corpus = tmp_path / "dup.jsonl"
    records = with_ids(["s0", "s1", "s2", "s3", "s4", "s0"])
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "streamed"
    assert main(["index", str(corpus), "-o", str(out), "--stream", "--workers", "1", "--partition-passages", "2",
                 *FAST]) == 2
    assert "dup.jsonl: line 6: passage id 's0' is also the id of" in one_line_error(capsys)
    assert not (out / "manifest.json").exists()
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records[:5]))  # fixed: the build resumes and finishes
    assert main(["index", str(corpus), "-o", str(out), "--stream", "--resume", "--workers", "1",
                 "--partition-passages", "2", *FAST]) == 0
    assert load_index(out).passage_ids == ["s0", "s1", "s2", "s3", "s4"]


def test_add_of_an_id_the_index_has_for_another_passage_is_an_error_naming_both(tmp_path, capsys, caplog):
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps(with_ids(["a", "b", "c"])))
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 0
    new = tmp_path / "new.json"
    new.write_text(json.dumps([{"id": "z", **PASSAGES[5]}, {"id": "b", "title": "Mirela Vantz",
                                                             "text": "Mirela Vantz is a painter."}]))
    for extra in ([], ["--drop-duplicates"]):  # an edited passage is not a duplicate to drop
        capsys.readouterr()
        assert main(["add", str(tmp_path / "idx"), str(new), "-q", *extra]) == 2
        err = one_line_error(capsys)
        assert "new.json: record 1: passage id 'b' is already the id of passage 1 of the index (title 'Mirela Vantz')" \
            in err
    assert load_index(tmp_path / "idx").passage_ids == ["a", "b", "c"]
    # the same passages again are a repeat (warned, or skipped), not a clash
    with caplog.at_level(logging.WARNING):
        assert main(["add", str(tmp_path / "idx"), str(corpus), "-q", "--drop-duplicates"]) == 2
    assert "every passage of" in capsys.readouterr().err
    # the API refuses it too, and two added passages of one id
    index = load_index(tmp_path / "idx")
    with pytest.raises(CorpusError, match="passage id 'a' is already the id of passage 0 of the index"):
        add_passages(index, [Passage("Other", "Another passage about a town.", "a")])
    with pytest.raises(CorpusError, match=r"passage 1 \(title 'Q'\): passage id 'n' is also the id of passage 0"):
        add_passages(index, [Passage("P", "A town by the sea.", "n"), Passage("Q", "A village in the hills.", "n")])


def test_build_index_refuses_two_passages_with_one_id():
    passages = [Passage(p["title"], p["text"], f"d{i}") for i, p in enumerate(PASSAGES[:3])]
    passages.append(Passage("Another", "Another passage.", "d1"))
    with pytest.raises(CorpusError, match=r"passage 3 \(title 'Another'\): passage id 'd1' is also the id of passage 1"):
        build_index(passages, FAST_CONFIG)


def test_numeric_ids_keep_their_text_so_distinct_numbers_stay_distinct(tmp_path, capsys):
    """`1.0`, `1.00` and `10e-1` became one id "1.0", and two of the three passages vanished from TREC
    runs; each keeps its own text now, and a string that equals a number's text is a clash, named."""
    corpus = tmp_path / "numbers.jsonl"
    corpus.write_text("".join(f'{{"id": {number}, "title": "{p["title"]}", "text": "{p["text"]}"}}\n'
                              for number, p in zip(["1.0", "1.00", "10e-1", "7"], PASSAGES)))
    assert [p.doc_id for p in load_corpus(corpus)] == ["1.0", "1.00", "10e-1", "7"]
    corpus.write_text("".join(corpus.read_text().splitlines(keepends=True)[:3]))
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 0
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "q1", "question": "The Glass Orchard, Mirela Vantz and Korvath"}) + "\n")
    assert main(["run", str(tmp_path / "idx"), str(queries), "-o", str(tmp_path / "run.trec"), "-k", "3", "-q"]) == 0
    docids = [line.split()[2] for line in (tmp_path / "run.trec").read_text().splitlines()]
    assert sorted(docids) == ["1.0", "1.00", "10e-1"]
    clash = tmp_path / "clash.json"
    clash.write_text('[{"id": 1.0, "title": "A", "text": "x y"}, {"id": "1.0", "title": "B", "text": "z w"}]')
    with pytest.raises(CorpusError, match=r"record 1: passage id '1.0' is also the id of .*record 0"):
        load_corpus(clash)


def test_a_title_twice_in_a_json_object_corpus_is_an_error(tmp_path, capsys):
    """A `title -> text` corpus names each passage by its title; JSON kept the last of two equal keys
    and the first passage vanished without a word."""
    corpus = tmp_path / "hotpot.json"
    corpus.write_text('{"Korvath": ["Korvath is a town."], "Dravna": ["Dravna is a village."], '
                      '"Korvath": ["Korvath has a lighthouse."]}')
    assert main(["index", str(corpus), "-o", str(tmp_path / "i"), *FAST]) == 2
    assert "hotpot.json: an object holds the key 'Korvath' twice (its entries 0 and 2)" in one_line_error(capsys)


def test_duplicate_query_ids_in_a_question_file_are_an_error_naming_both_records(files, tmp_path, capsys):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps([
        {"id": "q1", "question": QUESTION, "gold_titles": ["The Glass Orchard", "Mirela Vantz"]},
        {"id": "q2", "question": "What is in Dravna?", "gold_titles": ["Dravna"]},
        {"id": "q1", "question": "What is in Korvath?", "gold_titles": ["Korvath"]}]))
    assert main(["eval", str(files / "idx"), str(questions), "-q"]) == 2
    assert f"{questions}: record 2: query id 'q1' is also the id of {questions}: record 0" in one_line_error(capsys)
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", **p}) + "\n" for i, p in enumerate(PASSAGES)))
    (beir / "queries.jsonl").write_text(json.dumps({"_id": "7", "text": QUESTION}) + "\n"
                                        + json.dumps({"_id": 7, "text": "What is in Korvath?"}) + "\n")
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n7\td0\t1\n")
    assert main(["eval", str(files / "idx"), str(beir), "-q"]) == 2
    assert "queries.jsonl: line 2: query id '7' is also the id of" in one_line_error(capsys)
