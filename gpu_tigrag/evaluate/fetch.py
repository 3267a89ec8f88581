"""Download public evaluation sets: the HippoRAG `reproduce/dataset` files and BEIR zips.

Downloads resume from a `.part` file with an HTTP Range request, and every file is checked
against a sha256: the registry's where pinned, else the one recorded in `SHA256SUMS` on the
first download (trust on first use), or one given with `--sha256 FILE=HEX`. A file is moved
into place (fsync'ed, then renamed: `atomic.py`) only once its checksum matches. Each file's
checksum and state are logged (INFO) on this module's logger.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..atomic import atomic_path, atomic_write_text, describe_os_error
from ..checksums import sha256_file
from ..errors import OutputError, TigragError
from ..outputs import FOLDER_RECORD, OutputFolder

log = logging.getLogger(__name__)

HIPPORAG = "https://raw.githubusercontent.com/OSU-NLP-Group/HippoRAG/main/reproduce/dataset"
BEIR = "https://public.ukp.informatik.tu-darmstadt.de/thakur/BEIR/datasets"


@dataclass(frozen=True)
class Source:
    url: str
    filename: str
    sha256: str | None = None  # pinned checksum, where known
    unzip: bool = False


def _hipporag(name: str) -> list[Source]:
    return [Source(f"{HIPPORAG}/{name}.json", f"{name}.json"), Source(f"{HIPPORAG}/{name}_corpus.json", f"{name}_corpus.json")]


REGISTRY: dict[str, list[Source]] = {
    "2wikimultihopqa": _hipporag("2wikimultihopqa"),
    "musique": _hipporag("musique"),
    "hotpotqa": _hipporag("hotpotqa"),
    **{name: [Source(f"{BEIR}/{name}.zip", f"{name}.zip", unzip=True)]
       for name in ("scifact", "nfcorpus", "fiqa", "arguana", "scidocs", "trec-covid")},
}


def _read_sums(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    sums = {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            sums[parts[1]] = parts[0]
    return sums


def _save(response: Any, part: Path, mode: str, chunk: int, progress: Callable[[int], None]) -> None:
    """Copy `response` into `part`, unbuffered, so that a failure to write it (disk full) is an
    `OutputError` here and a failure to read stays the OSError of a network problem."""
    try:
        handle = open(part, mode, buffering=0)
    except OSError as exc:
        raise _write_error(part, exc) from None
    with handle:
        while block := response.read(chunk):
            view = memoryview(block)
            try:
                while view:
                    view = view[handle.write(view):]
            except OSError as exc:
                raise _write_error(part, exc) from None
            progress(len(block))


def _write_error(part: Path, exc: OSError) -> OutputError:
    return OutputError(f"{part}: cannot write ({describe_os_error(exc)}); a rerun resumes the download from there")


def download(source: Source, folder: Path, expected: str | None, chunk: int = 1 << 16,
             progress: Callable[[int], None] = lambda n: None) -> str:
    """Fetch one file into `folder`, resuming a partial download; returns its sha256."""
    target, part = folder / source.filename, folder / f"{source.filename}.part"
    if target.is_file():
        digest = sha256_file(target)
        if expected and digest != expected:
            raise TigragError(f"{target}: sha256 {digest} does not match the expected {expected}; delete it and retry")
        return digest
    offset = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(source.url, headers={"Range": f"bytes={offset}-"} if offset else {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            mode = "ab" if offset and response.status == 206 else "wb"
            _save(response, part, mode, chunk, progress)
    except urllib.error.HTTPError as exc:
        if exc.code != 416:  # 416: the part is already complete
            raise TigragError(f"{source.url}: HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TigragError(
            f"{source.url}: cannot download ({reason}). Offline? Put local copies in a folder and pass --data-dir; "
            f"a rerun resumes from {part.name}"
        ) from None
    digest = sha256_file(part)
    if expected and digest != expected:
        part.unlink()
        raise TigragError(f"{source.url}: sha256 {digest} does not match the expected {expected}; the download was discarded")
    with atomic_path(target) as tmp:  # the verified part, fsync'ed and renamed into place
        os.replace(part, tmp)
    return digest


def fetch(name: str, to: str | Path, pins: dict[str, str] | None = None,
          registry: dict[str, list[Source]] | None = None) -> Path:
    """Download (or resume, or verify) dataset `name` into `to/name`; returns that folder."""
    registry = REGISTRY if registry is None else registry
    if name not in registry:
        raise TigragError(f"unknown dataset {name!r}; known: {', '.join(sorted(registry))}")
    if Path(to).exists() and not Path(to).is_dir():
        raise TigragError(f"--to {to}: exists and is not a folder; nothing was written")
    folder = Path(to) / name
    out = OutputFolder(folder, DOWNLOAD_KIND, f"--to {to}")
    out.check_folder()
    sums_path = folder / "SHA256SUMS"
    for source in registry[name]:  # before any download: a file there that the engine did not write stays
        _check_own(out, source.filename, pinned=(pins or {}).get(source.filename) or source.sha256)
        _check_own(out, f"{source.filename}.part", partial=True)
    _check_own(out, sums_path.name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"--to {to}: cannot create {folder} ({describe_os_error(exc)}); nothing was written") from None
    recorded = _read_sums(sums_path)
    for source in registry[name]:
        expected = (pins or {}).get(source.filename) or source.sha256 or recorded.get(source.filename)
        out.files[f"{source.filename}.part"] = {"partial": True}  # ours from now on: a rerun resumes it
        out.record([])
        digest = download(source, folder, expected)
        state = "verified" if expected else "recorded (first download)"
        log.info("%s: sha256 %s %s", source.filename, digest, state)
        recorded[source.filename] = digest
        out.files.pop(f"{source.filename}.part", None)
        out.record([source.filename])
        if source.unzip:
            reserved = {sums_path.name, FOLDER_RECORD,
                        *(n for src in registry[name] for n in (src.filename, f"{src.filename}.part"))}
            _unzip(out, folder / source.filename, reserved)
    atomic_write_text(sums_path, "".join(f"{h}  {f}\n" for f, h in sorted(recorded.items())))
    out.record([sums_path.name])
    return folder


#: the kind of artefact a dataset folder records (`outputs.py`)
DOWNLOAD_KIND = "a dataset download"


def _check_own(out: OutputFolder, name: str, partial: bool = False, pinned: str | None = None) -> None:
    """Refuse to write `name` into the dataset folder over a file the engine did not put there (a partial
    download it started counts as its own; a complete file matching a pinned checksum is taken as it is)."""
    path = out.folder / name
    if partial and isinstance(out.files.get(name), dict) and out.files[name].get("partial") and path.is_file() \
            and not path.is_symlink():
        return
    if pinned and path.is_file() and not path.is_symlink() and sha256_file(path) == pinned:
        return
    try:
        out.check_name(name)
    except TigragError as exc:
        raise TigragError(f"{exc} (tigrag datasets fetch writes only files it downloaded)") from None


def _unzip(out: OutputFolder, archive_path: Path, reserved: set[str]) -> None:
    """Extract `archive_path` into the dataset folder member by member, each through `atomic_path` at the
    path checked: an archive is untrusted input (BEIR's have no pinned checksum), so a member that would land
    outside the folder, under a link or a file, or on a file the engine did not write is refused, before any
    member is written."""
    try:
        with zipfile.ZipFile(archive_path) as archive:
            members = [info for info in archive.infolist() if not info.is_dir()]
            for info in members:  # all of them before the first write
                _check_member(out, archive_path, info.filename, reserved)
                _check_own(out, info.filename)
            for info in members:
                _check_member(out, archive_path, info.filename, reserved)  # an earlier member may be in the way
                with atomic_path(out.folder / info.filename) as tmp, archive.open(info) as source, \
                        open(tmp, "wb") as target:
                    shutil.copyfileobj(source, target, 1 << 20)
                out.record([info.filename])
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise TigragError(f"{archive_path}: not a readable zip archive ({exc}); delete it and retry") from None
    except OSError as exc:
        raise OutputError(f"{archive_path}: cannot extract ({describe_os_error(exc)})") from None


def _check_member(out: OutputFolder, archive_path: Path, name: str, reserved: set[str]) -> None:
    """Refuse a member name that is absolute, has `..`, `.` or empty parts or backslashes, names one of the
    fetch's own files, or lies under an existing link or non-folder (looked at with lstat: never followed)."""
    parts = name.split("/")
    why = None
    if name.startswith("/") or "\\" in name or any(part in ("", ".", "..") for part in parts):
        why = "is not a plain relative path (absolute, '..', '.', empty parts or backslashes)"
    elif name in reserved:
        why = "names a file that `tigrag datasets fetch` itself writes there"
    else:
        for depth in range(1, len(parts)):
            above = out.folder.joinpath(*parts[:depth])
            try:
                mode = os.lstat(above).st_mode
            except FileNotFoundError:
                break
            if not stat.S_ISDIR(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
                why = f"would be written under {above}, which is {kind}"
                break
    if why:
        raise TigragError(f"{archive_path}: member {name!r} {why}; refusing to extract it (nothing there was "
                          "replaced): the archive is not a well-formed dataset, or move that path away")
