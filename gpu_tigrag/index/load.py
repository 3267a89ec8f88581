"""Reading an index directory: the current generation, pinned, every file checked against the
manifest (size, sha256, finite values) and every base array validated by meaning (`validate.py`)
before anything uses it; a method's stage and the ANN are read on first use, so a damaged one fails
only what uses it, naming the command that rebuilds it. Nothing is unpickled or executed from disk."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse

from ..checksums import sha256_file
from ..config import IndexConfig, config_from_dict
from ..errors import IndexFormatError, TigragError
from ..methods.registry import get_method
from ..text.tokens import Vocabulary
from .ann import ANN_FILE, SECTION as ANN_SECTION, AnnIndex, read_ann, rebuild_advice, stored_ann
from .entities import ChunkEntities
from .generation_files import Source
from .generations import MANIFEST
from .index import Index, StageLoader
from .manifest import parse_manifest, snapshot_of
from .provenance import Origin, set_origin
from .validate import BASE_ARRAYS, check_base, check_strings, read_npy

log = logging.getLogger(__name__)


REBUILD_INDEX = "rebuild the index"


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


def rebuild_stage(index_dir: str | Path, method: str) -> str:
    """The advice a damaged stage of `method` gives."""
    return f"rebuild the {method} stage with `tigrag extend {index_dir} --methods {method}`"


def load_index(path: str | Path, verify_checksums: bool = True, validate: bool = True) -> Index:
    """Load and validate the current generation of the index in directory `path` (pinned until the
    returned Index is gone: stages read later come from the same generation). Every base array is
    checked by meaning (`validate.check_base`: dtypes, id ranges, offsets, values, unit vectors);
    `validate=False` skips those checks, for measuring their cost only (bench/load_checks.py)."""
    path = Path(path)
    snapshot = snapshot_of(path)
    manifest = parse_manifest(snapshot)
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
    set_origin(index, Origin(str(path.resolve()), hashlib.sha256(snapshot.manifest_bytes).hexdigest(),
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
