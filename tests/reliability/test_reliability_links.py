"""Nothing follows a planted link (issue 23): a symbolic link planted at a path the engine writes (a
lock, a temporary, the generation folders and pointer of an index, a streaming build's work folder
and ledger, `run -o` outputs and their sidecars, `--save-runs` and `--out` files, the vector cache's
files), pointing to a file outside or to nothing, never has its target written or created: the
command works (the link is replaced or removed) or refuses in one clear line."""

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from helpers import EXAMPLES, QUESTIONS
from gpu_tigrag.cli import main
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.checkpoints import Ledger
from gpu_tigrag.index.store import load_index, read_manifest

pytestmark = [pytest.mark.reliability]

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
OLD = 1_000_000_000  # the victim's mtime (2001): a write would change it


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """An index of the example corpus with SpectRAG's stage, and a query file."""
    folder = tmp_path_factory.mktemp("links")
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(folder / "idx"), "-q", *FAST,
                 "--methods", "tigrag,spectrag"]) == 0
    queries = folder / "q.jsonl"
    queries.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS[:3])))
    return folder / "idx", queries


@pytest.fixture
def world(tmp_path, built):
    """`work/` (a copy of the index and the queries) and `outside/` (a victim file and folder)."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    shutil.copytree(built[0], work / "idx")
    shutil.copy(built[1], work / "q.jsonl")
    (outside / "folder").mkdir(parents=True)
    for victim in (outside / "victim.txt", outside / "folder" / "kept.txt"):
        victim.write_text("precious\n")
        os.utime(victim, (OLD, OLD))
    os.utime(outside / "folder", (OLD, OLD))
    return work, outside


def state(outside: Path) -> dict:
    """Every path under `outside` with its bytes (files) and mtime."""
    return {str(p): (p.read_bytes() if p.is_file() else None, p.stat().st_mtime_ns) for p in sorted(outside.rglob("*"))}


def plant(path: Path, outside: Path, kind: str) -> None:
    """A link at `path` (replacing the file there) to the victim file, the victim folder or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() or path.is_symlink():
        path.unlink()
    target = {"file": outside / "victim.txt", "folder": outside / "folder", "dangling": outside / "ghost" / "made"}
    path.symlink_to(target[kind])


def run(args, capsys):
    code = main(args)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


#: (where the link is planted, relative to work/; the command; what happens: "works" or an error's words)
INDEX_CASES = {
    "index lock": ("idx.lock", ["add", "{idx}", "{extra}", "-q"], "the lock of .* must be a regular file"),
    "index pointer": ("idx/manifest.json", ["add", "{idx}", "{extra}", "-q"], "manifest.json: a symbolic link"),
    "next generation": ("idx/gen-000002", ["add", "{idx}", "{extra}", "-q"], "works"),
    "generation temporary": ("idx/.gen-000002.tmp-planted", ["extend", "{idx}", "--methods", "spectrag", "-q"],
                             "works"),
    "pointer temporary": ("idx/.manifest.json.tmp-planted", ["extend", "{idx}", "--methods", "spectrag", "-q"],
                          "works"),
    "index folder temporary": (".idx.tmp-planted", ["index", "{corpus}", "-o", "{idx}", "-q", *FAST], "works"),
    "stream work folder": ("idx.work", ["index", "{corpus}", "-o", "{idx}", "-q", *FAST, "--stream", "--workers", "1"],
                           "idx.work: a symbolic link"),
    "new index folder": ("new", ["index", "{corpus}", "-o", "{new}", "-q", *FAST], "symbolic link to nothing|exists"),
}


@pytest.mark.parametrize("kind", ["file", "dangling"])
@pytest.mark.parametrize("case", list(INDEX_CASES))
def test_index_writers_never_follow_a_planted_link(world, capsys, case, kind):
    work, outside = world
    where, command, expected = INDEX_CASES[case]
    plant(work / where, outside, kind)
    extra = work / "extra.json"
    extra.write_text(json.dumps([{"title": "Zebrine Quay", "text": "Zebrine Quay is a pier near Korvath."}]))
    before = state(outside)
    names = {"idx": work / "idx", "extra": extra, "corpus": EXAMPLES / "corpus.json", "new": work / "new"}
    code, err = run([a.format(**names) for a in command], capsys)
    assert state(outside) == before and not (outside / "ghost").exists()
    if expected == "works":
        assert code == 0, err
        assert not (work / where).is_symlink() or where.startswith(".idx.tmp")  # replaced or removed
        load_index(work / "idx")
    else:  # a usage error (2), or a damaged index (3) when a reader finds the pointer replaced by a link
        assert code in (2, 3) and len(err.strip().splitlines()) == 1, err
        assert re.search(expected, err), err


RUN = ["run", "{idx}", "{queries}", "-o", "{out}", "-k", "2", "-q", "--backend", "numpy"]
RUN_CASES = {
    "jsonl output": ("out.jsonl", "out.jsonl", [], "out.jsonl: a symbolic link"),
    "trec output": ("out.trec", "out.trec", [], "out.trec: a symbolic link"),
    "output lock": ("out.jsonl.lock", "out.jsonl", [], "the lock of .* must be a regular file"),
    "output sidecar": ("out.jsonl.meta.json", "out.jsonl", [], "out.jsonl.meta.json: exists and is not the run "
                                                               "description"),
    "parquet folder": ("out.parquet", "out.parquet", [], "out.parquet: a symbolic link"),
    "resumed output": ("out.jsonl", "out.jsonl", ["--resume"], "out.jsonl: a symbolic link"),
    "distributed output": ("out.jsonl", "out.jsonl", ["--workers", "1"], "out.jsonl: a symbolic link"),
}


@pytest.mark.parametrize("kind", ["file", "dangling"])
@pytest.mark.parametrize("case", list(RUN_CASES))
def test_run_outputs_never_follow_a_planted_link(world, capsys, case, kind):
    work, outside = world
    where, out, more, expected = RUN_CASES[case]
    plant(work / where, outside, kind)
    before = state(outside)
    names = {"idx": work / "idx", "queries": work / "q.jsonl", "out": work / out}
    code, err = run([a.format(**names) for a in RUN] + more, capsys)
    assert state(outside) == before and not (outside / "ghost").exists()
    if expected == "works":
        assert code == 0, err
        assert not (work / where).is_symlink() and (work / where).is_file()
    else:
        assert code == 2 and len(err.strip().splitlines()) == 1 and re.search(expected, err), err


@pytest.mark.parametrize("kind", ["file", "dangling"])
def test_a_resume_refuses_a_parquet_part_that_is_a_link(world, capsys, kind):
    work, outside = world
    command = [a.format(idx=work / "idx", queries=work / "q.jsonl", out=work / "out.parquet") for a in RUN]
    assert run(command + ["--set", "batch_size=1"], capsys)[0] == 0
    part = work / "out.parquet" / "part-000002.parquet"
    plant(part, outside, kind)  # the last part as a kill before its rename leaves it, then a link planted
    before = state(outside)
    code, err = run(command + ["--set", "batch_size=1", "--resume"], capsys)
    assert code == 2 and "part-000002.parquet: a symbolic link, not a result part" in err, err
    assert state(outside) == before and not (outside / "ghost").exists()


def test_a_link_at_a_run_output_folder_is_refused(world, capsys):
    work, outside = world
    plant(work / "out.parquet", outside, "folder")
    before = state(outside)
    code, err = run([a.format(idx=work / "idx", queries=work / "q.jsonl", out=work / "out.parquet") for a in RUN],
                    capsys)
    assert code == 2 and "a symbolic link" in err and state(outside) == before


@pytest.mark.parametrize("kind", ["file", "dangling"])
@pytest.mark.parametrize("where", ["runs/TIGRAG.trec", "runs/qrels.tsv", "gold.tsv", "report/results.json",
                                   "report/report.md"])
def test_evaluation_files_refuse_a_planted_link(world, capsys, kind, where):
    """A link at a --save-runs, --save-qrels or --out file is neither followed nor replaced (issue 30: never
    replace what the engine did not write): one clear line before any work, the link left as it was."""
    work, outside = world
    plant(work / where, outside, kind)
    before = state(outside)
    code, err = run(["eval", str(work / "idx"), str(EXAMPLES / "questions.json"), "-q", "--backend", "numpy",
                     "--systems", "TIGRAG", "--save-runs", str(work / "runs"), "--save-qrels", str(work / "gold.tsv"),
                     "--out", str(work / "report")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is a symbolic link" in err, err
    assert state(outside) == before and not (outside / "ghost").exists()
    assert (work / where).is_symlink()
    assert not (work / "gold.tsv").is_file() or where == "gold.tsv"


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
@pytest.mark.parametrize("kind", ["file", "dangling"])
def test_a_planted_link_in_the_vector_cache_is_never_opened(world, capsys, caplog, suffix, kind):
    """The run goes on without the cache (warned once): SQLite would write where the link points."""
    work, outside = world
    plant(work / "cache" / f"vectors.sqlite3{suffix}", outside, kind)
    before = state(outside)
    code, err = run(["query", str(work / "idx"), QUESTIONS[0], "-k", "2", "--backend", "numpy", "--vector-cache",
                     str(work / "cache")], capsys)
    assert code == 0, err
    assert "a symbolic link, not a file of the vector cache; going on without the cache" in caplog.text
    assert state(outside) == before and not (outside / "ghost").exists()


def test_a_planted_ledger_link_in_a_streaming_build_is_never_followed(world):
    work, outside = world
    (work / "idx.work").mkdir()
    plant(work / "idx.work" / "checksums.jsonl", outside, "file")
    checkpoint = work / "idx.work" / "part-00000-x.embed.npy"
    checkpoint.write_bytes(b"x")
    before = state(outside)
    with pytest.raises(TigragError, match="checksums.jsonl: a symbolic link, not the build's ledger"):
        Ledger(work / "idx.work").record(checkpoint)
    planted_dir = work / "idx.work" / "part-00001-y.tokens.npz"
    plant(planted_dir, outside, "folder")
    (work / "idx.work" / "checksums.jsonl").unlink()
    Ledger(work / "idx.work").validate()  # an unlisted entry is removed: the link, never what it points to
    assert not planted_dir.is_symlink() and state(outside) == before


def test_a_link_to_an_index_folder_is_followed_as_the_user_asked(world, capsys):
    """The index path itself may be a link to a folder that holds an index (an index kept on another
    disk): it is written where it points; a link to nothing is refused (above)."""
    work, _ = world
    (work / "alias").symlink_to(work / "idx")
    extra = work / "extra.json"
    extra.write_text(json.dumps([{"title": "Zebrine Quay", "text": "Zebrine Quay is a pier near Korvath."}]))
    code, err = run(["add", str(work / "alias"), str(extra), "-q"], capsys)
    assert code == 0, err
    assert (work / "alias").is_symlink() and read_manifest(work / "idx")["counts"]["passages"] == 31


@pytest.mark.parametrize("kind", ["file", "dangling"])
def test_a_stage_file_carried_to_a_new_generation_is_never_followed(world, capsys, kind):
    """A link planted at a stage file that a new generation carries over unread (SpectRAG's coordinates, when
    `extend` adds only an ANN) is not copied as a link nor followed: the victim keeps its bytes and its write
    bits, the new generation lacks the file, and reading the stage says so in one line."""
    work, outside = world
    (coords,) = (work / "idx").glob("gen-*/spectrag_coords.npy")
    coords.parent.chmod(0o755)
    plant(coords, outside, kind)
    before, mode = state(outside), (outside / "victim.txt").stat().st_mode
    code, err = run(["extend", str(work / "idx"), "--ann", "--set", "ann.kind=none", "-q"], capsys)
    assert code == 0, err
    assert state(outside) == before and (outside / "victim.txt").stat().st_mode == mode
    assert not (outside / "ghost").exists()
    carried = [p for p in (work / "idx").glob("gen-*/spectrag_coords.npy") if p.parent != coords.parent]
    assert carried == []
    code, err = run(["query", str(work / "idx"), "Who directed Winter Tide?", "--method", "spectrag", "-q",
                     "--backend", "numpy"], capsys)
    assert code in (2, 3) and len(err.strip().splitlines()) == 1 and "spectrag_coords.npy: missing" in err, err
