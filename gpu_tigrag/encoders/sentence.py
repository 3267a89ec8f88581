"""sentence-transformers models on torch (backend `torch`): fp32 on CPU; on CUDA fp16, with the
batch grown from free device memory and halved on an out-of-memory error."""

from __future__ import annotations

import logging
import os
import sys
from typing import Sequence

import numpy as np

from ..config_types import EncoderConfig
from ..errors import ModelError
from ..threads import current_policy, set_torch_threads
from .base import PASSAGE, check_kind, empty
from .models import resolve_model

log = logging.getLogger(__name__)
#: device bytes one text of the longest allowed length needs per unit of hidden size (activations of
#: one layer at a time in fp16, with the attention scores); a rough bound, corrected by OOM halving
BYTES_PER_TOKEN_HIDDEN = 24
MAX_GPU_BATCH = 1024


#: what a machine shows where torch could reach a GPU through torch.cuda: NVIDIA's driver and device nodes,
#: WSL's GPU bridge, ROCm's kernel driver
GPU_DEVICE_PATHS = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia", "/dev/dxg", "/dev/kfd")


def gpu_device_present(paths: Sequence[str] | None = None) -> bool:
    """Whether any of `paths` (default GPU_DEVICE_PATHS) exists: without one, torch.cuda.is_available() is
    False, so a CPU machine learns it without importing torch (2.5 s of `tigrag index` with the "auto" encoder
    settings)."""
    return any(os.path.exists(path) for path in (GPU_DEVICE_PATHS if paths is None else paths))


def resolve_device(device: str) -> str:
    """"cuda" or "cpu" for "auto" (torch's answer where a GPU device is present or torch is already
    imported; "cpu" where no device node exists); any other value as given."""
    if device != "auto":
        return device
    if "torch" not in sys.modules and not gpu_device_present():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _quiet_offline_hub() -> None:
    for key, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
                       ("TRANSFORMERS_VERBOSITY", "error")):
        os.environ.setdefault(key, value)


class SentenceTransformerEncoder:
    """A sentence-transformers model; vectors are normalised so a dot product is the cosine."""

    backend = "torch"

    def __init__(self, config: EncoderConfig = EncoderConfig()):
        _quiet_offline_hub()
        from sentence_transformers import SentenceTransformer

        resolved = resolve_model(config.model)
        resolved.ensure_weights()
        self.name, self.fingerprint, self.prompts = config.model, resolved.fingerprint, resolved
        self.device = resolve_device(config.device)
        if not self.device.startswith("cuda"):  # torch's intra-op pool: the policy's encoder share
            set_torch_threads(current_policy())
        try:
            self.model = SentenceTransformer(str(resolved.folder), device=self.device)
        except Exception as exc:
            raise ModelError(f"cannot load encoder {config.model!r}: {exc}") from None
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.batch_size = config.batch_size
        if self.device.startswith("cuda"):
            self.model.half()
            self.batch_size = self._gpu_batch(config.batch_size)

    def _gpu_batch(self, floor: int) -> int:
        import torch

        free, _total = torch.cuda.mem_get_info()
        hidden = int(getattr(self.model[0].auto_model.config, "hidden_size", 768))
        per_text = BYTES_PER_TOKEN_HIDDEN * hidden * int(self.model.max_seq_length or 512)
        batch = int(min(MAX_GPU_BATCH, max(floor, free // 2 // per_text)))
        log.debug("encoder batch on %s: %d texts (%.1f GiB free)", self.device, batch, free / 2**30)
        return batch

    #: `encode(..., device_output=True)` hands CUDA vectors to CuPy through DLPack (no host round trip)
    supports_device_output = True

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE,
               device_output: bool = False):
        """float32 unit vectors, one row per text: a NumPy array, or with `device_output` on a CUDA
        model a CuPy array on the same device (the same values: fp16 outputs widened to float32)."""
        check_kind(kind)
        on_device = device_output and self.device.startswith("cuda")
        if len(texts) == 0:
            return empty(self.dim)
        while True:
            try:
                vectors = self.model.encode(list(texts), prompt=self.prompts.prompt(kind) or None,
                                            batch_size=self.batch_size, normalize_embeddings=True,
                                            convert_to_numpy=not on_device, convert_to_tensor=on_device,
                                            show_progress_bar=show_progress)
                if on_device:
                    import cupy

                    return cupy.from_dlpack(vectors.float().contiguous())
                return np.ascontiguousarray(vectors, dtype=np.float32)
            except RuntimeError as exc:  # torch.cuda.OutOfMemoryError is a RuntimeError
                if "out of memory" not in str(exc).lower() or self.batch_size == 1:
                    raise
                import torch

                torch.cuda.empty_cache()
                self.batch_size //= 2
                log.info("encoder: out of device memory; batch halved to %d", self.batch_size)
