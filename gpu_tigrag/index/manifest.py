"""The manifest of an index directory's current generation: pinned, parsed and validated (format
version, configuration checksum, entity labels, plain file names, encoder identity), and the
generation's folder. `load.py` reads the files it lists; `store.py` writes new generations."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Iterator

from .. import __version__
from ..atomic import stale_siblings
from ..checksums import sha256_json
from ..config import ENTITY_LABELS
from ..errors import IndexFormatError, NotAnIndexError
from .generations import MANIFEST, Snapshot, open_snapshot


FORMAT_VERSION = 3  # 2: entity labels per occurrence (entity_chunk_masks); 3: the config's checksum


def snapshot_of(path: Path) -> Snapshot:
    """The pinned current generation of index directory `path` (see `generations.open_snapshot`)."""
    if not path.is_dir():
        moved = [p for p in stale_siblings(path.resolve()) if ".old-" in p.name] if path.parent.is_dir() else []
        if moved:
            raise IndexFormatError(f"{path}: missing; a save was killed after moving the previous index to "
                                   f"{moved[-1]}: rename it back, or write the index again")
        raise NotAnIndexError(f"{path}: no such index directory (build one with `tigrag index`)")
    return open_snapshot(path.resolve())


def _plain_name(name: Any) -> bool:
    """A file name of a generation: one path component (no folder, no '..', no hidden name)."""
    return isinstance(name, str) and bool(name) and name == os.path.basename(name) and not name.startswith(".") \
        and "\\" not in name and "\x00" not in name


def _check_file_names(manifest_path: Path, manifest: dict[str, Any]) -> None:
    """Every file a generation's manifest names (its files, its stages' file lists) is a plain name in the
    generation's folder: a crafted `../x` never makes a reader read, or a writer link or copy, outside it."""
    names = list(manifest["files"])
    sections = manifest.get("methods")
    for section in sections.values() if isinstance(sections, dict) else ():
        listed = section.get("files") if isinstance(section, dict) else None
        names += listed if isinstance(listed, list) else []
    bad = next((name for name in names if not _plain_name(name)), None)
    if bad is not None:
        raise IndexFormatError(f"{manifest_path}: names the file {bad!r}, which is not a plain file name of the "
                               "generation's folder; the manifest is damaged or crafted: rebuild the index")


def parse_manifest(snapshot: Snapshot) -> dict[str, Any]:
    """The manifest `snapshot` read, validated."""
    manifest_path = snapshot.folder / MANIFEST
    try:
        manifest = json.loads(snapshot.manifest_bytes.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # also an int past Python's digit limit, or nesting past the stack
        raise IndexFormatError(f"{manifest_path}: damaged manifest ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "gpu_tigrag-index":
        raise IndexFormatError(f"{manifest_path}: not a gpu_tigrag index manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{manifest_path}: index format version {version} is not supported by gpu_tigrag {__version__} "
            f"(expects {FORMAT_VERSION}); rebuild the index with `tigrag index`"
        )
    if manifest.get("config_sha256") != sha256_json(manifest.get("config")):
        raise IndexFormatError(f"{manifest_path}: the stored configuration does not match its checksum "
                               "(the manifest was edited or damaged); rebuild the index")
    if manifest.get("entity_labels") != list(ENTITY_LABELS):
        raise IndexFormatError(f"{manifest_path}: entity label table differs from this version's; rebuild the index")
    if not isinstance(manifest.get("files"), dict):
        raise IndexFormatError(f"{manifest_path}: lists no files; rebuild the index")
    _check_file_names(manifest_path, manifest)
    encoder = manifest.get("encoder")
    if not isinstance(encoder, dict) or not all(isinstance(encoder.get(k), str) for k in ("name", "fingerprint")):
        raise IndexFormatError(f"{manifest_path}: names no encoder (encoder.name, encoder.fingerprint); rebuild the "
                               "index")
    return manifest


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The validated manifest of the current generation of index directory `path`."""
    snapshot = snapshot_of(Path(path))
    snapshot.pin.close()
    return parse_manifest(snapshot)


def manifest_sha256(path: str | Path) -> str | None:
    """sha256 of the manifest of the current generation of index directory `path` (None when it holds
    no index)."""
    try:
        snapshot = open_snapshot(Path(path))
    except IndexFormatError:
        return None
    snapshot.pin.close()
    return hashlib.sha256(snapshot.manifest_bytes).hexdigest()


@contextlib.contextmanager
def pinned_generation(path: str | Path) -> Iterator[tuple[Path, str]]:
    """(folder, manifest sha256) of the current generation of index directory `path`, held for the
    block: processes that load that folder (`load_index` reads a generation folder as an index) read
    the same generation, whatever a writer commits meanwhile."""
    snapshot = snapshot_of(Path(path))
    try:
        parse_manifest(snapshot)
        yield snapshot.folder, hashlib.sha256(snapshot.manifest_bytes).hexdigest()
    finally:
        snapshot.pin.close()


def generation_folder(path: str | Path) -> Path:
    """The folder holding the files and manifest of the current generation of index directory `path`
    (the directory itself for an index written before generations). For inspection: a writer may
    supersede it at any time; `load_index` pins what it reads."""
    snapshot = snapshot_of(Path(path))
    snapshot.pin.close()
    return snapshot.folder
