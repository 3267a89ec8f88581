"""The CLI's logging: progress messages go to stderr as plain lines (INFO by default, WARNING with
-q, DEBUG with -v), results stay on stdout, and one process running several commands does not
repeat messages."""

import json
import logging

import pytest

from gpu_tigrag.cli import PACKAGE_LOGGER, logging_to_stderr, main

PASSAGES = [
    {"title": "Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
    {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
    {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."},
]
FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("logging")
    (folder / "corpus.json").write_text(json.dumps(PASSAGES))
    (folder / "q.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "question": p["text"]}) + "\n"
                                            for i, p in enumerate(PASSAGES)))
    assert main(["index", str(folder / "corpus.json"), "-o", str(folder / "idx"), *FAST, "-q"]) == 0
    return folder


def test_index_progress_goes_to_stderr_and_quiet_hides_it(files, tmp_path, capsys):
    assert main(["index", str(files / "corpus.json"), "-o", str(tmp_path / "a"), *FAST]) == 0
    out, err = capsys.readouterr()
    assert "loaded 3 passages from 1 file(s)" in err.splitlines()  # a plain line: no level, no logger name
    assert "loaded" not in out and "index written to" in out
    assert main(["index", str(files / "corpus.json"), "-o", str(tmp_path / "b"), *FAST, "--quiet"]) == 0
    assert "loaded" not in capsys.readouterr().err


@pytest.mark.parametrize("flags, summary, debug", [
    ([], True, False),
    (["-q"], False, False),
    (["-v"], True, True),
    (["-v", "-q"], True, True),  # -v wins: debugging output was asked for
])
def test_run_messages_by_level(files, tmp_path, capsys, flags, summary, debug):
    out = tmp_path / "out.jsonl"
    assert main(["run", str(files / "idx"), str(files / "q.jsonl"), "-o", str(out), "-k", "2", "--backend", "numpy",
                 *flags]) == 0
    stdout, err = capsys.readouterr()
    assert stdout == ""
    assert (f"3 queries written to {out}" in err) == summary
    assert ("micro-batches of" in err) == debug


def test_verbose_works_before_the_command(files, tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    assert main(["-v", "run", str(files / "idx"), str(files / "q.jsonl"), "-o", str(out), "--backend", "numpy"]) == 0
    assert "micro-batches of" in capsys.readouterr().err


def test_json_output_stays_clean_and_commands_leave_no_logging_behind(files, capsys):
    logger = logging.getLogger(PACKAGE_LOGGER)
    before = (logger.level, list(logger.handlers))
    for _ in range(2):
        assert main(["query", str(files / "idx"), "Korvath harbour", "--json", "--backend", "numpy", "-q"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["titles"]
        assert (logger.level, list(logger.handlers)) == before


def test_warnings_show_under_quiet_and_each_message_once(capsys):
    with logging_to_stderr(quiet=True):
        logging.getLogger("gpu_tigrag.test").info("progress")
        logging.getLogger("gpu_tigrag.test").warning("something to check")
    with logging_to_stderr():
        logging.getLogger("gpu_tigrag.test").info("progress")
    assert capsys.readouterr().err.splitlines() == ["something to check", "progress"]
