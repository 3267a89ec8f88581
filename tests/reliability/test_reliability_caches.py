"""Caches and API writers never lose a file they did not write: SQLite's journal names beside no vector
cache, a vector cache inside an index, `write_corpus` and `PrecomputedEncoder.save` onto a stranger's file,
a link or a FIFO, and a planted numba cache folder in the shared temporary directory."""

import os
import sqlite3
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers import QUESTIONS, ROOT
from gpu_tigrag.cli import main
from gpu_tigrag.encoders import CachingEncoder, HashingEncoder, PrecomputedEncoder, VectorCache
from gpu_tigrag.errors import TigragError
from gpu_tigrag.synth import passages, write_corpus

pytestmark = [pytest.mark.reliability]


def files_of(folder):
    """Every file under `folder` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def query(index, cache, capsys):
    code = main(["query", str(index), QUESTIONS[0], "-k", "2", "--backend", "numpy", "--vector-cache", str(cache)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# ---- A. SQLite never deletes or replays a file it did not write -------------------------------------------

@pytest.mark.parametrize("suffix", ["-journal", "-wal", "-shm"])
@pytest.mark.parametrize("main_file", ["absent", "empty"])
def test_a_stray_journal_beside_no_cache_is_kept(tmp_path, caplog, suffix, main_file):
    """SQLite deleted a -journal, -wal or -shm beside a missing or empty database as its own stale file: it
    is renamed aside (warned), never deleted, and a new cache starts."""
    (tmp_path / f"vectors.sqlite3{suffix}").write_text("my notes\n")
    if main_file == "empty":
        (tmp_path / "vectors.sqlite3").touch()
    with caplog.at_level("WARNING"):
        cache = VectorCache(tmp_path)
        CachingEncoder(HashingEncoder(16), cache).encode(["alpha"])
    kept = [p for p in tmp_path.iterdir() if ".foreign-" in p.name]
    assert len(kept) == 1 and kept[0].name.endswith(suffix) and kept[0].read_text() == "my notes\n"
    assert "not SQLite's" in caplog.text and cache.entries() == 1


def test_the_cli_keeps_a_stray_journal_in_the_cache_folder(example_index, tmp_path, capsys):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "vectors.sqlite3-journal").write_text("my notes\n")
    code, err = query(example_index.path, cache, capsys)
    assert code == 0, err
    assert "my notes\n".encode() in files_of(cache).values()


def test_a_damaged_file_and_its_journal_are_set_aside_together(tmp_path):
    """A file that is no SQLite database, with a -journal beside it: SQLite replayed the journal into the file
    and deleted it; both are now kept under the .damaged- name."""
    (tmp_path / "vectors.sqlite3").write_bytes(b"my precious bytes" * 100)
    (tmp_path / "vectors.sqlite3-journal").write_text("my notes\n")
    cache = VectorCache(tmp_path)
    assert cache.db is not None and cache.writable
    kept = {p.name.rsplit("-", 1)[-1] if p.name.endswith("journal") else "main": p.read_bytes()
            for p in tmp_path.iterdir() if ".damaged-" in p.name}
    assert kept == {"main": b"my precious bytes" * 100, "journal": b"my notes\n"}


def test_a_foreign_database_and_its_journal_are_left_alone(tmp_path, caplog):
    """A SQLite database of other tables is read without touching its journal (SQLite deleted it as invalid)."""
    db = sqlite3.connect(tmp_path / "vectors.sqlite3")
    db.execute("CREATE TABLE accounts (name TEXT)")
    db.commit()
    db.close()
    (tmp_path / "vectors.sqlite3-journal").write_text("my notes\n")
    before = files_of(tmp_path)
    with caplog.at_level("WARNING"):
        cache = VectorCache(tmp_path)
    assert cache.db is None and "not a vector cache of gpu_tigrag" in caplog.text
    assert files_of(tmp_path) == before


CRASH = """
import os, sys
from gpu_tigrag.encoders import CachingEncoder, HashingEncoder, VectorCache
CachingEncoder(HashingEncoder(16), VectorCache(sys.argv[1])).encode([f"text {i}" for i in range(50)])
os._exit(0)  # killed: the WAL is never checkpointed nor removed
"""


def test_sqlite_recovers_the_wal_of_a_crashed_cache_of_ours(tmp_path):
    """Beside a cache of ours, a -wal is SQLite's own: left for it to recover, never set aside."""
    subprocess.run([sys.executable, "-c", CRASH, str(tmp_path)], check=True, cwd=ROOT)
    assert (tmp_path / "vectors.sqlite3-wal").stat().st_size > 0
    cache = VectorCache(tmp_path)
    assert cache.entries() == 50 and not [p for p in tmp_path.iterdir() if ".foreign-" in p.name]


# ---- B. never inside an index ------------------------------------------------------------------------------

@pytest.mark.parametrize("where", ["", "gen-000001"])
def test_the_cli_refuses_a_vector_cache_inside_an_index(example_index, tmp_path, capsys, where):
    index = example_index.copy_to(tmp_path / "idx")
    before = files_of(index)
    code, err = query(index, index / where, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "is inside the index directory" in err, err
    assert "--vector-cache" in err and files_of(index) == before


def test_the_api_refuses_a_vector_cache_inside_an_index(example_index, tmp_path):
    index = example_index.copy_to(tmp_path / "idx")
    before = files_of(index)
    with pytest.raises(TigragError, match="vector cache: .* is inside the index directory"):
        VectorCache(index / "gen-000001" / "vectors")
    assert files_of(index) == before


# ---- C. the API writers: write_corpus, PrecomputedEncoder.save ------------------------------------------------

def save_vectors(path, **options):
    PrecomputedEncoder.record(HashingEncoder(16), ["a", "b"]).save(path, **options)


WRITERS = {
    "corpus.jsonl": lambda path, **options: write_corpus(path, passages(3, seed=1), **options),
    "corpus.parquet": lambda path, **options: write_corpus(path, passages(3, seed=1), **options),
    "vectors.npz": save_vectors,
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_an_api_writer_replaces_an_existing_file_only_with_force(tmp_path, name):
    write = WRITERS[name]
    target = tmp_path / name
    target.write_text("USER DATA\n")
    with pytest.raises(TigragError, match="exists; refusing to overwrite it .*force=True"):
        write(target)
    assert target.read_text() == "USER DATA\n" and os.listdir(tmp_path) == [name]
    write(target, force=True)
    assert target.read_bytes() != b"USER DATA\n" and os.listdir(tmp_path) == [name]  # no temporary left


@pytest.mark.parametrize("name", list(WRITERS))
def test_an_api_writer_never_writes_through_a_link(tmp_path, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("USER DATA\n")
    (tmp_path / name).symlink_to(victim)
    with pytest.raises(TigragError, match="is a symbolic link"):
        WRITERS[name](tmp_path / name, force=True)
    assert victim.read_text() == "USER DATA\n" and (tmp_path / name).is_symlink()


@pytest.mark.parametrize("name", list(WRITERS))
def test_an_api_writer_refuses_a_fifo_without_hanging(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    errors = []
    worker = threading.Thread(target=lambda: errors.append(pytest.raises(TigragError, WRITERS[name], fifo,
                                                                         force=True)), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():  # blocked opening the FIFO for writing: open its reading end to let it go
        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    assert not worker.is_alive() and errors and "is a FIFO" in str(errors[0].value)


def test_precomputed_vectors_still_gain_their_suffix_and_load(tmp_path):
    save_vectors(tmp_path / "vectors")
    loaded = PrecomputedEncoder.load(tmp_path / "vectors.npz")
    np.testing.assert_array_equal(loaded.encode(["a"]), HashingEncoder(16).encode(["a"]))


# ---- D. the numba cache folder of the temporary directory -----------------------------------------------------

@pytest.fixture
def only_the_private_place(tmp_path, monkeypatch):
    """A kernel package, with neither it nor the home cache writable: the private folder is the one place."""
    import numba.core.config

    from gpu_tigrag.numba_cache import CHOSEN_ENV

    package = tmp_path / "package"
    package.mkdir()
    (package / "one.py").write_text("X = 1\n")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv(CHOSEN_ENV, raising=False)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "tmp"))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", numba.core.config.CACHE_DIR)
    (tmp_path / "tmp").mkdir()
    return package


def stale_folder(folder):
    """A folder named like a stale numba cache (removed as stale where the cache is ours)."""
    stale = folder / ("numba-" + "a" * 16)
    stale.mkdir(parents=True)
    (stale / "f.nbi").write_text("theirs")
    for path in (stale / "f.nbi", stale):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    return stale


@pytest.mark.parametrize("planted", ["link", "open to others", "another user's"])
def test_a_planted_private_numba_folder_is_never_used(only_the_private_place, tmp_path, monkeypatch, caplog,
                                                      planted):
    from gpu_tigrag.numba_cache import ensure_numba_cache

    if planted == "another user's":  # this process plays another user: the folder is not its own
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    private = tmp_path / "tmp" / f"gpu_tigrag-numba-{os.getuid()}"
    theirs = tmp_path / "theirs"
    stale = stale_folder(theirs)
    if planted == "link":
        private.symlink_to(theirs)
    else:
        private.mkdir(mode=0o700)
        stale = stale_folder(private)
        if planted == "open to others":
            private.chmod(0o777)
    before = files_of(tmp_path / "tmp") | files_of(theirs)
    with caplog.at_level("WARNING"):
        assert ensure_numba_cache(only_the_private_place) is None
    assert "not a private folder of this user" in caplog.text and os.environ.get("NUMBA_CACHE_DIR") is None
    assert stale.is_dir() and files_of(tmp_path / "tmp") | files_of(theirs) == before
    assert [p.name for p in private.iterdir()] == [stale.name]  # nothing compiled or created there


def test_the_private_numba_folder_of_this_user_is_used(only_the_private_place, tmp_path):
    from gpu_tigrag.numba_cache import ensure_numba_cache

    folder = ensure_numba_cache(only_the_private_place)
    assert folder is not None and folder.startswith(str(tmp_path / "tmp" / f"gpu_tigrag-numba-{os.getuid()}"))
