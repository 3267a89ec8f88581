"""A fast, declared stand-in encoder for tests and scale runs (not a semantic model)."""

from __future__ import annotations

import hashlib
import re
from typing import Sequence

import numpy as np

from ..errors import ModelError
from .base import PASSAGE, check_kind


class HashingEncoder:
    """Signed feature hashing of lower-cased words and word bigrams, selected with ``hashing:DIM``.
    Queries and passages are embedded alike."""

    backend = "hashing"

    def __init__(self, dim: int = 256):
        if dim < 8:
            raise ModelError(f"hashing encoder needs dim >= 8, got {dim}")
        self.dim = dim
        self.name = f"hashing:{dim}"
        self.fingerprint = f"hashing:blake2b:{dim}"

    def _features(self, text: str) -> list[str]:
        words = re.findall(r"\w+", text.lower())
        return words + [f"{a} {b}" for a, b in zip(words, words[1:])]

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)
