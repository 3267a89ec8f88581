"""One rule for every writer: never replace or delete what the engine did not write.

A command that writes a file (`trec -o`, `eval --save-qrels`, `report --out`) or files into a
folder (`eval --out`, `eval --save-runs`, `datasets fetch --to`) first asks this module whether it
may, before any work:

- a path that does not exist may be written, unless it lies inside an index directory (an index
  is written only by `index`, `add` and `extend`, and a generation never changes);
- a path that exists is replaced only when it is a regular file the engine wrote as the same kind
  of artefact, unchanged since: a file's record is its sidecar `FILE.meta.json`, a folder's the
  file `.tigrag-outputs.json` in it, each holding the kind and the sha256 and size of what was
  written; any other regular file is refused, naming it and the flag that allows it (`--force`);
- never, even with `--force`: a symbolic link, a folder, a device, a FIFO or a socket where a file
  goes, a file the command reads (its own input), anything inside an index directory.

After the write, `record_file` / `OutputFolder.record` write the record, so a rerun may replace
its own output. The records also say what a file claims (a TREC run's query count, whether it is
complete), which `tigrag trec` and readers check.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Sequence

from .errors import TigragError

#: the sidecar of a file the engine wrote: `FILE.meta.json` (`tigrag run`'s own sidecar has this name too)
SIDECAR_SUFFIX = ".meta.json"
#: the record of the files the engine wrote in an output folder
FOLDER_RECORD = ".tigrag-outputs.json"
RECORD_FORMAT = "gpu_tigrag-output"
#: the formats of the sidecars the engine writes (its output records, `tigrag run`'s run descriptions)
OWN_RECORDS = (RECORD_FORMAT, "gpu_tigrag-run")
INDEX_FORMAT = "gpu_tigrag-index"


def sidecar_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def _kind_of_entry(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def check_replaceable(path: str | Path) -> None:
    """TigragError when `path` exists and is anything but a regular file (never renamed over, never
    written through): the last check of every atomic write, right before its rename."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TigragError(f"{path}: cannot be checked ({exc.strerror or exc}); nothing was written") from None
    if not stat.S_ISREG(mode):
        raise TigragError(f"{path}: exists and is {_kind_of_entry(mode)}; refusing to replace it with a file "
                          "(nothing was written): choose another path")


def is_index_manifest(file: Path) -> bool:
    """Whether `file` is the manifest (or generation pointer) of a gpu_tigrag index."""
    try:
        with open(file, "rb") as handle:
            raw = handle.read(1 << 20)
        value = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(value, dict) and value.get("format") == INDEX_FORMAT


def index_home(path: str | Path) -> Path | None:
    """The index directory that `path` is in (or is), if any: a folder above it holding an index's
    manifest or generation pointer."""
    current = Path(os.path.abspath(path))
    for folder in (current, *current.parents):
        manifest = folder / "manifest.json"
        if manifest.is_file() and not manifest.is_symlink() and is_index_manifest(manifest):
            return folder
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _digest(path: Path) -> tuple[str, int]:
    from .checksums import sha256_file

    return sha256_file(path), path.stat().st_size


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def check_outside_indexes(path: str | Path, what: str) -> None:
    """TigragError when `path` is inside (or is) an index directory: an index is changed only by `index`,
    `add` and `extend`, and a generation never changes."""
    home = index_home(path)
    if home is not None:
        raise TigragError(f"{what}: {path} is inside the index directory {home}; an index is changed only by "
                          "`tigrag index`, `add` and `extend` (nothing was written): choose a path outside it")


def _refuse_always(path: Path, what: str, inputs: Iterable[str | Path]) -> None:
    """What no flag allows: a link or non-file, the command's own input, a place inside an index."""
    if os.path.islink(path):
        raise TigragError(f"{what}: {path} is a symbolic link (to {os.readlink(path)}); refusing to write through "
                          "it or replace it (nothing was written): choose another path")
    check_outside_indexes(path, what)
    if path.exists():
        mode = os.lstat(path).st_mode
        if not stat.S_ISREG(mode):
            raise TigragError(f"{what}: {path} exists and is {_kind_of_entry(mode)}; refusing to replace it "
                              "(nothing was written): choose another path")
        for given in inputs:
            if _same_file(path, Path(given)):
                raise TigragError(f"{what}: {path} is also this command's input {given}; writing it would destroy "
                                  "what is being read (nothing was written): choose another path")


def _refuse_read_only(path: Path, what: str) -> None:
    """TigragError when `path` exists without any write bit: someone made it read-only to keep it, so only
    --force replaces it (checked by mode, not by access(2): root may write any file)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # absent (or under a file): nothing to replace, the write reports its own error
        return
    if stat.S_ISREG(mode) and mode & 0o222 == 0:
        raise TigragError(f"{what}: {path} exists and is read-only (mode {stat.S_IMODE(mode):04o}); refusing to "
                          "replace it (nothing was written): choose another path, or pass --force to replace it")


def recorded_kind(path: str | Path) -> str | None:
    """The kind of artefact the engine recorded for file `path` (its sidecar), when the file is
    unchanged since it was written; None for any other file."""
    path = Path(path)
    record = _read_record(sidecar_path(path))
    if record is None or record.get("format") != RECORD_FORMAT or not path.is_file():
        return None
    if [record.get("sha256"), record.get("bytes")] != list(_digest(path)):
        return None
    kind = record.get("kind")
    return kind if isinstance(kind, str) else None


def file_record(path: str | Path) -> dict[str, Any] | None:
    """The sidecar record of file `path` when it matches the file as it is now (else None)."""
    path = Path(path)
    if recorded_kind(path) is None:
        return None
    return _read_record(sidecar_path(path))


def check_file_output(path: str | Path, kind: str, what: str, inputs: Sequence[str | Path] = (),
                      force: bool = False) -> None:
    """Refuse (TigragError, before any work) to write the file `path` as an artefact of `kind`
    unless the module's rule allows it; `what` names the option in the message (e.g. "-o run.trec")."""
    path = Path(path)
    _refuse_always(path, what, inputs)
    sidecar = sidecar_path(path)
    if sidecar.exists() or sidecar.is_symlink():
        _refuse_always(sidecar, what, inputs)
    if not force:
        _refuse_read_only(path, what)
    if not path.exists() or force:
        if sidecar.exists() and not force and (_read_record(sidecar) or {}).get("format") not in OWN_RECORDS:
            raise TigragError(f"{what}: {sidecar} exists and is not a record gpu_tigrag wrote; refusing to replace it "
                              "(nothing was written): choose another path, or pass --force")
        return
    found = recorded_kind(path)
    if found == kind:
        return
    if found is None and (_read_record(sidecar) or {}).get("format") == "gpu_tigrag-run":
        found = "`tigrag run` output"
    why = (f"is {found} the engine wrote, not {kind}" if found is not None
           else "was not written by gpu_tigrag (or was changed since: no matching record beside it)")
    raise TigragError(f"{what}: {path} exists and {why}; refusing to overwrite it (nothing was written): choose "
                      "another path, or pass --force to replace it")


def record_file(path: str | Path, kind: str, **facts: Any) -> None:
    """Write the sidecar of `path`, just written by the engine as a `kind` (facts: what it claims,
    e.g. queries=600, complete=True)."""
    from .atomic import atomic_write_json

    path = Path(path)
    digest, size = _digest(path)
    atomic_write_json(sidecar_path(path), {"format": RECORD_FORMAT, "kind": kind, "sha256": digest, "bytes": size,
                                           **facts}, indent=1, sort_keys=True)


class OutputFolder:
    """A folder the engine writes files into (`eval --out`, `--save-runs`, `datasets fetch --to`):
    other files there are left alone; a file it would replace must be one it wrote as this `kind`
    and unchanged since (its record, `.tigrag-outputs.json`), or `force` is needed."""

    def __init__(self, folder: str | Path, kind: str, what: str, inputs: Sequence[str | Path] = (),
                 force: bool = False) -> None:
        self.folder, self.kind, self.what, self.inputs, self.force = Path(folder), kind, what, inputs, force
        record = _read_record(self.folder / FOLDER_RECORD)
        ok = record is not None and record.get("format") == RECORD_FORMAT and record.get("kind") == kind \
            and isinstance(record.get("files"), dict)
        self.files: dict[str, Any] = dict(record["files"]) if ok else {}

    def check_folder(self) -> None:
        """The folder itself: not a link or a file, not inside an index."""
        if os.path.islink(self.folder):
            raise TigragError(f"{self.what}: {self.folder} is a symbolic link (to {os.readlink(self.folder)}); "
                              "refusing to write through it (nothing was written): choose another folder")
        check_outside_indexes(self.folder, self.what)
        if self.folder.exists() and not self.folder.is_dir():
            raise TigragError(f"{self.what}: {self.folder} exists and is not a folder (nothing was written)")
        record = self.folder / FOLDER_RECORD
        if record.exists() or record.is_symlink():
            _refuse_always(record, self.what, ())

    def check(self, names: Iterable[str]) -> None:
        """Refuse (before any work) when writing `names` into the folder would replace a foreign file."""
        self.check_folder()
        for name in names:
            self.check_name(name)

    def check_name(self, name: str) -> None:
        path = self.folder / name
        _refuse_always(path, self.what, self.inputs)
        if not path.exists() or self.force:
            return
        _refuse_read_only(path, self.what)
        entry = self.files.get(name)
        if isinstance(entry, dict) and [entry.get("sha256"), entry.get("bytes")] == list(_digest(path)):
            return
        raise TigragError(f"{self.what}: {path} exists and was not written there by gpu_tigrag (or was changed "
                          "since); refusing to overwrite it (nothing was written): choose another folder, or pass "
                          "--force to replace it")

    def record(self, names: Iterable[str], **facts: Any) -> None:
        """Add the files `names`, just written, to the folder's record (`facts`: what they claim, e.g. how
        they name passages)."""
        from .atomic import atomic_write_json

        for name in names:
            path = self.folder / name
            if path.is_file():
                digest, size = _digest(path)
                self.files[name] = {"sha256": digest, "bytes": size, **facts}
        atomic_write_json(self.folder / FOLDER_RECORD, {"format": RECORD_FORMAT, "kind": self.kind,
                                                       "files": self.files}, indent=1, sort_keys=True)
