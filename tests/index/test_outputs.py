"""Issue 30, items 1-3: no writer replaces or deletes what the engine did not write (`outputs.py`), and
`tigrag trec` never converts an unfinished run without saying so. Each test fails on the code before it."""

import json
import os
import shutil
import stat

import pytest

from helpers import EXAMPLES, QUESTIONS
from gpu_tigrag.cli import main
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.store import load_index, save_index
from gpu_tigrag.locking import writer_lock

pytestmark = [pytest.mark.reliability]

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
CORPUS = EXAMPLES / "corpus.json"


def run(args, capsys):
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def snapshot(folder):
    """Every entry under `folder` with its bytes (files) — what a refused write must leave as it was."""
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An index of the example, a query file and a finished JSONL run of it."""
    folder = tmp_path_factory.mktemp("outputs")
    assert main(["index", str(CORPUS), "-o", str(folder / "idx"), *FAST]) == 0
    queries = folder / "q.jsonl"
    queries.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS)))
    assert main(["run", str(folder / "idx"), str(queries), "-o", str(folder / "run.jsonl"), "-k", "3", "-q",
                 "--backend", "numpy"]) == 0
    return folder


@pytest.mark.parametrize("manifest", ["{}", "", '{"format": "something else"}'])
@pytest.mark.parametrize("stream", [False, True])
def test_index_into_a_folder_of_user_files_is_refused(tmp_path, capsys, manifest, stream):
    """The issue's worst case: a folder with any manifest.json lost its .npy/.parquet files, gen-NNNNNN folders
    and .tmp-/.old- dot-files — and the corpus being indexed from it."""
    user = tmp_path / "udir"
    user.mkdir()
    (user / "manifest.json").write_text(manifest)
    shutil.copy(CORPUS, user / "corpus.json")
    for name in ("data.npy", "table.parquet", ".notes.tmp-1", ".x.old-2"):
        (user / name).write_bytes(b"mine")
    (user / "gen-000001").mkdir()
    (user / "gen-000001" / "keep.txt").write_text("mine")
    before = snapshot(user)
    code, err = run(["index", user / "corpus.json", "-o", user, *FAST, *(["--stream"] if stream else [])], capsys)
    assert code == 2 and "not the manifest of a gpu_tigrag index" in err, err
    assert snapshot(user) == before


def test_index_into_a_non_empty_folder_without_a_manifest_is_refused(tmp_path, capsys):
    user = tmp_path / "u"
    user.mkdir()
    shutil.copy(CORPUS, user / "corpus.json")
    before = snapshot(user)
    code, err = run(["index", user / "corpus.json", "-o", user, *FAST], capsys)
    assert code == 2 and "not an index directory (it holds corpus.json)" in err, err
    assert snapshot(user) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(["index", CORPUS, "-o", empty, *FAST], capsys)[0] == 0  # an empty folder is fine
    load_index(empty)


def test_index_into_the_root_or_inside_an_index_is_refused(built, capsys):
    code, err = run(["index", CORPUS, "-o", "/", *FAST], capsys)
    assert code == 2 and "root of the file system" in err, err
    code, err = run(["index", CORPUS, "-o", built / "idx" / "sub", *FAST], capsys)
    assert code == 2 and "inside the index directory" in err, err
    assert not (built / "idx" / "sub").exists()


def test_a_new_generation_removes_only_what_the_engine_wrote(built, tmp_path, capsys):
    """Files a user left inside an index directory survive a rewrite (only the engine's temporaries, by name,
    and its generations go)."""
    idx = tmp_path / "idx"
    shutil.copytree(built / "idx", idx)
    for name in ("notes.npy", "mine.parquet", ".notes.tmp-9", "gen-000099"):
        (idx / name).write_bytes(b"mine")
    (idx / ".gen-000007.tmp-killed").mkdir()  # what a killed save leaves: the engine's, removed
    assert run(["index", CORPUS, "-o", idx, *FAST], capsys)[0] == 0
    left = {p.name for p in idx.iterdir()}
    assert {"notes.npy", "mine.parquet", ".notes.tmp-9", "gen-000099"} <= left
    assert ".gen-000007.tmp-killed" not in left
    assert all((idx / n).read_bytes() == b"mine" for n in ("notes.npy", "mine.parquet", ".notes.tmp-9", "gen-000099"))
    load_index(idx)


def test_converting_a_flat_index_removes_only_its_listed_files(built, tmp_path):
    """An index written before generations (its files beside a format-3 manifest): the first save removes the
    files that manifest lists, never another .npy or .parquet in the folder."""
    from gpu_tigrag.index.store import generation_folder

    flat = tmp_path / "flat"
    shutil.copytree(generation_folder(built / "idx"), flat)
    (flat / "user.npy").write_bytes(b"mine")
    (flat / "user.parquet").write_bytes(b"mine")
    index = load_index(flat)
    del index  # no reader holds the flat files any more
    save_index(load_index(flat), flat)
    import gc

    gc.collect()
    save_index(load_index(flat), flat)  # a later writer removes what the first one could not
    names = {p.name for p in flat.iterdir()}
    assert {"user.npy", "user.parquet"} <= names and "embeddings.npy" not in names
    assert (flat / "user.npy").read_bytes() == b"mine"


def test_trec_refuses_its_own_input_a_foreign_file_and_index_files(built, tmp_path, capsys):
    run_file = tmp_path / "run.jsonl"
    shutil.copy(built / "run.jsonl", run_file)
    shutil.copy(built / "run.jsonl.meta.json", tmp_path / "run.jsonl.meta.json")
    other = tmp_path / "notes.txt"
    other.write_text("mine")
    before = snapshot(tmp_path)
    idx_before = snapshot(built / "idx")
    for target, words in [(run_file, "also this command's input"), (other, "was not written by gpu_tigrag"),
                          (tmp_path / "run.jsonl.meta.json", "also this command's input"),
                          (built / "idx" / "manifest.json", "inside the index directory"),
                          (built / "idx" / "gen-000001" / "chunks.parquet", "inside the index directory")]:
        code, err = run(["trec", run_file, "-o", target], capsys)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, (target, err)
    assert snapshot(tmp_path) == before and snapshot(built / "idx") == idx_before
    assert run(["trec", run_file, "-o", other, "--force"], capsys)[0] == 0  # --force: a foreign regular file
    assert other.read_text().startswith("q0 Q0 ")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "link"])
def test_trec_never_replaces_a_non_regular_file_even_with_force(built, tmp_path, capsys, kind):
    """`trec -o /dev/full` renamed a temporary over the device node as root."""
    target = tmp_path / "out.trec"
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        if os.geteuid() != 0:
            pytest.skip("creating a device node needs root")
        os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null twin, in the test's own folder
    elif kind == "folder":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "elsewhere")
    mode = os.lstat(target).st_mode
    for extra in ([], ["--force"]):
        code, err = run(["trec", built / "run.jsonl", "-o", target, *extra], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert os.lstat(target).st_mode == mode
    assert not (tmp_path / "elsewhere").exists()


def test_an_atomic_write_never_renames_over_a_device_or_fifo(tmp_path):
    from gpu_tigrag.atomic import atomic_write_text

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(TigragError, match="is a FIFO"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and [p.name for p in tmp_path.iterdir()] == ["fifo"]


def test_a_cache_folder_of_someone_elses_files_is_never_replaced(tmp_path):
    """atomic_directory with the writer's manifest name: a folder without it (someone else's files) is refused and
    left as it was; one that holds it (an earlier copy of the writer's) or nothing is replaced."""
    from gpu_tigrag.atomic import atomic_directory

    theirs = tmp_path / "cache"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep me")
    with pytest.raises(TigragError, match="holds files this writer did not write"):
        with atomic_directory(theirs, replaceable_if="manifest.json") as tmp:
            (tmp / "manifest.json").write_text("{}")
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"] and (theirs / "notes.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["cache"]  # the temporary folder is gone
    (theirs / "manifest.json").write_text("{}")  # now an earlier copy of the writer's: replaced
    with atomic_directory(theirs, replaceable_if="manifest.json") as tmp:
        (tmp / "manifest.json").write_text('{"new": 1}')
    assert sorted(p.name for p in theirs.iterdir()) == ["manifest.json"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_directory(empty, replaceable_if="manifest.json") as tmp:
        (tmp / "manifest.json").write_text("{}")
    assert (empty / "manifest.json").is_file()


def test_trec_rewrites_its_own_output_but_not_an_edited_one(built, tmp_path, capsys):
    out = tmp_path / "run.trec"
    assert run(["trec", built / "run.jsonl", "-o", out], capsys)[0] == 0
    record = json.loads((tmp_path / "run.trec.meta.json").read_text())
    assert record["kind"] == "a TREC run" and record["complete"] and record["queries"] == len(QUESTIONS)
    assert run(["trec", built / "run.jsonl", "-o", out], capsys)[0] == 0  # its own, unchanged: replaced
    out.write_text(out.read_text() + "my own line\n")
    code, err = run(["trec", built / "run.jsonl", "-o", out], capsys)
    assert code == 2 and "changed since" in err, err
    assert out.read_text().endswith("my own line\n")


def _partial_run(built, tmp_path, keep_lines: int, torn: bool = False):
    results = tmp_path / "part.jsonl"
    lines = (built / "run.jsonl").read_bytes().splitlines(keepends=True)
    results.write_bytes(b"".join(lines[:keep_lines]) + (lines[keep_lines][:20] if torn else b""))
    shutil.copy(built / "run.jsonl.meta.json", tmp_path / "part.jsonl.meta.json")
    return results


@pytest.mark.parametrize("torn", [False, True])
def test_trec_refuses_a_killed_run_unless_partial(built, tmp_path, capsys, torn):
    results = _partial_run(built, tmp_path, 4, torn)
    out = tmp_path / "part.trec"
    code, err = run(["trec", results, "-o", out], capsys)
    assert code == 2 and ("holds 4 of the 15 queries" in err or "cut short" in err), err
    assert not out.exists()
    code, err = run(["trec", results, "-o", out, "--partial"], capsys)
    assert code == 0 and "a partial run: 4 of 15 queries" in err, err
    record = json.loads((tmp_path / "part.trec.meta.json").read_text())
    assert record["complete"] is False and record["queries"] == 4 and record["expected_queries"] == 15


def test_trec_refuses_a_run_still_being_written(built, tmp_path, capsys):
    results = _partial_run(built, tmp_path, len(QUESTIONS))  # every row there, but the writer has not finished
    with writer_lock(results, "a run"):
        code, err = run(["trec", results, "-o", tmp_path / "x.trec"], capsys)
        assert code == 2 and "still being written" in err and f"PID {os.getpid()}" in err, err
        code, err = run(["trec", results, "-o", tmp_path / "x.trec", "--partial"], capsys)
        assert code == 0 and "still being written" in err
    assert json.loads((tmp_path / "x.trec.meta.json").read_text())["complete"] is False


def test_trec_refuses_a_run_whose_record_says_no_count(built, tmp_path, capsys):
    results = tmp_path / "old.jsonl"
    shutil.copy(built / "run.jsonl", results)  # no sidecar: nothing says how many queries it must hold
    code, err = run(["trec", results, "-o", tmp_path / "old.trec"], capsys)
    assert code == 2 and "does not say how many queries" in err, err


def test_a_trec_run_written_by_run_records_what_it_holds(built, tmp_path, capsys):
    out = tmp_path / "direct.trec"
    assert run(["run", built / "idx", built / "q.jsonl", "-o", out, "-k", "2", "-q", "--backend", "numpy"],
               capsys)[0] == 0
    record = json.loads((tmp_path / "direct.trec.meta.json").read_text())
    assert record["complete"] and record["queries"] == len(QUESTIONS) and record["kind"] == "a TREC run"


def test_run_refuses_a_foreign_sidecar(built, tmp_path, capsys):
    sidecar = tmp_path / "out.jsonl.meta.json"
    sidecar.write_text("my notes")
    code, err = run(["run", built / "idx", built / "q.jsonl", "-o", tmp_path / "out.jsonl", "-q"], capsys)
    assert code == 2 and "is not the run description" in err, err
    assert sidecar.read_text() == "my notes" and not (tmp_path / "out.jsonl").exists()


def test_save_qrels_refuses_the_question_file_and_foreign_files(built, tmp_path, capsys):
    questions = tmp_path / "questions.json"
    shutil.copy(EXAMPLES / "questions.json", questions)
    gold = questions.read_bytes()
    code, err = run(["eval", built / "idx", questions, "--save-qrels", questions, "-q"], capsys)
    assert code == 2 and "also this command's input" in err, err
    assert questions.read_bytes() == gold
    mine = tmp_path / "gold.tsv"
    mine.write_text("mine")
    code, err = run(["eval", built / "idx", questions, "--save-qrels", mine, "-q"], capsys)
    assert code == 2 and "--force" in err and mine.read_text() == "mine", err
    assert run(["eval", built / "idx", questions, "--save-qrels", tmp_path / "q.tsv", "-q"], capsys)[0] == 0
    assert run(["eval", built / "idx", questions, "--save-qrels", tmp_path / "q.tsv", "-q"], capsys)[0] == 0  # its own


def test_eval_out_and_save_runs_keep_a_users_files(built, tmp_path, capsys):
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.md").write_text("my report")
    (report / "keep.txt").write_text("mine")
    code, err = run(["eval", built / "idx", EXAMPLES / "questions.json", "--systems", "BM25", "--out", report, "-q",
                     "--backend", "numpy"], capsys)
    assert code == 2 and "report.md exists and was not written there by gpu_tigrag" in err, err
    assert (report / "report.md").read_text() == "my report" and not (report / "results.json").exists()
    (report / "report.md").unlink()
    for _ in range(2):  # a second run replaces what the first one wrote
        assert run(["eval", built / "idx", EXAMPLES / "questions.json", "--systems", "BM25", "--out", report, "-q",
                    "--backend", "numpy"], capsys)[0] == 0
    assert (report / "keep.txt").read_text() == "mine"
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "qrels.trec").write_text("mine")
    code, err = run(["eval", built / "idx", EXAMPLES / "questions.json", "--systems", "BM25", "--save-runs", runs,
                     "-q", "--backend", "numpy"], capsys)
    assert code == 2 and "qrels.trec exists" in err and (runs / "qrels.trec").read_text() == "mine", err
    assert run(["eval", built / "idx", EXAMPLES / "questions.json", "--systems", "BM25", "--save-runs", runs, "-q",
                "--backend", "numpy", "--force"], capsys)[0] == 0


def test_report_out_refuses_a_foreign_file(built, tmp_path, capsys):
    report = tmp_path / "r1"
    assert run(["eval", built / "idx", EXAMPLES / "questions.json", "--systems", "BM25", "--out", report, "-q",
                "--backend", "numpy"], capsys)[0] == 0
    table = tmp_path / "table.md"
    table.write_text("mine")
    code, err = run(["report", report, "--out", table], capsys)
    assert code == 2 and table.read_text() == "mine", err
    code, err = run(["report", report, "--out", report / "results.json"], capsys)
    assert code == 2 and "also this command's input" in err, err
    assert run(["report", report, "--out", tmp_path / "new.md"], capsys)[0] == 0


def test_a_streaming_build_keeps_a_users_file_in_its_work_folder(tmp_path, capsys):
    """The work folder is removed file by file (the build's own files), never with what someone put there."""
    from gpu_tigrag.index.stream import _remove_work

    work = tmp_path / "idx.work"
    work.mkdir()
    (work / "part-00000-0123abcd.tokens.npz").write_bytes(b"x")
    (work / "checksums.jsonl").write_bytes(b"x")
    (work / "mine.txt").write_text("mine")
    _remove_work(work)
    assert [p.name for p in work.iterdir()] == ["mine.txt"]
    (work / "mine.txt").unlink()
    (work / "build.json").write_bytes(b"{}")
    _remove_work(work)
    assert not work.exists()


def test_the_vector_cache_never_deletes_or_writes_a_file_it_did_not_make(tmp_path, caplog):
    """A 'damaged' cache file was deleted: one a user named vectors.sqlite3 is set aside instead, and a SQLite
    database of other tables is left as it is (the run goes on without a cache)."""
    import sqlite3

    from gpu_tigrag.encoders import VectorCache

    damaged = tmp_path / "a"
    damaged.mkdir()
    (damaged / "vectors.sqlite3").write_bytes(b"my precious bytes" * 100)
    cache = VectorCache(damaged)
    assert cache.db is not None  # a new cache
    kept = [p for p in damaged.iterdir() if ".damaged-" in p.name]
    assert len(kept) == 1 and kept[0].read_bytes() == b"my precious bytes" * 100
    foreign = tmp_path / "b"
    foreign.mkdir()
    db = sqlite3.connect(foreign / "vectors.sqlite3")
    db.execute("CREATE TABLE accounts (name TEXT)")
    db.execute("INSERT INTO accounts VALUES ('mine')")
    db.commit()
    db.close()
    before = (foreign / "vectors.sqlite3").read_bytes()
    with caplog.at_level("WARNING"):
        cache = VectorCache(foreign)
    assert cache.db is None or not cache.writable
    assert "not a vector cache of gpu_tigrag" in caplog.text
    assert (foreign / "vectors.sqlite3").read_bytes() == before


def test_a_users_file_named_like_a_lock_is_never_truncated_or_removed(built, tmp_path, capsys):
    """The writer lock `OUT.lock` was opened, truncated and at the end removed, whatever it held."""
    mine = tmp_path / "out.jsonl.lock"
    mine.write_text("my notes\n")
    code, err = run(["run", built / "idx", built / "q.jsonl", "-o", tmp_path / "out.jsonl", "-q"], capsys)
    assert code == 2 and "is not a lock file of gpu_tigrag" in err, err
    assert mine.read_text() == "my notes\n" and not (tmp_path / "out.jsonl").exists()
    stale = tmp_path / "other.jsonl.lock"
    stale.write_text("12345\n")  # what a killed holder leaves: taken over
    assert run(["run", built / "idx", built / "q.jsonl", "-o", tmp_path / "other.jsonl", "-q"], capsys)[0] == 0


@pytest.mark.parametrize("kind", ["file", "folder of other files"])
def test_a_streaming_build_refuses_a_work_path_it_did_not_make(tmp_path, capsys, kind):
    work = tmp_path / "idx.work"
    if kind == "file":
        work.write_text("mine")
    else:
        work.mkdir()
        (work / "notes.txt").write_text("mine")
    before = snapshot(tmp_path)
    code, err = run(["index", CORPUS, "-o", tmp_path / "idx", "--stream", "--workers", "1", *FAST], capsys)
    assert code == 2 and ("is not a folder" in err or "did not write (notes.txt)" in err), err
    assert snapshot(tmp_path) == before


def test_an_index_a_load_would_refuse_is_never_written(tmp_path):
    """Values are checked by meaning before a write too (issue 30): an encoder whose vectors are not of unit
    length gives an index every later load would refuse, so the save refuses it and writes nothing."""
    from gpu_tigrag.config import IndexConfig, replace_path
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.encoders import HashingEncoder
    from gpu_tigrag.index.build import build_index

    class Unnormalised(HashingEncoder):
        def encode(self, texts, show_progress=False, kind="passage"):
            return super().encode(texts, show_progress, kind) * 2.0

    config = replace_path(IndexConfig(), "entities.model", "capitalized")
    index = build_index(load_corpus([CORPUS]), config, encoder=Unnormalised(64))
    with pytest.raises(TigragError, match="refusing to write an index that a load would refuse: .*embeddings.npy: "
                                          ".* not of unit length"):
        save_index(index, tmp_path / "idx")
    assert list(tmp_path.iterdir()) == []  # no index, no temporary, no lock left


def test_the_api_writers_follow_the_rule_too(tmp_path):
    """write_qrels and write_trec_run, called from Python, refuse a foreign file (force=True allows it) and
    record what they wrote, so a second call replaces it."""
    from gpu_tigrag.evaluate.queries import Query
    from gpu_tigrag.evaluate.runfiles import write_qrels, write_trec_run

    mine = tmp_path / "mine.trec"
    mine.write_text("mine")
    queries = [Query("q1", "film", ("Korvath",))]
    for write in (lambda p, **kw: write_qrels(p, queries, **kw),
                  lambda p, **kw: write_trec_run(p, ["q1"], [[("Korvath", 1.0)]], "t", **kw)):
        with pytest.raises(TigragError, match="was not written by gpu_tigrag"):
            write(mine)
        assert mine.read_text() == "mine"
        out = tmp_path / "out.trec"
        write(out)
        write(out)  # its own: replaced
        out.unlink()
        (tmp_path / "out.trec.meta.json").unlink()
    write_qrels(mine, queries, force=True)
    assert mine.read_text().startswith("q1 0 Korvath")


@pytest.mark.parametrize("resume", [False, True])
def test_a_run_onto_a_fifo_is_refused_not_read(built, tmp_path, capsys, resume):
    """`run -o FIFO --resume` read the FIFO to check its rows and hung; a FIFO is never an output."""
    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    code, err = run(["run", built / "idx", built / "q.jsonl", "-o", fifo, "-q", *(["--resume"] if resume else [])],
                    capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_query_file_that_is_a_pipe_is_one_clear_line(built, tmp_path, capsys):
    fifo = tmp_path / "q.jsonl"
    os.mkfifo(fifo)
    code, err = run(["run", built / "idx", fifo, "-o", tmp_path / "out.jsonl", "-q"], capsys)
    assert code == 2 and "not a regular file (a pipe, FIFO or device)" in err, err


def test_datasets_fetch_into_a_file_is_refused(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    code, err = run(["datasets", "fetch", "scifact", "--to", blocker], capsys)
    assert code == 2 and "exists and is not a folder" in err and blocker.read_text() == "mine", err


def test_a_foreign_json_file_named_like_a_sidecar_is_never_replaced(built, tmp_path, capsys):
    sidecar = tmp_path / "new.trec.meta.json"
    sidecar.write_text('{"my": "settings"}')
    code, err = run(["trec", built / "run.jsonl", "-o", tmp_path / "new.trec"], capsys)
    assert code == 2 and "is not a record gpu_tigrag wrote" in err, err
    assert sidecar.read_text() == '{"my": "settings"}' and not (tmp_path / "new.trec").exists()
