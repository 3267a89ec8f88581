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
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import scipy.sparse

from .. import __version__
from ..atomic import (TMP_MARK, atomic_directory, describe_os_error, fsync_folder, process_umask,
                      remove_stale_temporaries, stale_siblings)
from ..checksums import sha256_file, sha256_json
from ..config import ENTITY_LABELS, IndexConfig, config_from_dict, config_to_dict
from ..errors import IndexFormatError, NotAnIndexError, OutputError, TigragError, WriterLockError
from ..locking import writer_lock
from ..outputs import index_home, is_index_manifest
from ..text.tokens import Vocabulary
from .entities import ChunkEntities
from ..methods.registry import get_method, stage_methods
from .ann import ANN_FILE, SECTION as ANN_SECTION, AnnIndex, read_ann, rebuild_advice, stored_ann, write_ann
from .generation_files import Source, carry, write_npy, write_stream, write_strings
from .generations import (MANIFEST, Snapshot, collect, commit, generation_name, generation_number, next_generation,
                          open_snapshot, remove_leftovers)
from .index import Index, StageLoader
from .stage_arrays import csr_arrays
from .validate import BASE_ARRAYS, check_base, check_strings, read_npy

log = logging.getLogger(__name__)

FORMAT_VERSION = 3  # 2: entity labels per occurrence (entity_chunk_masks); 3: the config's checksum


def _read_strings(path: Path, column: str, repair: str | None = None) -> list[str]:
    """Column `column` of Parquet file `path`: strings without nulls (validate.check_strings), else an
    IndexFormatError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        values = pq.read_table(path, columns=[column]).column(column)
    except (pa.ArrowException, KeyError, OSError) as exc:
        detail = " ".join(str(exc).split())  # one line (Arrow's messages span several)
        raise IndexFormatError(f"{path}: not a readable table with a column {column!r} ({type(exc).__name__}: "
                               f"{detail[:160]}); {repair or REBUILD_INDEX}") from None
    check_strings(path, values, repair or REBUILD_INDEX)
    return values.to_pylist()


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


def _set_origin(index: Index, value: Origin) -> None:
    index.__dict__["_tigrag_origin"] = value


def _source(index: Index) -> Source | None:
    return index.__dict__.get("_tigrag_source")


def derive_origin(parent: Index, child: Index) -> Index:
    """Mark `child`, computed in memory from `parent`, as a modified copy of parent's directory (its
    unchanged files may be linked from the generation parent was read from)."""
    found = origin(parent)
    if found is not None:
        _set_origin(child, dataclasses.replace(found, modified=True))
    if _source(parent) is not None:
        child.__dict__["_tigrag_source"] = _source(parent)
    return child


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
    snapshot = _snapshot(Path(path))
    try:
        _parse_manifest(snapshot)
        yield snapshot.folder, hashlib.sha256(snapshot.manifest_bytes).hexdigest()
    finally:
        snapshot.pin.close()


def generation_folder(path: str | Path) -> Path:
    """The folder holding the files and manifest of the current generation of index directory `path`
    (the directory itself for an index written before generations). For inspection: a writer may
    supersede it at any time; `load_index` pins what it reads."""
    snapshot = _snapshot(Path(path))
    snapshot.pin.close()
    return snapshot.folder


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


def _check_not_replaced(index: Index, target: Path) -> None:
    found = origin(index)
    if found is None or found.path != str(target):
        return
    current = manifest_sha256(target)
    if current is not None and current != found.manifest_sha256:
        raise WriterLockError(f"{target}: another writer saved this index after it was read; saving now would "
                              "lose that write, so nothing was written: load the index again and redo the change")


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
        _check_not_replaced(index, target)
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
        _set_origin(index, Origin(str(target), digest, generation=name))
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
    source = _source(index)
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


# ---- reading -------------------------------------------------------------------------------------

def read_manifest(path: str | Path) -> dict[str, Any]:
    """The validated manifest of the current generation of index directory `path`."""
    snapshot = _snapshot(Path(path))
    snapshot.pin.close()
    return _parse_manifest(snapshot)


def _snapshot(path: Path) -> Snapshot:
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


def _parse_manifest(snapshot: Snapshot) -> dict[str, Any]:
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


def _checked(folder: Path, source: Source, name: str, verify: bool, repair: str) -> Path:
    entry = source.files.get(name)
    file = folder / name
    if not isinstance(entry, dict):
        raise IndexFormatError(f"{folder / MANIFEST}: does not list {name}; {repair}")
    if file.is_symlink():  # a generation holds files of its own: a link would read whatever it points to
        raise IndexFormatError(f"{file}: a symbolic link, not a file of the index; {repair}")
    if not file.is_file():
        raise IndexFormatError(f"{file}: missing from the index directory; {repair}")
    size = file.stat().st_size
    if size != entry.get("bytes"):
        raise IndexFormatError(f"{file}: size {size} differs from the manifest's {entry.get('bytes')}, the file is "
                               f"damaged; {repair}")
    if verify:
        if sha256_file(file) != entry.get("sha256"):
            raise IndexFormatError(f"{file}: checksum mismatch, the file is damaged; {repair}")
        source.verified.add(name)
    return file


def _finite(file: Path, array: np.ndarray, repair: str, required: bool = True) -> np.ndarray:
    """`array`, or an IndexFormatError when a float array holds NaN or infinity (a stored NaN would
    rank by position, silently); a stage's `nan_padded` arrays may hold NaN (`required` False)."""
    if required and array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int(array.size - np.isfinite(array).sum())
        raise IndexFormatError(f"{file}: {bad} of its {array.size} values are NaN or infinite; the array is "
                               f"damaged; {repair}")
    return array


REBUILD_INDEX = "rebuild the index"


def rebuild_stage(index_dir: str | Path, method: str) -> str:
    """The advice a damaged stage of `method` gives."""
    return f"rebuild the {method} stage with `tigrag extend {index_dir} --methods {method}`"


def load_index(path: str | Path, verify_checksums: bool = True, validate: bool = True) -> Index:
    """Load and validate the current generation of the index in directory `path` (pinned until the
    returned Index is gone: stages read later come from the same generation). Every base array is
    checked by meaning (`validate.check_base`: dtypes, id ranges, offsets, values, unit vectors);
    `validate=False` skips those checks, for measuring their cost only (bench/load_checks.py)."""
    path = Path(path)
    snapshot = _snapshot(path)
    manifest = _parse_manifest(snapshot)
    folder = snapshot.folder
    source = Source(str(path.resolve()), folder, manifest["files"], snapshot.pin)

    def load_npy(name: str, finite: bool = True, repair: str = REBUILD_INDEX) -> np.ndarray:
        file = _checked(folder, source, f"{name}.npy", verify_checksums, repair)
        return _finite(file, read_npy(file, repair), repair, finite)  # header checked before allocating

    def strings(name: str, column: str, repair: str = REBUILD_INDEX) -> list[str]:
        file = _checked(folder, source, f"{name}.parquet", verify_checksums, repair)
        return _read_strings(file, column, repair)

    try:
        config = config_from_dict(IndexConfig, manifest["config"])
        vocab = Vocabulary(strings("vocab", "token"))
        chunk_texts = strings("chunks", "text")
        n_chunks, n_vocab = len(chunk_texts), len(vocab)
        titles, ids = strings("passages_title", "title"), strings("passages_id", "doc_id")
        entity_texts = strings("entities", "text")
        if len(ids) != len(titles):
            raise IndexFormatError(f"{folder / 'passages_id.parquet'}: {len(ids):,} passage ids for {len(titles):,} "
                                   f"titles (passages_title.parquet); {REBUILD_INDEX}")
        arrays = {name: load_npy(name) for name in BASE_ARRAYS}
        if validate:  # before any kernel, or scipy, sees them (validate.py)
            check_base(folder, arrays, passages=len(titles), chunks=n_chunks, vocab=n_vocab,
                       entities=len(entity_texts), dim=manifest["encoder"].get("dim"),
                       encoder_backend=manifest["encoder"].get("backend", "torch"), repair=REBUILD_INDEX)

        def csr(prefix: str, shape: tuple[int, int]) -> scipy.sparse.csr_matrix:
            return scipy.sparse.csr_matrix(
                (arrays[f"{prefix}_data"], arrays[f"{prefix}_indices"], arrays[f"{prefix}_indptr"]), shape=shape
            )

        index = Index(
            config=config,
            passage_titles=titles,
            passage_ids=ids,
            chunk_texts=chunk_texts,
            chunk_passage=arrays["chunk_passage"],
            vocab=vocab,
            token_indptr=arrays["token_indptr"],
            token_ids=arrays["token_ids"],
            graph=csr("graph", (n_vocab, n_vocab)),
            bm25=csr("bm25", (n_chunks, n_vocab)),
            embeddings=arrays["embeddings"],
            entities=ChunkEntities(
                texts=entity_texts,
                chunk_indptr=arrays["entity_chunk_indptr"],
                chunk_ids=arrays["entity_chunk_ids"],
                chunk_masks=arrays["entity_chunk_masks"],
                token_indptr=arrays["entity_token_indptr"],
                token_ids=arrays["entity_token_ids"],
            ),
            encoder_name=manifest["encoder"]["name"],
            encoder_fingerprint=manifest["encoder"]["fingerprint"],
            encoder_backend=manifest["encoder"].get("backend", "torch"),
            stats=manifest.get("graph_statistics", {}),
            timings=manifest.get("build_seconds", {}),
        )
    except IndexFormatError:
        raise
    except (KeyError, TypeError, ValueError, TigragError) as exc:
        raise IndexFormatError(f"{folder}: inconsistent index ({type(exc).__name__}: {exc}); rebuild it") from None
    _check_shapes(folder, index)
    sections = manifest.get("methods")
    for name in sections if isinstance(sections, dict) else {}:
        stored = StoredStage(source, sections[name])
        try:
            method = get_method(name)
        except TigragError:
            log.warning("%s holds a stage of method %r, which is not installed here; it is ignored", path, name)
            index.stages[name] = StageLoader(name, functools.partial(_not_installed, path, name), stored)
            continue
        if method.stage is not None:
            index.stages[name] = StageLoader(name, functools.partial(
                _load_stage, path, folder, sections[name], method, load_npy, strings), stored)
    if ANN_SECTION in manifest:
        index.ann = _stored_ann(path, folder, source, manifest, index, verify_checksums)
    index.__dict__["_tigrag_source"] = source
    _set_origin(index, Origin(str(path.resolve()), hashlib.sha256(snapshot.manifest_bytes).hexdigest(),
                              generation=snapshot.generation))
    return index


def _stored_ann(path: Path, folder: Path, source: Source, manifest: dict[str, Any], index: Index,
                verify: bool) -> AnnIndex:
    """The index's stored ANN, its file read and checked (size, sha256, FAISS parse, shape) when the
    dense first stage first uses it, so a damaged ANN fails only the searches that use it, naming the
    file and the command that rebuilds it (a damaged manifest section too)."""
    repair = rebuild_advice(path)
    n, dim = index.embeddings.shape
    section = manifest[ANN_SECTION]
    embeddings = manifest["files"].get("embeddings.npy")
    embeddings_sha256 = embeddings.get("sha256") if isinstance(embeddings, dict) else None

    def read() -> Any:
        file = _checked(folder, source, ANN_FILE, verify, repair)
        return read_ann(file, section, n, dim, repair)

    try:
        return stored_ann(section, n, dim, embeddings_sha256, read, source, str(folder / MANIFEST), repair)
    except IndexFormatError as exc:
        error = exc

        def fail() -> Any:
            raise error

        kind = section.get("kind") if isinstance(section, dict) else None
        return AnnIndex(str(kind), index.config.ann, n, dim, _read=fail,
                        stored=(source, section) if isinstance(section, dict) else None)


@dataclasses.dataclass(frozen=True)
class StoredStage:
    """Where a stage not read yet is: the generation it is in and its manifest section."""

    source: Source
    section: Any


def _not_installed(path: Path, name: str, index: Index) -> Any:
    raise TigragError(f"{path} holds a stage of method {name!r}, which is not installed here; install the "
                      "package that provides it")


def _load_stage(path: Path, folder: Path, section: Any, method: Any, load_npy: Callable[..., np.ndarray],
                strings: Callable[..., list[str]], index: Index) -> Any:
    """`method`'s stage as the manifest lists it, for `index`: its configuration must parse and equal
    the index's settings of that stage, and every file is checked (size, checksum, finite values)
    and validated by the method. Any damage names the command that rebuilds the stage."""
    repair = rebuild_stage(path, method.name)
    try:
        config = config_from_dict(method.stage.config, section["config"])
    except (KeyError, TypeError, TigragError) as exc:
        raise IndexFormatError(f"{folder / MANIFEST}: methods.{method.name} has no valid configuration ({exc}); "
                               f"{repair}") from None
    if config != getattr(index.config, method.name):
        raise IndexFormatError(f"{folder / MANIFEST}: methods.{method.name}.config differs from the index's "
                               f"{method.name} settings; {repair}")
    try:
        arrays = {name: load_npy(name, name not in method.stage.nan_padded, repair) for name in method.stage.arrays}
        texts = {name: strings(name, "text", repair) for name in method.stage.strings}
        return method.stage.from_arrays(arrays, texts, index, config, section.get("stats", {}), folder)
    except IndexFormatError as exc:
        if "tigrag extend" in str(exc):
            raise
        raise IndexFormatError(f"{exc}; {repair}") from None


def _check_shapes(path: Path, index: Index) -> None:
    n = index.n_chunks
    problems = []
    if index.embeddings.ndim != 2 or index.embeddings.shape[0] != n:
        problems.append(f"embeddings have shape {index.embeddings.shape}, expected ({n}, dim)")
    if index.chunk_passage.shape != (n,) or (n and int(index.chunk_passage.max()) >= len(index.passage_titles)):
        problems.append("chunk -> passage map does not match the passages")
    if index.token_indptr.shape != (n + 1,) or index.entities.chunk_indptr.shape != (n + 1,):
        problems.append("token or entity tables do not have one row per chunk")
    ents = index.entities
    if ents.chunk_masks.shape != ents.chunk_ids.shape or ents.chunk_ids.size != int(ents.chunk_indptr[-1]):
        problems.append("entity occurrences and their labels do not line up")
    if ents.chunk_ids.size and int(ents.chunk_ids.max()) >= len(ents.texts):
        problems.append("an entity occurrence points past the entity table")
    if problems:
        raise IndexFormatError(f"{path}: inconsistent index: {'; '.join(problems)}; rebuild it")
