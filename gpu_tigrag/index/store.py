"""On-disk index format: a directory of `.npy` and Parquet files plus `manifest.json`.

manifest.json holds the format version, package version, configuration, counts, token-graph
statistics, encoder identity, build timings and the sha256 and size of every file. The
directory is written under a temporary name beside the target and renamed into place,
so a crash never leaves a half-written index. Loading checks the format version and every
checksum, reads `.npy` with allow_pickle=False and never executes code from disk.

Writers hold the directory's lock (`DIR.lock`, see `locking.py`): a second writer fails with
a clear error. A loaded index remembers the manifest it was read from (`origin`), and saving
it, or an index derived from it by `add_passages`, back to that directory is refused when
another writer replaced the directory meanwhile (no lost update). Temporary folders left by
a killed save are removed by the next save.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import json
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse

from .. import __version__
from ..atomic import atomic_directory, remove_stale_temporaries, stale_siblings
from ..checksums import sha256_file, sha256_json
from ..config import ENTITY_LABELS, IndexConfig, config_from_dict, config_to_dict
from ..errors import IndexFormatError, NotAnIndexError, TigragError, WriterLockError
from ..locking import writer_lock
from ..text.tokens import Vocabulary
from .entities import ChunkEntities
from ..methods.registry import get_method, stage_methods
from .index import Index, StageLoader
from .stage_arrays import csr_arrays

log = logging.getLogger(__name__)

FORMAT_VERSION = 3  # 2: entity labels per occurrence (entity_chunk_masks); 3: the config's checksum
MANIFEST = "manifest.json"


def _write_strings(path: Path, column: str, values: list[str]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({column: pa.array(values, type=pa.string())}), path)


def _read_strings(path: Path, column: str) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(path, columns=[column]).column(column).to_pylist()


def _stage_payloads(index: Index) -> dict[str, tuple[dict[str, np.ndarray], dict[str, list[str]]]]:
    """(arrays, string columns) of every stage the index holds, each stage converted once."""
    return {m.name: m.stage.to_arrays(index.stage(m.name)) for m in _stored_stages(index)}


def _index_arrays(index: Index, payloads: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
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
    payloads = _stage_payloads(index) if payloads is None else payloads
    for method in _stored_stages(index):
        arrays.update(payloads[method.name][0])
    return arrays


def _stored_stages(index: Index) -> list[Any]:
    """The registered methods whose stage `index` holds, in registry order."""
    return [m for m in stage_methods() if index.has_stage(m.name)]


def _methods_section(index: Index) -> dict[str, Any]:
    """The manifest's `methods`: each built method stage's configuration, statistics and files."""
    return {m.name: {"config": config_to_dict(getattr(index.config, m.name)), "stats": index.stage(m.name).stats,
                     "files": m.stage.files} for m in _stored_stages(index)}


def _index_strings(index: Index, payloads: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    return {
        "passages_title": ("title", index.passage_titles),
        "passages_id": ("doc_id", index.passage_ids),
        "chunks": ("text", index.chunk_texts),
        "vocab": ("token", index.vocab.tokens),
        "entities": ("text", index.entities.texts),
        **{name: ("text", values) for m in _stored_stages(index)
           for name, values in payloads[m.name][1].items()},
    }


#: the phrase a competing writer of an index directory sees in the lock error
INDEX_WRITE = "another write of this index"


@dataclasses.dataclass(frozen=True)
class Origin:
    """The index directory an Index was read from (or saved to) and the sha256 of its manifest then."""

    path: str
    manifest_sha256: str
    modified: bool = False  # derived in memory (e.g. by add_passages): no longer what the files hold


def origin(index: Index) -> Origin | None:
    """Where `index` was read from or saved to, if anywhere."""
    return index.__dict__.get("_tigrag_origin")


def _set_origin(index: Index, value: Origin) -> None:
    index.__dict__["_tigrag_origin"] = value


def derive_origin(parent: Index, child: Index) -> Index:
    """Mark `child`, computed in memory from `parent`, as a modified copy of parent's directory."""
    found = origin(parent)
    if found is not None:
        _set_origin(child, dataclasses.replace(found, modified=True))
    return child


def manifest_sha256(path: str | Path) -> str | None:
    """sha256 of the manifest of index directory `path` (None when it has none)."""
    file = Path(path) / MANIFEST
    return sha256_file(file) if file.is_file() else None


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


def save_index(index: Index, path: str | Path) -> Path:
    """Write `index` to directory `path` atomically (replacing an existing index there).

    Holds the directory's writer lock; refuses when `index` was read from `path` (or derived from
    an index read from it) and another writer has replaced it since. Removes temporary folders
    that a killed save left beside `path`.
    """
    target = Path(path).resolve()
    foreign = sorted(set(index.stages) - {m.name for m in stage_methods()})
    if foreign:
        raise TigragError(f"the index holds the stage of {', '.join(foreign)}, a method not installed here; writing "
                          "it would drop that stage, so nothing was written: install the package that provides it")
    with writer_lock(target, INDEX_WRITE):
        if target.exists() and not (target / MANIFEST).is_file():
            raise TigragError(f"{target}: exists and is not an index directory; refusing to overwrite it")
        _check_not_replaced(index, target)
        remove_stale_temporaries(target)  # we hold the lock: no save of this target is under way
        _write_directory(index, target)
        _set_origin(index, Origin(str(target), manifest_sha256(target) or ""))
    return target


def _write_directory(index: Index, target: Path) -> None:
    with atomic_directory(target) as tmp:
        files: dict[str, dict[str, Any]] = {}
        payloads = _stage_payloads(index)
        for name, array in _index_arrays(index, payloads).items():
            np.save(tmp / f"{name}.npy", array, allow_pickle=False)
            files[f"{name}.npy"] = {}
        for name, (column, values) in _index_strings(index, payloads).items():
            _write_strings(tmp / f"{name}.parquet", column, values)
            files[f"{name}.parquet"] = {}
        for name in files:
            files[name] = {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
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
        methods = _methods_section(index)
        if methods:
            manifest["methods"] = methods
        with open(tmp / MANIFEST, "w", encoding="utf-8") as handle:
            json.dump(manifest, handle, indent=2)
            handle.flush()
            os.fsync(handle.fileno())


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The validated manifest of index directory `path`."""
    return _read_manifest(Path(path))[0]


def _read_manifest(path: Path) -> tuple[dict[str, Any], str]:
    """(validated manifest, sha256 of its bytes) of index directory `path`."""
    manifest_path = path / MANIFEST
    if not path.is_dir():
        moved = [p for p in stale_siblings(path.resolve()) if ".old-" in p.name] if path.parent.is_dir() else []
        if moved:
            raise IndexFormatError(f"{path}: missing; a save was killed after moving the previous index to "
                                   f"{moved[-1]}: rename it back, or write the index again")
        raise NotAnIndexError(f"{path}: no such index directory (build one with `tigrag index`)")
    if not manifest_path.is_file():
        raise NotAnIndexError(f"{path}: not an index directory ({MANIFEST} is missing)")
    try:
        raw = manifest_path.read_bytes()
        manifest = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IndexFormatError(f"{manifest_path}: damaged manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "gpu_tigrag-index":
        raise IndexFormatError(f"{manifest_path}: not a gpu_tigrag index manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{path}: index format version {version} is not supported by gpu_tigrag {__version__} "
            f"(expects {FORMAT_VERSION}); rebuild the index with `tigrag index`"
        )
    if manifest.get("config_sha256") != sha256_json(manifest.get("config")):
        raise IndexFormatError(f"{manifest_path}: the stored configuration does not match its checksum "
                               "(the manifest was edited or damaged); rebuild the index")
    if manifest.get("entity_labels") != list(ENTITY_LABELS):
        raise IndexFormatError(f"{manifest_path}: entity label table differs from this version's; rebuild the index")
    return manifest, hashlib.sha256(raw).hexdigest()


def _checked(path: Path, manifest: dict[str, Any], name: str, verify: bool) -> Path:
    entry = manifest.get("files", {}).get(name)
    file = path / name
    if entry is None:
        raise IndexFormatError(f"{path}: manifest does not list {name}")
    if not file.is_file():
        raise IndexFormatError(f"{file}: missing from the index directory")
    if file.stat().st_size != entry["bytes"]:
        raise IndexFormatError(f"{file}: size {file.stat().st_size} differs from the manifest's {entry['bytes']}")
    if verify and sha256_file(file) != entry["sha256"]:
        raise IndexFormatError(f"{file}: checksum mismatch, the file is damaged; rebuild the index")
    return file


def _finite(file: Path, array: np.ndarray, required: bool = True) -> np.ndarray:
    """`array`, or an IndexFormatError when a float array holds NaN or infinity (a stored NaN would
    rank by position, silently); a stage's `nan_padded` arrays may hold NaN (`required` False)."""
    if required and array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int(array.size - np.isfinite(array).sum())
        raise IndexFormatError(f"{file}: {bad} of its {array.size} values are NaN or infinite; the array is damaged "
                               "(rebuild the index, or its method stage with `tigrag extend`)")
    return array


def load_index(path: str | Path, verify_checksums: bool = True) -> Index:
    """Load and validate the index in directory `path`."""
    path = Path(path)
    manifest, manifest_digest = _read_manifest(path)
    load_npy: Callable[..., np.ndarray] = lambda name, finite=True: _finite(path / f"{name}.npy", np.load(
        _checked(path, manifest, f"{name}.npy", verify_checksums), allow_pickle=False
    ), finite)
    strings: Callable[[str, str], list[str]] = lambda name, column: _read_strings(
        _checked(path, manifest, f"{name}.parquet", verify_checksums), column
    )
    try:
        config = config_from_dict(IndexConfig, manifest["config"])
        vocab = Vocabulary(strings("vocab", "token"))
        chunk_texts = strings("chunks", "text")
        n_chunks, n_vocab = len(chunk_texts), len(vocab)

        def csr(prefix: str, shape: tuple[int, int]) -> scipy.sparse.csr_matrix:
            return scipy.sparse.csr_matrix(
                (load_npy(f"{prefix}_data"), load_npy(f"{prefix}_indices"), load_npy(f"{prefix}_indptr")), shape=shape
            )

        index = Index(
            config=config,
            passage_titles=strings("passages_title", "title"),
            passage_ids=strings("passages_id", "doc_id"),
            chunk_texts=chunk_texts,
            chunk_passage=load_npy("chunk_passage"),
            vocab=vocab,
            token_indptr=load_npy("token_indptr"),
            token_ids=load_npy("token_ids"),
            graph=csr("graph", (n_vocab, n_vocab)),
            bm25=csr("bm25", (n_chunks, n_vocab)),
            embeddings=load_npy("embeddings"),
            entities=ChunkEntities(
                texts=strings("entities", "text"),
                chunk_indptr=load_npy("entity_chunk_indptr"),
                chunk_ids=load_npy("entity_chunk_ids"),
                chunk_masks=load_npy("entity_chunk_masks"),
                token_indptr=load_npy("entity_token_indptr"),
                token_ids=load_npy("entity_token_ids"),
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
        raise IndexFormatError(f"{path}: inconsistent index ({type(exc).__name__}: {exc}); rebuild it") from None
    _check_shapes(path, index)
    for name in manifest.get("methods") or {}:
        try:
            method = get_method(name)
        except TigragError:
            log.warning("%s holds a stage of method %r, which is not installed here; it is ignored", path, name)
            index.stages[name] = StageLoader(name, functools.partial(_not_installed, path, name))
            continue
        if method.stage is not None:
            index.stages[name] = StageLoader(name, functools.partial(
                _load_stage, path, manifest, index, method, load_npy, strings))
    _set_origin(index, Origin(str(path.resolve()), manifest_digest))
    return index


def _not_installed(path: Path, name: str) -> Any:
    raise TigragError(f"{path} holds a stage of method {name!r}, which is not installed here; install the "
                      "package that provides it")


def _load_stage(path: Path, manifest: dict[str, Any], index: Index, method: Any,
                load_npy: Callable[[str], np.ndarray], strings: Callable[[str, str], list[str]]) -> Any:
    """`method`'s stage as the manifest lists it: its configuration must parse and equal the index's
    settings of that stage, and every file is checked (size, checksum) and validated by the method."""
    section = manifest["methods"][method.name]
    try:
        config = config_from_dict(method.stage.config, section["config"])
    except (KeyError, TypeError, TigragError) as exc:
        raise IndexFormatError(f"{path / MANIFEST}: methods.{method.name} has no valid configuration ({exc}); "
                               "rebuild the stage with `tigrag extend`") from None
    if config != getattr(index.config, method.name):
        raise IndexFormatError(f"{path / MANIFEST}: methods.{method.name}.config differs from the index's "
                               f"{method.name} settings; rebuild the stage with `tigrag extend`")
    arrays = {name: load_npy(name, name not in method.stage.nan_padded) for name in method.stage.arrays}
    texts = {name: strings(name, "text") for name in method.stage.strings}
    return method.stage.from_arrays(arrays, texts, index, config, section.get("stats", {}), path)


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
