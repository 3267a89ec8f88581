"""LiteSemRAG's semantic nodes: prototypes of each string's contextual vectors (paper 3.2 "Dynamic
semantic node creation"; docs/design-notes.md#litesemrag-index), built in one shot over all occurrences.

Per string t with m occurrences (unit vectors e_i):

- m < `min_occurrences`: one prototype, normalize(mean e_i).
- m >= `min_occurrences`, t a single word and mean_i cos(e_i, μ) > τ_conc (μ the normalised mean):
  one prototype (a concentrated word has one sense).
- otherwise HDBSCAN(min_cluster_size = max(2, m // cluster_divisor)) on PCA(`pca_dimensions`) of the
  e_i, with the neighbourhood of the `hdbscan` package the public code uses: its default
  min_samples (= min_cluster_size) counts the neighbours without the point, scikit-learn's with
  it, so here scikit-learn's `HDBSCAN(min_samples=min_cluster_size + min_samples_offset)`, offset 1
  by default (on MuSiQue-100 it then gives the package's clusters for 6 of the 7 strings clustered;
  the 7th differs by the package's Borůvka tree, whose ties the package's own exact algorithm
  breaks as scikit-learn does: bench/results/faithfulness_litesemrag.md). Each cluster becomes a
  prototype (normalised mean of its members); HDBSCAN's noise points go to their nearest
  prototype by cosine (the code's final state: its re-clustering of anomalies is dead code, so
  every anomaly ends in its nearest prototype). No cluster: one prototype.
- `chunk_aggregation` (paper 3.2 "chunk-level context aggregation", off in the code) clusters the
  per-chunk means of a string's occurrences instead, min_cluster_size scaled by the ratio of
  chunks to occurrences; every occurrence follows its chunk's mean.

Prototypes come sorted by string id (string s owns prototypes ptr[s]..ptr[s+1]-1), each string's
in cluster-label order, so a build is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from .config import LitesemragIndexConfig
from ...ops.rows import unit_rows, unit_rows_in_place
from ...progress import progress


@dataclass
class Prototypes:
    ptr: np.ndarray  # int64 (strings + 1): string s owns prototypes ptr[s]..ptr[s+1]-1
    vectors: np.ndarray  # float32 prototypes × d, unit rows
    assignment: np.ndarray  # int32 per occurrence: its prototype
    stats: dict[str, int] = field(default_factory=dict)


def _unit(x: np.ndarray) -> np.ndarray:
    """Unit rows, normalised in the precision of `x` (float64 means stay float64 until the cast)."""
    return unit_rows(x, compute_dtype=None)


def cluster_senses(unit: np.ndarray, chunks: np.ndarray, config: LitesemragIndexConfig) -> tuple[np.ndarray, np.ndarray]:
    """(centres k × d unit, label per occurrence in 0..k-1) of one string's occurrences `unit` by
    HDBSCAN (see the module doc); one centre when HDBSCAN finds no cluster."""
    from sklearn.cluster import HDBSCAN
    from sklearn.decomposition import PCA

    m = unit.shape[0]
    points, owner = unit, np.arange(m)
    min_size = max(2, m // config.cluster_divisor)
    if config.chunk_aggregation:
        keys, owner = np.unique(chunks, return_inverse=True)
        sums = np.zeros((keys.size, unit.shape[1]), dtype=np.float64)
        np.add.at(sums, owner, unit)
        points = _unit(sums / np.bincount(owner)[:, None])
        min_size = max(2, math.ceil((m // config.cluster_divisor) * keys.size / m))
    labels = np.full(points.shape[0], -1)
    if points.shape[0] > min_size and points.shape[0] >= min_size + config.min_samples_offset:
        dims = min(config.pca_dimensions, points.shape[1], points.shape[0])
        reduced = PCA(n_components=dims, svd_solver="full").fit_transform(points)
        labels = HDBSCAN(min_cluster_size=min_size, min_samples=min_size + config.min_samples_offset,
                         copy=True).fit_predict(reduced)
    found = sorted(set(labels.tolist()) - {-1})
    if not found:
        return _unit(unit.mean(axis=0, keepdims=True)), np.zeros(m, dtype=np.int64)
    centres = _unit(np.stack([points[labels == c].mean(axis=0) for c in found]))
    remap = np.full(labels.max() + 2, -1)
    remap[np.array(found) + 1] = np.arange(len(found))
    point_labels = remap[labels + 1]
    noise = point_labels < 0
    if noise.any():  # a noise point (an occurrence, or a chunk's mean) joins its nearest centre
        point_labels[noise] = np.argmax(points[noise] @ centres.T, axis=1)
    return centres, point_labels[owner]


def build_prototypes(string_ids: np.ndarray, vectors: np.ndarray, chunk_ids: np.ndarray, n_strings: int,
                     single_word: np.ndarray, config: LitesemragIndexConfig, show_progress: bool = False,
                     in_place: bool = False) -> Prototypes:
    """The prototypes of every string (module doc) from its occurrences: `string_ids`, `vectors` and
    `chunk_ids` per occurrence; `single_word[s]` says whether string s is one word. The occurrences' unit rows
    take one occurrences × d array: a copy of `vectors`, or with `in_place` (a float32 C-contiguous array the
    caller gives up) `vectors` itself, normalised where it lies (a 100,000-passage corpus holds gigabytes of them)."""
    if in_place:
        unit = unit_rows_in_place(vectors)
    else:
        unit = unit_rows_in_place(np.array(vectors, dtype=np.float32, order="C", copy=True))
    n_occ, dim = unit.shape
    counts = np.bincount(string_ids, minlength=n_strings)
    members = scipy.sparse.csr_matrix((np.ones(n_occ, dtype=np.float32), (string_ids, np.arange(n_occ))),
                                      shape=(n_strings, n_occ))
    # one prototype per string, replaced below where clustered
    means = unit_rows_in_place(np.ascontiguousarray(members @ unit, dtype=np.float32))
    order = np.argsort(string_ids, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    senses: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    concentrated = 0
    frequent = np.nonzero(counts >= config.min_occurrences)[0]
    for s in progress(frequent, "senses", show_progress, unit="string"):
        occ = order[bounds[s] : bounds[s + 1]]
        if single_word[s] and float((unit[occ] @ means[s]).mean()) > config.concentration:
            concentrated += 1
            continue
        senses[int(s)] = (occ, *cluster_senses(unit[occ], chunk_ids[occ], config))
    per_string = np.ones(n_strings, dtype=np.int64)
    for s, (_, centres, _) in senses.items():
        per_string[s] = centres.shape[0]
    ptr = np.concatenate([[0], np.cumsum(per_string)]).astype(np.int64)
    protos = np.empty((int(ptr[-1]), dim), dtype=np.float32)
    single = per_string == 1
    protos[ptr[:-1][single]] = means[single]
    assignment = ptr[string_ids].astype(np.int32)  # first prototype of its string; clustered strings below
    for s, (occ, centres, labels) in senses.items():
        protos[ptr[s] : ptr[s + 1]] = centres
        assignment[occ] = ptr[s] + labels
    stats = {"strings": int(n_strings), "prototypes": int(ptr[-1]), "frequent_strings": int(frequent.size),
             "concentrated_strings": concentrated, "clustered_strings": len(senses),
             "multi_sense_strings": int((per_string > 1).sum())}
    return Prototypes(ptr=ptr, vectors=protos, assignment=assignment, stats=stats)
