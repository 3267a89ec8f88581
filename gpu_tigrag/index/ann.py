"""The ANN index of the chunk vectors: a FAISS index (IVF-Flat or HNSW-Flat, inner product on the unit
vectors = cosine) built with the index, stored in its generation as one file and read on first use.

Why FAISS, and which index: bench/results/ann.md (build seconds, bytes, recall against exact search
and queries/s measured side by side). `ann.kind` chooses it (`config.AnnConfig`); "auto" builds one
only at or above `ann.min_chunks` chunks, the measured size where exact search stops being the
better choice. Every build path asks `ann_for(index)` after the base arrays exist, so the in-memory
build, `add` and `--stream` give an index with the ANN its settings ask for, and `tigrag extend
INDEX --ann` adds (or rebuilds, or drops) one without rebuilding anything else.

On disk: `ann.faiss`, FAISS's own binary format written by `faiss.write_index` through a callback
(so its sha256 is computed as it is written, like every file of a generation), listed in the
manifest's `files` with its sha256 and size and described by the manifest's `ann` section. It is
never a pickle: a load checks its size and checksum first, then `faiss.read_index` parses it, and
the parsed index must hold one vector of the index's dimension per chunk. faiss is imported only
when an ANN is built or read, so an index without one never needs it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import AnnConfig, config_to_dict
from ..errors import IndexFormatError, TigragError

log = logging.getLogger(__name__)

#: the ANN's file in a generation, and the manifest section describing it
ANN_FILE = "ann.faiss"
SECTION = "ann"
#: IVF: training vectors per inverted list (FAISS warns below 39; more costs k-means time for little gain)
TRAIN_PER_LIST = 64
#: the setting that searches exactly instead, named by every error about a missing faiss
EXACT_SETTING = "--set dense.search=exact"


def import_faiss(why: str) -> Any:
    """The faiss module, or a one-line TigragError saying `why` it is needed and what avoids it."""
    try:
        import faiss
    except ImportError as exc:
        raise TigragError(f"{why}, but faiss cannot be imported ({exc}); install faiss-cpu, or search exactly with "
                          f"{EXACT_SETTING}") from None
    return faiss


def rebuild_advice(index_dir: Any) -> str:
    """What fixes a damaged or stale ANN."""
    return f"rebuild it with `tigrag extend {index_dir} --ann`, or search exactly with {EXACT_SETTING}"


@dataclasses.dataclass
class AnnIndex:
    """An ANN over an index's `n_chunks` × `dim` unit vectors: built here (`_faiss` set) or stored in a
    generation and read on first use (`_read`); `stored` = (Source, manifest section) of a stored one,
    so a save carries its file over unread instead of writing it again."""

    kind: str  # "ivf" or "hnsw"
    config: AnnConfig
    n_chunks: int
    dim: int
    seconds: float = 0.0
    params: dict[str, Any] = dataclasses.field(default_factory=dict)  # resolved build parameters (nlist, M)
    _faiss: Any = None
    _read: Callable[[], Any] | None = None
    stored: tuple[Any, dict[str, Any]] | None = None

    def faiss_index(self) -> Any:
        """The FAISS index, read and validated on the first call for a stored one."""
        if self._faiss is None:
            if self._read is None:
                raise TigragError("this ANN holds no FAISS index and no file to read it from")
            self._faiss = self._read()
        return self._faiss

    def section(self, embeddings_entry: dict[str, Any] | None) -> dict[str, Any]:
        """The manifest's `ann` section describing this ANN (`embeddings_entry`: the manifest entry of the
        vectors it was built over, recorded so that a load can tell a stale ANN)."""
        return {"kind": self.kind, "config": config_to_dict(self.config), "chunks": self.n_chunks, "dim": self.dim,
                "params": dict(self.params), "build_seconds": round(self.seconds, 3),
                "embeddings_sha256": (embeddings_entry or {}).get("sha256"), "files": [ANN_FILE]}


def _nlist(config: AnnConfig, n: int) -> int:
    """IVF lists: the setting, or 4·√n (FAISS's guideline), never more than the vectors."""
    return max(1, min(n, config.nlist or int(round(4 * np.sqrt(n)))))


def build_ann(embeddings: np.ndarray, config: AnnConfig, kind: str | None = None) -> AnnIndex | None:
    """The ANN of `kind` (default: what `config` asks for at this size) over the unit rows of
    `embeddings`; None for "none"."""
    n, dim = embeddings.shape
    kind = kind or config.kind_for(n)
    if kind == "none":
        return None
    faiss = import_faiss(f"ann.kind={config.kind} asks for an ANN index ({kind})")
    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    start = time.perf_counter()
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, config.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = config.ef_construction
        index.add(vectors)
        params = {"M": config.hnsw_m, "efConstruction": config.ef_construction}
    elif kind == "ivf":
        nlist = _nlist(config, n)
        index = faiss.index_factory(dim, f"IVF{nlist},Flat", faiss.METRIC_INNER_PRODUCT)
        sample = min(n, TRAIN_PER_LIST * nlist)
        rows = np.sort(np.random.default_rng(config.seed).choice(n, size=sample, replace=False)) if sample < n \
            else np.arange(n)
        index.cp.seed = config.seed
        index.cp.min_points_per_centroid = 1  # small corpora: no warning, the sample is what there is
        index.train(vectors[rows])
        index.add(vectors)
        params = {"nlist": nlist, "train_vectors": int(sample)}
    else:
        raise TigragError(f"unknown ANN kind {kind!r} (ann.kind: auto, none, hnsw, ivf)")
    seconds = time.perf_counter() - start
    log.info("built the %s ANN of %s chunks in %.1f s", kind, f"{n:,}", seconds)
    return AnnIndex(kind, config, n, dim, seconds, params, _faiss=index)


def ann_for(index: Any) -> AnnIndex | None:
    """The ANN `index` should hold by its settings (`index.config.ann` at its size), built over its
    vectors, None when they ask for none; the build's seconds go to `index.timings["ann"]`."""
    ann = build_ann(index.embeddings, index.config.ann)
    if ann is not None:
        index.timings["ann"] = ann.seconds
    return ann


def with_ann(index: Any, config: AnnConfig) -> Any:
    """A copy of `index` holding the ANN `config` asks for (`tigrag extend INDEX --ann`), whatever the
    index's size: "auto" builds the automatic kind and records it as that kind, so `add` and
    `--stream` rebuild it; "none" drops the ANN. Nothing else is rebuilt, and the copy remembers the
    directory `index` was read from (a modified index: saving it back checks no one replaced it)."""
    from ..config import AUTO_ANN_KIND
    from .provenance import derive_origin

    if config.kind == "auto":
        config = dataclasses.replace(config, kind=AUTO_ANN_KIND)
    grown = dataclasses.replace(index, config=dataclasses.replace(index.config, ann=config),
                                timings=dict(index.timings), ann=None)
    grown.ann = ann_for(grown)
    return derive_origin(index, grown)


def write_ann(ann: AnnIndex, write: Callable[[Callable[[Any], None]], dict[str, Any]]) -> dict[str, Any]:
    """Write `ann`'s FAISS index through `write(fill)` (generation_files.write_stream: `fill(tee)` writes
    the bytes to a hashing file object); its manifest entry."""
    faiss = import_faiss(f"writing the {ann.kind} ANN index")
    index = ann.faiss_index()

    def fill(tee: Any) -> None:
        def chunk(data: bytes) -> int:
            tee.write(data)
            return len(data)

        writer = faiss.PyCallbackIOWriter(chunk)
        faiss.write_index(index, writer)
        del writer  # flushes its last buffer

    return write(fill)


def read_ann(file: Path, section: dict[str, Any], n_chunks: int, dim: int, repair: str) -> Any:
    """The FAISS index in `file` (checked by the caller against the manifest's size and sha256); an
    IndexFormatError naming the file when it does not parse or does not fit the index's vectors."""
    faiss = import_faiss(f"{file.parent.parent}: the index holds an ANN index ({file.name})")
    try:
        index = faiss.read_index(str(file))
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IndexFormatError(f"{file}: not a readable FAISS index ({first[:200]}); {repair}") from None
    kind = section.get("kind")
    expected = {"hnsw": "IndexHNSWFlat", "ivf": "IndexIVFFlat"}.get(kind)
    if expected is None or type(index).__name__ != expected:
        raise IndexFormatError(f"{file}: a {type(index).__name__}, not the {kind} ANN the manifest describes; {repair}")
    if index.ntotal != n_chunks or index.d != dim or index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise IndexFormatError(f"{file}: holds {index.ntotal} vectors of dimension {index.d}, the index "
                               f"{n_chunks} of dimension {dim}; {repair}")
    return index


def stored_ann(section: Any, n_chunks: int, dim: int, embeddings_sha256: Any, read: Callable[[], Any],
               source: Any, where: str, repair: str) -> AnnIndex:
    """The AnnIndex the manifest's `ann` section describes, its FAISS index read by `read()` on first
    use; an IndexFormatError naming the manifest when the section is damaged or the ANN was built over
    other vectors than the index's."""
    from ..config import config_from_dict

    try:
        config = config_from_dict(AnnConfig, section["config"])
        kind, chunks, width = section["kind"], int(section["chunks"]), int(section["dim"])
        if kind not in ("hnsw", "ivf"):
            raise ValueError(f"kind {kind!r}")
    except (KeyError, TypeError, ValueError, TigragError) as exc:
        raise IndexFormatError(f"{where}: the ann section is damaged ({exc}); {repair}") from None
    if (chunks, width) != (n_chunks, dim) or section.get("embeddings_sha256") != embeddings_sha256:
        raise IndexFormatError(f"{where}: the ANN index was built over other vectors ({chunks} × {width}) than the "
                               f"index's ({n_chunks} × {dim}); {repair}")
    return AnnIndex(kind, config, chunks, width, float(section.get("build_seconds") or 0.0),
                    dict(section.get("params") or {}), _read=read, stored=(source, section))
