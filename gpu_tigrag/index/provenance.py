"""Where an in-memory Index came from: the directory, generation and manifest digest it was read from
or saved to (`Origin`), and the generation its unread files are in (its `Source`). A save back to that
directory is refused when another writer replaced the index meanwhile (no lost update); an index
derived in memory (`add`, `extend`) keeps its parent's origin, marked modified."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..errors import WriterLockError
from .generation_files import Source
from .index import Index
from .manifest import manifest_sha256


@dataclasses.dataclass(frozen=True)
class Origin:
    """The index directory an Index was read from (or saved to), the sha256 of its manifest then and
    the generation it was (None: an index written before generations)."""

    path: str
    manifest_sha256: str
    modified: bool = False  # derived in memory (e.g. by add_passages): no longer what the files hold
    generation: str | None = None


def origin(index: Index) -> Origin | None:
    """Where `index` was read from or saved to, if anywhere."""
    return index.__dict__.get("_tigrag_origin")


def set_origin(index: Index, value: Origin) -> None:
    index.__dict__["_tigrag_origin"] = value


def source_of(index: Index) -> Source | None:
    return index.__dict__.get("_tigrag_source")


def derive_origin(parent: Index, child: Index) -> Index:
    """Mark `child`, computed in memory from `parent`, as a modified copy of parent's directory (its
    unchanged files may be linked from the generation parent was read from)."""
    found = origin(parent)
    if found is not None:
        set_origin(child, dataclasses.replace(found, modified=True))
    if source_of(parent) is not None:
        child.__dict__["_tigrag_source"] = source_of(parent)
    return child


def check_not_replaced(index: Index, target: Path) -> None:
    found = origin(index)
    if found is None or found.path != str(target):
        return
    current = manifest_sha256(target)
    if current is not None and current != found.manifest_sha256:
        raise WriterLockError(f"{target}: another writer saved this index after it was read; saving now would "
                              "lose that write, so nothing was written: load the index again and redo the change")
