"""Writers that trust only what they can show is theirs: `run --resume` of a Parquet folder, a streaming
build's `.work` folder, an index written into an empty folder, read-only outputs (writer audit A-D).
Each test fails on the code before its fix."""

import json
import os
import stat

import pytest

from helpers import EXAMPLES, QUESTIONS
from gpu_tigrag.cli import main
from gpu_tigrag.errors import OutputError

pytestmark = [pytest.mark.reliability]

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
CORPUS = EXAMPLES / "corpus.json"


def run(args, capsys):
    """Exit code and stderr of the CLI; an error is one line, never a traceback."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code:
        assert len(err.strip().splitlines()) == 1, err
    return code, err


def snapshot(folder):
    """Every entry under `folder` with its bytes (files) or link target: what a refused write must leave."""
    def entry(p):
        return os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None

    return {str(p.relative_to(folder)): entry(p) for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def queries(tmp_path_factory):
    path = tmp_path_factory.mktemp("owned") / "q.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS)))
    return path


def run_parquet(example_index, queries, out, capsys, *extra):
    return run(["run", example_index.path, queries, "-o", out, "-k", "3", "-q", "--backend", "numpy", *extra], capsys)


# ---- A. run --resume of a Parquet folder ------------------------------------------------------------

def test_a_parquet_resume_into_someone_elses_folder_is_refused(example_index, queries, tmp_path, capsys):
    """A folder without the run's sidecar lost its `part-*.tmp` files (and a folder so named crashed the run)."""
    out = tmp_path / "out.parquet"
    (out / "part-sub.tmp").mkdir(parents=True)
    (out / "part-sub.tmp" / "inner.txt").write_text("inner")
    (out / "part-notes.tmp").write_text("my notes")
    (out / "part-000001.tmp").write_text("named like an old part temporary")
    (out / "mine.txt").write_text("keep")
    before = snapshot(tmp_path)
    code, err = run_parquet(example_index, queries, out, capsys, "--resume")
    assert code == 2 and "has no out.parquet.meta.json" in err, err
    assert snapshot(tmp_path) == before
    empty = tmp_path / "empty.parquet"
    empty.mkdir()  # an empty folder is a fresh start
    assert run_parquet(example_index, queries, empty, capsys, "--resume")[0] == 0
    assert list(empty.glob("part-*.parquet")) and (tmp_path / "empty.parquet.meta.json").is_file()


def test_a_parquet_resume_trims_only_its_own_temporaries(example_index, queries, tmp_path, capsys):
    """Trim removes the exact names a killed part write leaves, regular files only: a user's `part-notes.tmp`,
    a folder and a link named like a temporary stay (and what the link points to)."""
    out = tmp_path / "out.parquet"
    assert run_parquet(example_index, queries, out, capsys)[0] == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "part-notes.tmp").write_text("my notes")
    (out / "part-000007.tmp").mkdir()
    (out / "part-000008.tmp").symlink_to(victim)
    (out / "part-000009.tmp").write_bytes(b"half a part")  # an earlier version's temporary: removed
    (out / f".part-{len(list(out.glob('part-*.parquet'))):06d}.parquet.tmp-x").write_bytes(b"killed")  # removed
    code, err = run_parquet(example_index, queries, out, capsys, "--resume")
    assert code == 0, err
    names = sorted(p.name for p in out.iterdir() if not p.name.endswith(".parquet"))
    assert names == ["part-000007.tmp", "part-000008.tmp", "part-notes.tmp"], names
    assert (out / "part-notes.tmp").read_text() == "my notes" and victim.read_text() == "precious"


# ---- B. a streaming build's work folder --------------------------------------------------------------

@pytest.mark.parametrize("plant", ["foreign build.json", "ledger only", "damaged build.json", "linked build.json"])
def test_a_work_folder_without_a_builds_description_is_refused(tmp_path, capsys, plant):
    """Files named build.json / checksums.jsonl were overwritten and deleted, and the folder removed."""
    work = tmp_path / "idx.work"
    work.mkdir()
    if plant == "foreign build.json":
        (work / "build.json").write_text('{"my": 1}')
        (work / "checksums.jsonl").write_text("x")
    elif plant == "ledger only":
        (work / "checksums.jsonl").write_text("x")
    elif plant == "damaged build.json":
        (work / "build.json").write_text('{"config": ')
    else:
        (tmp_path / "elsewhere.json").write_text(json.dumps({"checkpoints": 2, "config": {}, "inputs": []}))
        (work / "build.json").symlink_to(tmp_path / "elsewhere.json")
    before = snapshot(tmp_path)
    code, err = run(["index", CORPUS, "-o", tmp_path / "idx", "--stream", "--workers", "1", *FAST], capsys)
    assert code == 2 and f"{work}: not the work folder of a streaming build" in err, err
    assert snapshot(tmp_path) == before
    for entry in work.iterdir():  # emptied, the folder is used (and removed with the build's files)
        entry.unlink()
    assert run(["index", CORPUS, "-o", tmp_path / "idx", "--stream", "--workers", "1", *FAST], capsys)[0] == 0
    assert (tmp_path / "idx" / "manifest.json").is_file() and not work.exists()


# ---- C. a folder replaced by a new one ----------------------------------------------------------------

def test_a_file_arriving_in_an_empty_index_folder_during_the_write_is_kept(example_index, tmp_path, monkeypatch):
    """`index -o EMPTY`: the folder was checked empty, then moved aside and deleted with whatever arrived."""
    import gpu_tigrag.index.store as store
    from gpu_tigrag.index.store import save_index

    out = tmp_path / "out"
    out.mkdir()
    real = store._write_generation

    def meanwhile(index, folder, index_dir):
        (out / "arrived-meanwhile.txt").write_text("USER DATA")
        return real(index, folder, index_dir)

    monkeypatch.setattr(store, "_write_generation", meanwhile)
    with pytest.raises(OutputError, match=f"{out}: files arrived in it while it was being written"):
        save_index(example_index.index, out)
    assert [p.name for p in out.iterdir()] == ["arrived-meanwhile.txt"]
    assert (out / "arrived-meanwhile.txt").read_text() == "USER DATA"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary or old folder left


def test_a_cache_folder_gets_no_rmtree_of_files_it_did_not_check(tmp_path, monkeypatch):
    """atomic_directory(replaceable_if=...): an empty folder that a file reaches after the check is not
    moved aside and deleted; one holding the writer's manifest is still replaced."""
    import gpu_tigrag.atomic as atomic

    cache = tmp_path / "cache"
    cache.mkdir()
    real = os.rename

    def arriving_first(src, dst):  # the file lands between the check and the first rename
        if not (cache / "notes.txt").exists():
            (cache / "notes.txt").write_text("keep me")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "rename", arriving_first)
    with pytest.raises(OutputError, match="files arrived"):
        with atomic.atomic_directory(cache, replaceable_if="manifest.json") as tmp:
            (tmp / "manifest.json").write_text("{}")
    monkeypatch.undo()
    assert [p.name for p in cache.iterdir()] == ["notes.txt"] and sorted(p.name for p in tmp_path.iterdir()) == ["cache"]
    (cache / "notes.txt").unlink()
    (cache / "manifest.json").write_text("{}")
    with atomic.atomic_directory(cache, replaceable_if="manifest.json") as tmp:
        (tmp / "manifest.json").write_text('{"new": 1}')
    assert (cache / "manifest.json").read_text() == '{"new": 1}'


# ---- D. read-only outputs -----------------------------------------------------------------------------

def read_only(path):
    path.chmod(0o444)  # tests run as root: the refusal must come from the mode bits, not from a failed open
    return path.read_bytes()


def test_trec_refuses_a_read_only_output_it_wrote_unless_forced(example_index, queries, tmp_path, capsys):
    results = tmp_path / "run.jsonl"
    assert run(["run", example_index.path, queries, "-o", results, "-k", "3", "-q", "--backend", "numpy"],
               capsys)[0] == 0
    out = tmp_path / "out.trec"
    assert run(["trec", results, "-o", out], capsys)[0] == 0
    kept = read_only(out)
    code, err = run(["trec", results, "-o", out], capsys)
    assert code == 2 and f"{out} exists and is read-only (mode 0444)" in err and "--force" in err, err
    assert out.read_bytes() == kept and stat.S_IMODE(out.stat().st_mode) == 0o444
    assert run(["trec", results, "-o", out, "--force"], capsys)[0] == 0


def test_eval_out_refuses_a_read_only_file_it_wrote(example_index, tmp_path, capsys):
    report = tmp_path / "report"
    args = ["eval", example_index.path, EXAMPLES / "questions.json", "--systems", "BM25", "--out", report, "-q",
            "--backend", "numpy"]
    assert run(args, capsys)[0] == 0
    kept = read_only(report / "results.json")
    code, err = run(args, capsys)
    assert code == 2 and "results.json exists and is read-only" in err, err
    assert (report / "results.json").read_bytes() == kept
    assert run([*args, "--force"], capsys)[0] == 0
