"""On-disk index: a directory of immutable generations, each a folder of `.npy` and Parquet files plus
`manifest.json` (format 3), and a pointer naming the current one (`generations.py`).

A generation's manifest holds the format version, package version, configuration, counts,
token-graph statistics, encoder identity, build timings and the sha256 and size of every file.
A save writes a new generation beside the current one and then switches the pointer atomically,
so a reader sees the old index or the new one, never a mixture, a half-written file or an error;
readers pin the generation they read (stages loaded later included) and writers remove a
superseded generation only once no reader holds it. Loading checks the format version and every
checksum, reads `.npy` with allow_pickle=False and never executes code from disk. An index
written before generations (its files directly in the folder) still loads; its next save
converts it.

Writers hold the directory's lock (`DIR.lock`, see `locking.py`): a second writer fails with
a clear error. A loaded index remembers the manifest it was read from (`origin`), and saving
it, or an index derived from it by `add_passages`, back to that directory is refused when
another writer replaced the index meanwhile (no lost update). What a killed save left behind is
removed by the next save.

A method stage is read on first use (`Index.stage`) and validated then, so a damaged stage fails
only the method that uses it, with the `tigrag extend` command that rebuilds it; a save carries
a stage that was never read over unread (`generation_files.carry`).

This module writes; by concern, the rest is in `manifest.py` (a generation's manifest, pinned and
validated), `load.py` (reading and checking an index) and `provenance.py` (where an in-memory index
came from). Their public names are importable from here too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..atomic import (TMP_MARK, atomic_directory, describe_os_error, fsync_folder, process_umask,
                      remove_stale_temporaries)
from ..checksums import sha256_file, sha256_json
from ..config import ENTITY_LABELS, config_to_dict
from ..errors import IndexFormatError, OutputError, TigragError
from ..locking import writer_lock
from ..outputs import index_home, is_index_manifest
from ..methods.registry import stage_methods
from .ann import ANN_FILE, SECTION as ANN_SECTION, AnnIndex, write_ann
from .generation_files import Source, carry, write_npy, write_stream, write_strings
from .generations import MANIFEST, collect, commit, generation_name, generation_number, next_generation, remove_leftovers
from .index import Index
from .load import REBUILD_INDEX, load_index, rebuild_stage  # noqa: F401  (importable from here)
from .manifest import (FORMAT_VERSION, generation_folder, manifest_sha256, pinned_generation,  # noqa: F401
                       read_manifest)
from .provenance import Origin, check_not_replaced, derive_origin, origin, set_origin, source_of  # noqa: F401
from .stage_arrays import csr_arrays
from .validate import check_base

log = logging.getLogger(__name__)


def _stage_payloads(index: Index) -> dict[str, tuple[dict[str, np.ndarray], dict[str, list[str]]]]:
    """(arrays, string columns) of every stage the index holds in memory (built, or stored and read),
    each converted once; a stored stage never read is carried over unread instead."""
    return {m.name: m.stage.to_arrays(index.stage(m.name)) for m in _stored_stages(index)
            if index.stage_loaded(m.name)}


def _base_arrays(index: Index) -> dict[str, np.ndarray]:
    arrays = {
        "chunk_passage": index.chunk_passage.astype(np.int32),
        "token_indptr": index.token_indptr.astype(np.int64),
        "token_ids": index.token_ids.astype(np.int32),
        "embeddings": np.ascontiguousarray(index.embeddings, dtype=np.float32),
        "entity_chunk_indptr": index.entities.chunk_indptr.astype(np.int64),
        "entity_chunk_ids": index.entities.chunk_ids.astype(np.int32),
        "entity_chunk_masks": index.entities.chunk_masks.astype(np.int32),
        "entity_token_indptr": index.entities.token_indptr.astype(np.int64),
        "entity_token_ids": index.entities.token_ids.astype(np.int32),
    }
    arrays.update(csr_arrays("graph", index.graph))
    arrays.update(csr_arrays("bm25", index.bm25))
    return arrays


def _index_arrays(index: Index) -> dict[str, np.ndarray]:
    """Every array of `index`, its stages' included (stored stages are read)."""
    arrays = _base_arrays(index)
    for method in _stored_stages(index):
        arrays.update(method.stage.to_arrays(index.stage(method.name))[0])
    return arrays


def _stored_stages(index: Index) -> list[Any]:
    """The registered methods whose stage `index` holds, in registry order."""
    return [m for m in stage_methods() if index.has_stage(m.name)]


def _base_strings(index: Index) -> dict[str, tuple[str, list[str]]]:
    return {
        "passages_title": ("title", index.passage_titles),
        "passages_id": ("doc_id", index.passage_ids),
        "chunks": ("text", index.chunk_texts),
        "vocab": ("token", index.vocab.tokens),
        "entities": ("text", index.entities.texts),
    }


#: the phrase a competing writer of an index directory sees in the lock error
INDEX_WRITE = "another write of this index"


def index_fingerprint(index: Index) -> str:
    """Identity of an index's content: its manifest's sha256 when it is unmodified since it was read
    or saved, else a digest of its configuration, encoder and arrays."""
    found = origin(index)
    if found is not None and not found.modified:
        return f"manifest:{found.manifest_sha256}"
    digest = hashlib.sha256(json.dumps([config_to_dict(index.config), index.encoder_name, index.encoder_fingerprint,
                                        index.encoder_backend, index.passage_ids, index.passage_titles], sort_keys=True).encode())
    for name, array in _index_arrays(index).items():
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return f"content:{digest.hexdigest()}"


def _check_target(path: Path) -> bool:
    """Whether index directory `path` holds an index (False: nothing there); refuses anything else."""
    if path.is_symlink() and not path.exists():
        raise TigragError(f"{path}: a symbolic link to nothing; refusing to write an index where it points")
    if path.is_dir() and path.parent.is_dir() and generation_number(path.name) is not None \
            and (path.parent / MANIFEST).is_file():
        raise TigragError(f"{path}: a generation of the index {path.parent}, which is never changed; write to "
                          f"{path.parent} instead")
    home = index_home(path.parent)
    if home is not None:
        raise TigragError(f"{path}: inside the index directory {home}; an index is never written into another "
                          "(nothing was changed): choose a folder outside it")
    if not path.exists():
        return False
    if not path.is_dir():
        raise TigragError(f"{path}: exists and is not an index directory; refusing to overwrite it")
    manifest = path / MANIFEST
    if manifest.is_symlink():
        raise TigragError(f"{manifest}: a symbolic link, not an index's manifest; refusing to overwrite "
                          f"{path} (remove the link, or write the index elsewhere)")
    if not os.path.lexists(manifest):
        entries = sorted(entry.name for entry in path.iterdir())
        if not entries:
            return False  # an empty folder: the new index takes its place
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3:,} more" if len(entries) > 3 else "")
        raise TigragError(f"{path}: a folder that is not an index directory (it holds {shown}); refusing to write an index "
                          "into it, which would mix it with files gpu_tigrag did not write (nothing was changed): "
                          "choose a new or empty folder")
    if not manifest.is_file() or not is_index_manifest(manifest):
        raise TigragError(f"{manifest}: not the manifest of a gpu_tigrag index (nor a damaged one of its pointer); "
                          f"refusing to write an index into {path}, which holds files gpu_tigrag did not write "
                          "(nothing was changed): choose a new or empty folder (if it is an index of yours whose "
                          "manifest was damaged, remove the folder first)")
    return True


def check_index_output(path: str | Path) -> None:
    """Refuse (TigragError, before any work) an index output `-o PATH` that is not new, an empty
    folder or an index: nothing the engine did not write is ever replaced or deleted."""
    raw = os.path.abspath(path)
    if Path(raw).parent == Path(raw):
        raise TigragError(f"-o {path}: the root of the file system cannot be an index directory; choose a folder")
    _check_target(Path(path))


def save_index(index: Index, path: str | Path) -> Path:
    """Write `index` to directory `path` as a new generation (replacing the index there atomically).

    Holds the directory's writer lock; refuses when `index` was read from `path` (or derived from
    an index read from it) and another writer has replaced it since. Removes what a killed save
    left, and the superseded generations no reader holds.
    """
    _check_target(Path(path))  # a dangling link is refused before resolve() would follow it
    target = Path(path).resolve()
    foreign = sorted(set(index.stages) - {m.name for m in stage_methods()})
    if foreign:
        raise TigragError(f"the index holds the stage of {', '.join(foreign)}, a method not installed here; writing "
                          "it would drop that stage, so nothing was written: install the package that provides it")
    with writer_lock(target, INDEX_WRITE):
        exists = _check_target(target)
        check_not_replaced(index, target)
        remove_stale_temporaries(target)  # we hold the lock: no save of this target is under way
        if exists:
            name = _save_generation(index, target)
        else:
            name = generation_name(1)
            with atomic_directory(target) as tmp:
                (tmp / name).mkdir()
                _write_generation(index, tmp / name, str(target))
                commit(tmp, name)
            fsync_folder(target.parent)
        digest = sha256_file(target / name / MANIFEST)
        set_origin(index, Origin(str(target), digest, generation=name))
    return target


def _save_generation(index: Index, target: Path) -> str:
    """Write `index` as the next generation of the index in `target`, commit it, collect the old ones."""
    try:
        remove_leftovers(target)
        name = next_generation(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{name}{TMP_MARK}", dir=target))
        os.chmod(staging, 0o777 & ~process_umask())  # mkdtemp makes it 0700: the finished folder is an ordinary one
    except OSError as exc:
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)})") from None
    try:
        _write_generation(index, staging, str(target))
        os.rename(staging, target / name)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"{target}: cannot write ({describe_os_error(exc)}); nothing was changed there") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        commit(target, name)
    except OutputError:
        shutil.rmtree(target / name, ignore_errors=True)
        raise
    held = collect(target)
    if held:
        log.debug("%s: %s still read by another process; a later write removes it", target, ", ".join(held))
    return name


def _write_generation(index: Index, folder: Path, index_dir: str) -> None:
    """Write every file of `index` and then its manifest into the new generation folder `folder`."""
    source = source_of(index)
    payloads = _stage_payloads(index)
    files: dict[str, dict[str, Any]] = {}
    methods: dict[str, Any] = {}
    base = _base_arrays(index)
    _check_before_write(index, base, index_dir)
    for name, array in base.items():
        files[f"{name}.npy"] = write_npy(folder, f"{name}.npy", array, source, index_dir)
    strings = [(f"{name}.parquet", column, values) for name, (column, values) in _base_strings(index).items()]
    carried: list[tuple[str, Source]] = []
    for method in _stored_stages(index):
        if method.name in payloads:
            arrays, texts = payloads[method.name]
            for name, array in arrays.items():
                files[f"{name}.npy"] = write_npy(folder, f"{name}.npy", array, source, index_dir)
            strings += [(f"{name}.parquet", "text", values) for name, values in texts.items()]
            methods[method.name] = {"config": config_to_dict(getattr(index.config, method.name)),
                                    "stats": index.stage(method.name).stats, "files": method.stage.files}
            continue
        stored = index.stages[method.name].stored  # never read: carried over as it is
        section = stored.section
        methods[method.name] = section
        names = section.get("files") if isinstance(section, dict) else None
        for name in names if isinstance(names, list) else []:
            if isinstance(name, str) and name.endswith(".npy"):
                entry = carry(folder, name, stored.source)
                if entry is not None:
                    files[name] = entry
            elif isinstance(name, str):
                carried.append((name, stored.source))
    for name, column, values in strings:
        files[name] = write_strings(folder, name, column, values, source, index_dir)
    for name, origin_source in carried:
        entry = carry(folder, name, origin_source)
        if entry is not None:
            files[name] = entry
    manifest = {
        "format": "gpu_tigrag-index",
        "format_version": FORMAT_VERSION,
        "package_version": __version__,
        "config": config_to_dict(index.config),
        "config_sha256": sha256_json(config_to_dict(index.config)),
        "encoder": {"name": index.encoder_name, "fingerprint": index.encoder_fingerprint,
                    "backend": index.encoder_backend, "dim": int(index.embeddings.shape[1])},
        "entity_labels": list(ENTITY_LABELS),
        "counts": {"passages": len(index.passage_titles), "chunks": index.n_chunks,
                   "vocab": index.n_vocab, "entities": len(index.entities.texts)},
        "graph_statistics": index.stats,
        "build_seconds": index.timings,
        "files": files,
    }
    if methods:
        manifest["methods"] = methods
    if index.ann is not None:
        manifest[ANN_SECTION] = _write_ann(index, folder, files)
    with open(folder / MANIFEST, "x", encoding="utf-8") as handle:
        json.dump(manifest, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    fsync_folder(folder)


def _check_before_write(index: Index, arrays: dict[str, np.ndarray], index_dir: str) -> None:
    """The checks a load makes (`validate.check_base`), before anything is written: an index that would be
    refused when read (an encoder's vectors not of unit length, ids out of range) is never written."""
    try:
        check_base(Path(index_dir), arrays, passages=len(index.passage_titles), chunks=index.n_chunks,
                   vocab=index.n_vocab, entities=len(index.entities.texts), dim=int(index.embeddings.shape[1]),
                   encoder_backend=index.encoder_backend, repair="nothing was written")
    except IndexFormatError as exc:
        raise TigragError(f"refusing to write an index that a load would refuse: {exc}") from None


def _write_ann(index: Index, folder: Path, files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Put the index's ANN in the new generation `folder` (a stored one is carried over unread, a new one
    written); its manifest section. An ANN of other vectors than the index's is refused."""
    ann: AnnIndex = index.ann
    embeddings = files.get("embeddings.npy")
    if (ann.n_chunks, ann.dim) != tuple(index.embeddings.shape):
        raise TigragError(f"the index's ANN covers {ann.n_chunks} × {ann.dim} vectors, its embeddings are "
                          f"{index.embeddings.shape[0]} × {index.embeddings.shape[1]}; rebuild the ANN "
                          "(gpu_tigrag.index.ann.ann_for) or set index.ann = None; nothing was written")
    if ann.stored is not None:
        source, section = ann.stored
        if section.get("embeddings_sha256") != (embeddings or {}).get("sha256"):
            raise TigragError("the index's ANN was built over other passage vectors than the ones saved; rebuild it "
                              "(gpu_tigrag.index.ann.ann_for) or set index.ann = None; nothing was written")
        entry = carry(folder, ANN_FILE, source)
        if entry is not None:
            files[ANN_FILE] = entry
        return dict(section)
    files[ANN_FILE] = write_ann(ann, lambda fill: write_stream(folder, ANN_FILE, fill))
    return ann.section(embeddings)
