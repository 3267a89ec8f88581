"""Text-vector caches: in memory for one run, and on disk across runs (eval sweeps, repeated
`tigrag run`s, hop-2 expansion texts that recur across queries).

The disk cache is one SQLite file keyed by sha256(model fingerprint, backend, kind, text), so
vectors of another model, backend or kind are never returned. SQLite's file locks make it safe
for several processes at once (WAL mode; a writer waits up to 60 s for another), and a lock
makes one connection safe for the threads of one process. Vectors are raw float32 bytes,
checked for length on the way out (no pickle). The cache is bounded: past `max_bytes` the
least recently used entries are deleted. A damaged cache file is reported and started afresh
(it holds nothing that cannot be recomputed).

SQLite deletes a `-journal`, `-wal` or `-shm` beside a missing or empty database (and replays one into
a damaged file): such a file beside no cache of ours, or beside a file that is no SQLite database, is
someone else's and is renamed aside (warned) before SQLite opens anything. Beside a cache of ours they
are SQLite's own, left for it to recover after a crash. A cache folder inside an index is refused: a
generation never changes.

The cache never stops the work it speeds up: a cache that cannot be opened for writing (a read-only
file or folder) is read only; one that cannot be opened at all, or fails later (a full disk, a lock
held past the timeout), is warned about once and the run goes on without it.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import sqlite3
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..errors import ModelError
from ..outputs import check_outside_indexes
from .base import PASSAGE, Encoder, check_kind, empty
from .lazy import LazyEncoder

log = logging.getLogger(__name__)

CACHE_FILE = "vectors.sqlite3"
DEFAULT_MAX_BYTES = 2 << 30
#: bytes per cached entry besides the vector: key, timestamp and SQLite's row and index overhead
ENTRY_OVERHEAD = 64
BATCH = 500  # SQLite's host-parameter limit is 999 on old builds
#: SQLite's files beside the database, which it may delete or replay into the database
SIBLINGS = ("-wal", "-shm", "-journal")
#: the first bytes of every SQLite database
SQLITE_MAGIC = b"SQLite format 3\0"


def default_cache_dir() -> Path:
    """`$TIGRAG_CACHE_DIR`, else `$XDG_CACHE_HOME/gpu_tigrag`, else `~/.cache/gpu_tigrag`."""
    if os.environ.get("TIGRAG_CACHE_DIR"):
        return Path(os.environ["TIGRAG_CACHE_DIR"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "gpu_tigrag"


def _read_only_file_system(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive flock on the cache folder itself (no lock file is made) while a cache is opened: a process
    creating a new cache holds a `-journal` beside an empty database for a moment, which another opening
    the cache at once must not take for a stranger's. Where the folder cannot be locked, nothing is."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        yield
    finally:
        os.close(fd)  # releases the lock


class ForeignDatabase(sqlite3.DatabaseError):
    """The cache file is a valid SQLite database that is not a vector cache: never written."""


def _foreign(tables: set[str]) -> str:
    return (f"a SQLite database of other tables ({', '.join(sorted(tables)[:3])}), not a vector cache of gpu_tigrag; "
            "it is left as it is")


class VectorCache:
    """On-disk text -> vector cache, bounded to about `max_bytes`."""

    def __init__(self, folder: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES):
        if max_bytes < 1 << 20:
            raise ModelError(f"vector cache bound must be at least 1 MiB, got {max_bytes} bytes")
        self.folder = Path(folder) if folder is not None else default_cache_dir()
        check_outside_indexes(self.folder, "vector cache")  # TigragError: an index is never written here
        self.path = self.folder / CACHE_FILE
        self.max_bytes = max_bytes
        self.lock = threading.Lock()
        self.hits = self.misses = 0
        self.writable = True
        self.db: sqlite3.Connection | None = self._open()

    def _open(self) -> sqlite3.Connection | None:
        """A read-write connection; else a read-only one (a read-only cache still serves); else None
        (warned: the run goes on without a cache). A cache file that is a symbolic link (or any other
        non-file) is never opened: SQLite would write where it points."""
        odd = [p for p in (Path(f"{self.path}{suffix}") for suffix in ("", *SIBLINGS))
               if os.path.lexists(p) and not stat.S_ISREG(os.lstat(p).st_mode)]
        if odd:
            what = "a symbolic link" if odd[0].is_symlink() else "a folder, FIFO, socket or device"
            log.warning("%s: %s, not a file of the vector cache; going on without the cache (remove it, or choose "
                        "another folder with --vector-cache DIR)", odd[0], what)
            return None
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with _folder_lock(self.folder):
                return self._open_locked()
        except (sqlite3.DatabaseError, OSError) as exc:
            if isinstance(exc, ForeignDatabase):
                log.warning("%s: cannot open the vector cache (%s); going on without it (choose another folder "
                            "with --vector-cache DIR)", self.path, exc)
                return None
            reason = getattr(exc, "strerror", None) or str(exc)
        # read-only: a WAL database needs its -shm file, which a read-only file system cannot hold; there
        # nobody can change the file either, so it is opened as immutable
        for mode in ("mode=ro", "mode=ro&immutable=1"):
            if not self.path.is_file() or (mode.endswith("immutable=1") and not _read_only_file_system(self.folder)):
                break
            try:
                db = sqlite3.connect(f"file:{self.path}?{mode}", uri=True, timeout=60, check_same_thread=False,
                                     isolation_level=None)
                db.execute("SELECT count(*) FROM vectors").fetchone()
                self.writable = False
                log.warning("%s: the vector cache cannot be written (%s); reading it without adding to it",
                            self.path, reason)
                return db
            except sqlite3.DatabaseError:
                continue
        log.warning("%s: cannot open the vector cache (%s); going on without it (choose another folder with "
                    "--vector-cache DIR)", self.path, reason)
        return None

    def _open_locked(self) -> sqlite3.Connection:
        """`_connect`, after the files SQLite would delete or replay that are not ours are set aside (see the
        module doc); a damaged cache is set aside and started afresh."""
        try:
            self._check_files()
            return self._connect()
        except sqlite3.DatabaseError as exc:
            if any(word in str(exc) for word in ("locked", "readonly", "unable to open", "full", "I/O")):
                raise  # not a damaged file: a busy, read-only or full disk (read it, or go on without it)
            if isinstance(exc, ForeignDatabase):
                raise
            kept = self._set_aside()
            log.warning("%s: vector cache is damaged (%s); starting a new one (the damaged file is kept as %s)",
                        self.path, exc, kept)
            return self._connect()

    def _check_files(self) -> None:
        """Before SQLite opens anything: a `-wal`, `-shm` or `-journal` beside a missing or empty database is
        not SQLite's (it would delete it) and is set aside; a database file that is not SQLite's, or a SQLite
        database of other tables, raises (set aside as damaged, or left alone as foreign)."""
        size = self.path.stat().st_size if self.path.is_file() else 0
        if size == 0:
            strays = [suffix for suffix in SIBLINGS if Path(f"{self.path}{suffix}").is_file()]
            if strays:
                kept = self._set_aside(strays, "foreign")
                log.warning("%s: beside no vector cache, so not SQLite's (it would delete them); kept as %s "
                            "(starting a new cache)", ", ".join(f"{self.path}{s}" for s in strays),
                            ", ".join(f"{kept}{s}" for s in strays))
            return
        with open(self.path, "rb") as handle:
            if handle.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise sqlite3.DatabaseError("file is not a database")
        try:  # immutable: reads the file alone, never a journal (which would be replayed into a stranger's file)
            probe = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)
            try:
                tables = {row[0] for row in probe.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            finally:
                probe.close()
        except sqlite3.DatabaseError:
            return  # e.g. tables still in the WAL: `_connect` looks again
        if tables and "vectors" not in tables:
            raise ForeignDatabase(_foreign(tables))

    def _set_aside(self, suffixes: Sequence[str] = ("", *SIBLINGS), label: str = "damaged") -> str:
        """Rename a damaged cache file (and its -wal, -shm, -journal) aside, never delete it: it may not be the
        engine's (a file someone named vectors.sqlite3). Returns the new name of the main file."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        target = f"{self.path}.{label}-{stamp}-{os.getpid()}"
        for suffix in suffixes:
            path = Path(f"{self.path}{suffix}")
            if path.is_file() and not path.is_symlink():
                os.replace(path, f"{target}{suffix}")
        return target

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "vectors" not in tables:  # someone else's database: never add to it
            db.close()
            raise ForeignDatabase(_foreign(tables))
        self._wal(db)
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB NOT NULL, "
                   "used REAL NOT NULL) WITHOUT ROWID")
        db.execute("CREATE INDEX IF NOT EXISTS vectors_used ON vectors (used)")
        db.execute("SELECT count(*) FROM vectors").fetchone()  # a damaged file fails here, not later
        return db

    @staticmethod
    def _wal(db: sqlite3.Connection, patience: float = 60.0) -> None:
        """Switch to WAL. Two processes opening a new cache at once can make this fail with "database is
        locked" at once, without SQLite's busy wait (a journal-mode change needs the file to itself), so
        it is retried with backoff for up to `patience` seconds."""
        deadline, pause = time.monotonic() + patience, 0.01
        while True:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 1.0)

    @staticmethod
    def key(encoder: Encoder, kind: str, text: str) -> bytes:
        identity = "\0".join((encoder.fingerprint, encoder.backend, str(encoder.dim), kind, text))
        return hashlib.sha256(identity.encode("utf-8")).digest()[:20]

    def get(self, keys: Sequence[bytes], dim: int) -> dict[bytes, np.ndarray]:
        """The cached vectors of `keys` (absent or damaged entries are left out), marked as used now."""
        found: dict[bytes, np.ndarray] = {}
        size = 4 * dim
        with self.lock:
            for start in range(0, len(keys), BATCH):
                if self.db is None:  # never opened, or given up on
                    break
                part = list(keys[start : start + BATCH])
                marks = ",".join("?" * len(part))
                try:
                    rows = self.db.execute(f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part).fetchall()
                except sqlite3.DatabaseError as exc:
                    self._give_up("read", exc)
                    break
                good = [(k, v) for k, v in rows if len(v) == size]
                for k, v in good:
                    found[k] = np.frombuffer(v, dtype=np.float32)
                if good:
                    self._write(f"UPDATE vectors SET used = ? WHERE key IN ({','.join('?' * len(good))})",
                                [time.time(), *[k for k, _ in good]])
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def put(self, items: dict[bytes, np.ndarray]) -> None:
        """Store vectors (float32), then delete the least recently used entries past the bound."""
        if not items or self.db is None or not self.writable:
            return
        now = time.time()
        rows = [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes(), now) for k, v in items.items()]
        with self.lock:
            self._write_many("INSERT OR REPLACE INTO vectors (key, vector, used) VALUES (?, ?, ?)", rows)
            if self.db is not None and self.writable:
                self._evict(len(rows[0][1]))

    def _evict(self, vector_bytes: int) -> None:
        limit = max(1, self.max_bytes // (vector_bytes + ENTRY_OVERHEAD))
        count = self.db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        if count > limit:
            drop = count - int(limit * 0.9)  # room for the next batches, so eviction is not per call
            self._write("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors ORDER BY used LIMIT ?)", [drop])
            log.debug("vector cache: %d least recently used entries evicted", drop)

    def _write(self, sql: str, args: Sequence) -> None:
        if self.db is not None and self.writable:
            self._guarded(lambda: self.db.execute(sql, args))

    def _write_many(self, sql: str, rows: Sequence) -> None:
        def run() -> None:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(sql, rows)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

        self._guarded(run)

    def _guarded(self, action) -> None:
        try:
            action()
        except sqlite3.DatabaseError as exc:  # disk full, a read-only file, a lock held past the timeout
            self.writable = False
            log.warning("%s: cannot write the vector cache (%s); going on without adding to it", self.path,
                        "the disk is full" if "full" in str(exc) else exc)

    def _give_up(self, what: str, exc: Exception) -> None:
        log.warning("%s: cannot %s the vector cache (%s); going on without it", self.path, what, exc)
        try:
            self.db.close()
        except sqlite3.Error:
            pass
        self.db = None

    def entries(self) -> int:
        with self.lock:
            return 0 if self.db is None else int(self.db.execute("SELECT count(*) FROM vectors").fetchone()[0])

    def close(self) -> None:
        with self.lock:
            if self.db is not None:
                self.db.close()


class CachingEncoder:
    """Wraps an encoder with an in-memory (text, kind) -> vector cache, and optionally a `VectorCache`
    on disk, so several systems, sweep points or runs over the same texts encode each text once.
    `seconds` is the time spent in the wrapped encoder; `encoded` counts the texts it encoded."""

    def __init__(self, inner: Encoder, disk: VectorCache | None = None):
        self.inner, self.disk = inner, disk
        self.name, self.fingerprint, self.dim = inner.name, inner.fingerprint, inner.dim
        self.backend = inner.backend
        self.cache: dict[tuple[str, str], np.ndarray] = {}
        self.seconds = 0.0
        self.encoded = 0

    def retain(self, keys: set[tuple[str, str]]) -> None:
        """Forget every vector of the in-memory cache but those of `keys` ((kind, text) pairs)."""
        self.cache = {key: vector for key, vector in self.cache.items() if key in keys}

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        missing = [t for t in dict.fromkeys(texts) if (kind, t) not in self.cache]
        if missing and self.disk is not None:
            keys = {t: VectorCache.key(self.inner, kind, t) for t in missing}
            found = self.disk.get(list(keys.values()), self.dim)
            for text, key in keys.items():
                if key in found:
                    self.cache[(kind, text)] = found[key]
            missing = [t for t in missing if keys[t] not in found]
        if missing:
            if isinstance(self.inner, LazyEncoder):
                self.inner.load(kind)  # outside the encoder's seconds, as a model loaded at start-up was
            start = time.perf_counter()
            vectors = self.inner.encode(missing, show_progress, kind=kind)
            self.seconds += time.perf_counter() - start
            self.encoded += len(missing)
            for text, vector in zip(missing, vectors):
                self.cache[(kind, text)] = vector
            if self.disk is not None:
                self.disk.put({VectorCache.key(self.inner, kind, t): v for t, v in zip(missing, vectors)})
        if len(texts) == 0:
            return empty(self.dim)
        return np.stack([self.cache[(kind, t)] for t in texts])
