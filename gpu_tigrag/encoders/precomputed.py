"""Vectors computed earlier by another encoder, looked up by text (and kind)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..atomic import atomic_write
from ..errors import ModelError, TigragError
from ..outputs import check_outside_indexes, check_replaceable
from .base import PASSAGE, Encoder, check_kind, empty

#: the kind recorded for vectors of a model that embeds queries and passages alike
ANY_KIND = "any"


class PrecomputedEncoder:
    """Looks vectors up by (kind, text); unknown texts are errors.

    Lets a benchmark time the engine apart from the encoder (e.g. on a GPU machine that has no
    model weights). Stored as .npz of unicode arrays and a float32 matrix, no pickle. Files
    written before kinds were recorded hold vectors valid for either kind.
    """

    def __init__(self, name: str, fingerprint: str, texts: Sequence[str], vectors: np.ndarray,
                 kinds: Sequence[str] | None = None, backend: str = "torch"):
        self.name, self.fingerprint, self.backend = name, fingerprint, backend
        self.dim = int(vectors.shape[1])
        kinds = list(kinds) if kinds is not None else [ANY_KIND] * len(texts)
        self._rows = {(k, t): i for i, (k, t) in enumerate(zip(kinds, texts))}
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    @classmethod
    def record(cls, encoder: Encoder, texts: Sequence[str], kind: str = PASSAGE) -> "PrecomputedEncoder":
        unique = list(dict.fromkeys(texts))
        return cls(encoder.name, encoder.fingerprint, unique, encoder.encode(unique, kind=kind), [kind] * len(unique),
                   encoder.backend)

    def merged(self, other: "PrecomputedEncoder") -> "PrecomputedEncoder":
        """One lookup holding both sets of vectors (same model and backend)."""
        if (other.fingerprint, other.backend) != (self.fingerprint, self.backend):
            raise ModelError("cannot merge precomputed vectors of different encoders")
        keys = list(self._rows) + [k for k in other._rows if k not in self._rows]
        vectors = np.concatenate([self._vectors, other._vectors[[other._rows[k] for k in keys[len(self._rows):]]]])
        return PrecomputedEncoder(self.name, self.fingerprint, [t for _, t in keys], vectors, [k for k, _ in keys],
                                  self.backend)

    def save(self, path: str | Path, dtype: type = np.float32, force: bool = False) -> None:
        """Write .npz (the suffix is added when missing, as numpy does); `dtype=np.float16` halves the file
        (vectors come back as float32). Written atomically; an existing file is replaced only with `force`, a
        link, folder, FIFO or device there, or a path inside an index, never (TigragError, nothing written)."""
        path = Path(path)
        if not path.name.endswith(".npz"):
            path = path.with_name(path.name + ".npz")
        check_outside_indexes(path, "PrecomputedEncoder.save")
        check_replaceable(path)
        if path.exists() and not force:
            raise TigragError(f"PrecomputedEncoder.save: {path} exists; refusing to overwrite it (nothing was "
                              "written): choose another path, or pass force=True to replace it")
        kinds = np.array([k for k, _ in self._rows], dtype=str)
        texts = np.array([t for _, t in self._rows], dtype=str)

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as handle:
                np.savez_compressed(handle, name=np.array(self.name), fingerprint=np.array(self.fingerprint),
                                    backend=np.array(self.backend), texts=texts, kinds=kinds,
                                    vectors=self._vectors.astype(dtype))

        atomic_write(path, write)

    @classmethod
    def load(cls, path: str | Path) -> "PrecomputedEncoder":
        with np.load(path, allow_pickle=False) as data:
            kinds = data["kinds"].tolist() if "kinds" in data.files else None
            backend = str(data["backend"]) if "backend" in data.files else "torch"
            return cls(str(data["name"]), str(data["fingerprint"]), data["texts"].tolist(), data["vectors"], kinds,
                       backend)

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        rows = [self._rows.get((kind, t), self._rows.get((ANY_KIND, t))) for t in texts]
        missing = [t for t, r in zip(texts, rows) if r is None]
        if missing:
            raise ModelError(f"precomputed encoder has no {kind} vector for {len(missing)} text(s), "
                             f"e.g. {missing[0]!r}")
        if not texts:
            return empty(self.dim)
        return self._vectors[rows]
