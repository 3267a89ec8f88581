"""The index's query encoder, loaded on the first text that needs it.

Loading a transformer costs seconds and ~1.4 GB; a run whose query vectors all come from the vector
cache needs none of it. `LazyEncoder` answers the identity the index recorded (name, fingerprint,
runtime, dimension) without loading anything, so a `CachingEncoder` around it finds its cached
vectors by that identity; the model is loaded on the first `encode` that has texts to embed, and
must then have exactly that identity (`check_compatible`, strict): the cache under the index's
identity only ever holds vectors of the index's own encoder.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..config_types import EncoderConfig
from ..errors import ModelError
from .base import PASSAGE, QUERY, Encoder, check_compatible, empty


class LazyEncoder:
    """An `Encoder` with the identity `identity` = (name, fingerprint, backend) and `dim`, whose model
    (`load_encoder(config)`) is loaded on the first text it embeds."""

    def __init__(self, config: EncoderConfig, identity: tuple[str, str, str], dim: int):
        self.config = config
        self.identity = identity
        self.name, self.fingerprint, self.backend = identity
        self.dim = int(dim)
        self._encoder: Encoder | None = None

    @property
    def is_loaded(self) -> bool:
        return self._encoder is not None

    def load(self, first_kind: str = QUERY) -> Encoder:
        """The model, loaded now if it is not yet (prepared for texts of `first_kind`: `load_encoder`); ModelError
        where it is not the index's encoder."""
        if self._encoder is None:
            from . import load_encoder

            encoder = load_encoder(self.config, first_kind=first_kind)
            check_compatible(self.identity, encoder, allow_mixed=False)
            if getattr(encoder, "dim", self.dim) != self.dim:
                raise ModelError(f"the query encoder gives {encoder.dim}-dimensional vectors, the index's passage "
                                 f"vectors have {self.dim} dimensions")
            self._encoder = encoder
        return self._encoder

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE, **options: Any) -> np.ndarray:
        if len(texts) == 0:
            return empty(self.dim)
        return self.load(kind).encode(texts, show_progress=show_progress, kind=kind, **options)

    @property
    def supports_device_output(self) -> bool:
        """Whether the model hands vectors to CuPy directly (asked right before encoding, so it loads
        the model); no other attribute loads it (a `hasattr` check never does)."""
        return bool(getattr(self.load(), "supports_device_output", False))


def query_encoder(index: Any, allow_mixed: bool = False) -> Encoder:
    """The encoder of `index`'s queries: lazy (module doc) unless another runtime may be mixed in,
    where the loaded model's own identity must key the cache (loaded now, as before)."""
    from . import index_encoder_config, load_encoder

    config = index_encoder_config(index)
    embeddings = getattr(index, "embeddings", None)
    if allow_mixed or embeddings is None or getattr(embeddings, "ndim", 0) != 2:
        return load_encoder(config)
    return LazyEncoder(config, index.encoder_identity, embeddings.shape[1])
