"""Contextual span vectors for LiteSemRAG (paper section 3.2; docs/design-notes.md#litesemrag-index):
one hidden-states layer of a transformer encoder, a span's vector the mean of the sub-words that
overlap its characters.

The spans' offsets index the cleaned text (`spans.clean_text`); the characters they name are the
characters encoded only when the texts given here are those cleaned texts. The query stage always
gives them; the index stage gives the raw chunk texts by default, as the public code's `index_json`
does, so a span after a deleted quote reads sub-words a few characters off
(`litesemrag.encode_cleaned_text` true gives the cleaned texts;
docs/design-notes.md#litesemrag-public-code-issues). Offsets come from the model's fast tokenizer. A text longer than `max_length` sub-words is
truncated, as in the code; a span past the cut overlaps no sub-word, gets no vector and is reported
as dropped (`keep` is False).

Runs on torch: fp32 on CPU, fp16 on CUDA (the encoder's own device rule, `encoders.sentence`).
"""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from ...errors import ModelError
from ...progress import counter
from .spans import Span

log = logging.getLogger(__name__)


class TokenStateEncoder:
    """Span vectors from hidden-states layer `layer` of model `model` (a name `encoders.models`
    resolves: a known model, the package that ships it, or a local folder; nothing is downloaded)."""

    def __init__(self, model: str, layer: int = -2, max_length: int = 512, batch_size: int = 32,
                 device: str = "auto"):
        from ...encoders.models import resolve_model
        from ...encoders.sentence import _quiet_offline_hub, resolve_device

        _quiet_offline_hub()
        import torch
        from transformers import AutoModel, AutoTokenizer

        resolved = resolve_model(model)
        self.name, self.fingerprint = model, resolved.fingerprint
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(resolved.folder), use_fast=True)
            network = AutoModel.from_pretrained(str(resolved.folder))
        except Exception as exc:  # a broken folder: name it, no traceback
            raise ModelError(f"cannot load the token encoder {model!r} from {resolved.folder}: {exc}") from None
        if not getattr(self.tokenizer, "is_fast", False):
            raise ModelError(f"token encoder {model!r}: span offsets need a fast tokenizer (tokenizer.json), "
                             f"and {resolved.folder} has none")
        layers = int(getattr(network.config, "num_hidden_layers", 0))
        if not (-layers <= layer <= layers) or layer == 0:
            raise ModelError(f"token encoder {model!r} has {layers} layers; litesemrag.layer must be in "
                             f"1..{layers} or -{layers}..-1, got {layer}")
        self.device = resolve_device(device)
        self.model = network.to(self.device).eval()
        if self.device.startswith("cuda"):
            self.model.half()
        self.layer = layer
        limit = int(getattr(network.config, "max_position_embeddings", max_length) or max_length)
        self.max_length = min(max_length, limit)
        self.batch_size = batch_size
        self.dim = int(network.config.hidden_size)
        self._torch = torch

    def span_vectors(self, texts: Sequence[str], spans: Sequence[Sequence[Span]],
                     show_progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, keep): one float32 row per span of every text, in text then span order, and
        whether the span overlapped an encoded sub-word (a dropped span's row is zero)."""
        layers, keep = self.span_vectors_by_layer(texts, spans, [self.layer], show_progress)
        return layers[0], keep

    def span_vectors_by_layer(self, texts: Sequence[str], spans: Sequence[Sequence[Span]], layers: Sequence[int],
                              show_progress: bool = False) -> tuple[list[np.ndarray], np.ndarray]:
        """`span_vectors` for each of `layers` from one forward pass (a layer sweep's inputs)."""
        if len(texts) != len(spans):
            raise ValueError(f"{len(texts)} texts but {len(spans)} span lists")
        depth = int(self.model.config.num_hidden_layers)
        bad = [layer for layer in layers if layer == 0 or not -depth <= layer <= depth]
        if bad:
            raise ModelError(f"token encoder {self.name!r} has {depth} layers; got layer(s) {bad}")
        starts = np.cumsum([0] + [len(s) for s in spans])
        vectors = [np.zeros((int(starts[-1]), self.dim), dtype=np.float32) for _ in layers]
        keep = np.zeros(int(starts[-1]), dtype=bool)
        torch = self._torch
        todo = [i for i in range(len(texts)) if spans[i]]
        todo.sort(key=lambda i: -len(texts[i]))  # similar lengths together: less padding
        bar = counter(len(todo), "token states", show_progress, unit="text")
        try:
            for lo in range(0, len(todo), self.batch_size):
                batch = todo[lo : lo + self.batch_size]
                encoded = self.tokenizer([texts[i] for i in batch], return_offsets_mapping=True, truncation=True,
                                         max_length=self.max_length, padding=True, return_tensors="pt")
                offsets = encoded.pop("offset_mapping").numpy()
                mask = encoded["attention_mask"].numpy().astype(bool)
                with torch.inference_mode():
                    out = self.model(**{k: v.to(self.device) for k, v in encoded.items()}, output_hidden_states=True)
                    for row, i in enumerate(batch):
                        weights = overlap_weights(offsets[row], mask[row], spans[i])
                        keep[starts[i] : starts[i + 1]] = weights.sum(axis=1) > 0
                        for target, layer in zip(vectors, layers):
                            states = out.hidden_states[layer]
                            means = torch.from_numpy(weights).to(states.device, states.dtype) @ states[row]
                            target[starts[i] : starts[i + 1]] = means.float().cpu().numpy()
                bar.update(len(batch))
        finally:
            bar.close()
        return vectors, keep


def overlap_weights(offsets: np.ndarray, mask: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
    """spans × sub-words float32: 1/n for the n sub-words whose characters overlap the span's (special
    and padding sub-words, with empty offsets or mask 0, never count); a row of zeros when none does."""
    lo, hi = offsets[:, 0], offsets[:, 1]
    real = mask & (hi > lo)
    start = np.array([s.start_char for s in spans])[:, None]
    end = np.array([s.end_char for s in spans])[:, None]
    hit = real[None, :] & (hi[None, :] > start) & (lo[None, :] < end)
    count = hit.sum(axis=1, keepdims=True)
    return (hit / np.maximum(count, 1)).astype(np.float32)
