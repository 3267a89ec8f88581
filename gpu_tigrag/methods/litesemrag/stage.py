"""LiteSemRAG's index stage in and out of the index directory: the string table, the string →
prototype pointers, the prototype vectors, the per-prototype postings (CSR) and chunk lengths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IndexFormatError
from ...index.stage_arrays import check_arrays, csr_arrays, csr_from_arrays
from ...index.validate import check_dtype, check_offsets, check_unit_rows, check_values
from .config import STAGE_ARRAYS, STAGE_STRINGS, LitesemragIndexConfig
from .semantic_graph import STAGE_VERSION, SemanticGraph

ARRAYS, STRINGS = STAGE_ARRAYS, STAGE_STRINGS


def build(index: Any, config: LitesemragIndexConfig, backend: Any = None, encoder: Any = None,
          show_progress: bool = False) -> SemanticGraph:
    from .semantic_graph import build_semantic_graph

    return build_semantic_graph(index.chunk_texts, config, show_progress=show_progress)


def to_arrays(stage: SemanticGraph) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    arrays = csr_arrays("litesemrag_tf", stage.tf)
    arrays["litesemrag_proto_ptr"] = np.asarray(stage.proto_ptr, dtype=np.int64)
    arrays["litesemrag_proto_vectors"] = np.ascontiguousarray(stage.proto_vectors, dtype=np.float32)
    arrays["litesemrag_chunk_len"] = np.asarray(stage.chunk_len, dtype=np.int32)
    return arrays, {STRINGS: stage.strings}


def from_arrays(arrays: dict[str, np.ndarray], strings: dict[str, list[str]], index: Any,
                config: LitesemragIndexConfig, stats: dict[str, Any], folder: Path) -> SemanticGraph:
    """The stage, every array checked against the index's n chunks, the stage's strings and
    prototypes; a file that does not fit is named; a stage built by other rules (`stage_version` of
    its stats) is refused with the command that rebuilds it."""
    built = stats.get("stage_version", 1)
    if built != STAGE_VERSION:
        raise IndexFormatError(f"{folder}: its LiteSemRAG stage was built by rules of version {built} (this engine's "
                               f"are version {STAGE_VERSION}: the public code's span rules); rebuild the "
                               "stage with `tigrag extend INDEX --methods litesemrag`")
    texts = strings[STRINGS]
    n, n_strings = index.n_chunks, len(texts)
    ptr, vectors = arrays["litesemrag_proto_ptr"], arrays["litesemrag_proto_vectors"]
    check_dtype(folder / "litesemrag_proto_vectors.npy", vectors, np.float32, 2, None)
    check_arrays(folder, arrays, {"litesemrag_proto_ptr": ((n_strings + 1,), np.int64),
                                  "litesemrag_chunk_len": ((n,), np.int32),
                                  "litesemrag_tf_indptr": ((vectors.shape[0] + 1,), np.int64)},
                 f"{n} chunks, {n_strings} strings and {vectors.shape[0]} prototypes")
    check_offsets(folder / "litesemrag_proto_ptr.npy", ptr, n_strings, vectors.shape[0],
                  "strings' prototypes (litesemrag_proto_vectors.npy)", None)
    if ptr.size > 1 and int(np.diff(ptr).min()) < 1:
        raise IndexFormatError(f"{folder / 'litesemrag_proto_vectors.npy'}: {vectors.shape} prototypes do not match "
                               "the string → prototype pointers (a string without a prototype)")
    check_unit_rows(folder / "litesemrag_proto_vectors.npy", vectors, True, None)
    check_values(folder / "litesemrag_chunk_len.npy", arrays["litesemrag_chunk_len"], "chunk lengths", None)
    tf = csr_from_arrays(folder, arrays, "litesemrag_tf", (vectors.shape[0], n), "the postings")
    return SemanticGraph(strings=texts, proto_ptr=ptr, proto_vectors=vectors, tf=tf,
                         chunk_len=arrays["litesemrag_chunk_len"], stats=stats)


def summary(index: Any, stage: SemanticGraph) -> str:
    stats = stage.stats
    return (f"LiteSemRAG semantic graph: {stats['strings']:,} strings, {stats['prototypes']:,} prototypes "
            f"({stats['multi_sense_strings']:,} strings with several senses), {stats['spans']:,} spans "
            f"({stats['dropped_spans']:,} past the token encoder's window); token states: "
            f"{stats['token_encoder']} layer {index.config.litesemrag.layer}")
