"""BERT-family sentence-transformers models on the project's own int8 kernels (backend `numba-int8`), for CPUs.

The weights are read from the model folder's model.safetensors and quantised at load, one symmetric
int8 scale per output column (max|w|/127); activations are quantised per row at run time
(kernels/int8_encoder.py), so a text's vector is the same in any batch, with any batch-mates, in any
order and with any thread count, bit for bit. Texts are not padded: a call's texts are concatenated
token rows, attention runs over each text's own rows, and every other step is a pass over blocks of
rows with its intermediates in cache (bench/results/encoder_roofline.md measures what this gains over
ONNX Runtime's graph of one memory pass per operation).

What it runs: `model_type` bert (BertModel: absolute positions from 0, token type 0, GELU), pooling
cls or mean, optional Normalize. Other architectures get a clear error naming backends that run them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from ..config_types import EncoderConfig
from ..errors import ModelError
from ..threads import current_policy
from .base import PASSAGE, check_kind, empty
from .models import resolve_model
from .onnx_int8 import Pipeline, _tokenizer, read_pipeline

log = logging.getLogger(__name__)

#: bump when the quantisation or the kernels' arithmetic changes: it is part of the fingerprint, so passage
#: vectors of one recipe are never queried with another's
RECIPE = 1
#: token rows per kernel call (a passage of up to 512 tokens is never split); chosen by measurement
CALL_ROWS = 2048
POOLING = ("cls", "mean")


def _check_architecture(pipeline: Pipeline) -> dict:
    config = json.loads((pipeline.transformer / "config.json").read_text())
    if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu" \
            or config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError(f"{pipeline.transformer}: backend numba-int8 runs BERT models with absolute positions and "
                         f"GELU (model_type bert), not {config.get('model_type')!r}; use backend onnx-int8 or torch")
    if len(pipeline.pooling) != 1 or pipeline.pooling[0] not in POOLING:
        raise ModelError(f"{pipeline.transformer}: pooling {list(pipeline.pooling)} is not supported by backend "
                         f"numba-int8 (it pools {' or '.join(POOLING)}); use backend onnx-int8 or torch")
    return config


def quantize_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A torch Linear weight (out × in, float) as int8 in × out with one scale per output column."""
    w = np.asarray(weight, dtype=np.float32).T
    peak = np.abs(w).max(axis=0)
    scales = np.maximum(peak / np.float32(127.0), np.float32(1e-12)).astype(np.float32)
    q = np.clip(np.rint(w / scales), -127, 127).astype(np.int8)
    return q, scales


class _Weights:
    """The model's arrays in the kernels' layout: per kind of product, layers stacked."""

    def __init__(self, tensors: dict[str, np.ndarray], config: dict, where: Path):
        from ..kernels.int8_gemm import pack

        def get(name: str) -> np.ndarray:
            for key in (name, f"bert.{name}"):
                if key in tensors:
                    return np.ascontiguousarray(tensors[key], dtype=np.float32)
            raise ModelError(f"{where}: the weights have no tensor {name!r}")

        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config.get("layer_norm_eps", 1e-12))
        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0].copy()
        self.embed_gamma = get("embeddings.LayerNorm.weight")
        self.embed_beta = get("embeddings.LayerNorm.bias")
        products = {"qkv": [], "out": [], "up": [], "down": []}
        norms = {"gamma1": [], "beta1": [], "gamma2": [], "beta2": []}
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            attention = p + "attention.self."
            qkv = np.concatenate([get(attention + f"{n}.weight") for n in ("query", "key", "value")], axis=0)
            qkv_bias = np.concatenate([get(attention + f"{n}.bias") for n in ("query", "key", "value")])
            for kind, weight, bias in (("qkv", qkv, qkv_bias),
                                       ("out", get(p + "attention.output.dense.weight"), get(p + "attention.output.dense.bias")),
                                       ("up", get(p + "intermediate.dense.weight"), get(p + "intermediate.dense.bias")),
                                       ("down", get(p + "output.dense.weight"), get(p + "output.dense.bias"))):
                q, scales = quantize_columns(weight)
                products[kind].append((pack(q), q.astype(np.int32).sum(axis=0).astype(np.int32), scales, bias))
            norms["gamma1"].append(get(p + "attention.output.LayerNorm.weight"))
            norms["beta1"].append(get(p + "attention.output.LayerNorm.bias"))
            norms["gamma2"].append(get(p + "output.LayerNorm.weight"))
            norms["beta2"].append(get(p + "output.LayerNorm.bias"))
        self.products = {kind: tuple(np.stack([item[i] for item in items]) for i in range(4))
                         for kind, items in products.items()}
        self.norms = {name: np.stack(values) for name, values in norms.items()}

    def arguments(self) -> tuple:
        p, n = self.products, self.norms
        return (self.word, self.position, self.token_type, self.embed_gamma, self.embed_beta, self.eps, self.heads,
                *p["qkv"], *p["out"], n["gamma1"], n["beta1"], *p["up"], *p["down"], n["gamma2"], n["beta2"])


class NumbaInt8Encoder:
    """A BERT sentence-transformers model on the int8 kernels (module doc); vectors L2-normalised float32."""

    backend = "numba-int8"

    def __init__(self, config: EncoderConfig = EncoderConfig()):
        if config.device.startswith("cuda"):
            raise ModelError("encoder backend numba-int8 runs on CPU; use backend torch for device cuda")
        resolved = resolve_model(config.model)
        self.name, self.resolved = config.model, resolved
        self.pipeline = read_pipeline(resolved.folder)
        hf = _check_architecture(self.pipeline)
        self.dim = self.pipeline.dim
        weights_file = self.pipeline.transformer / "model.safetensors"
        if not weights_file.is_file():
            raise ModelError(f"{self.pipeline.transformer}: backend numba-int8 reads model.safetensors, which is missing")
        resolved.ensure_weights()
        from safetensors.numpy import load_file

        try:
            tensors = load_file(str(weights_file))
        except Exception as exc:  # safetensors raises its own error types
            raise ModelError(f"{weights_file}: cannot read the weights ({exc})") from None
        self.weights = _Weights(tensors, hf, weights_file)
        self.fingerprint = f"{resolved.fingerprint}+numba-int8:{RECIPE}"
        self.tokenizer = _tokenizer(self.pipeline.transformer, self.pipeline.max_seq_length)
        self._prompt_lengths: dict[str, int] = {}
        self.threads = current_policy().encoder

    def _prompt_length(self, prompt: str) -> int:
        if prompt not in self._prompt_lengths:
            encoding = self.tokenizer.encode(prompt)
            n = len(encoding.ids)
            if n and encoding.special_tokens_mask[-1]:
                n -= 1
            self._prompt_lengths[prompt] = n
        return self._prompt_lengths[prompt]

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        if len(texts) == 0:
            return empty(self.dim)
        from ..kernels.int8_encoder import encode_rows
        from ..progress import counter

        prompt = self.resolved.prompt(kind)
        batch = [prompt + text for text in texts]
        if self.pipeline.lower_case:
            batch = [text.lower() for text in batch]
        skip = 0 if self.pipeline.include_prompt or not prompt else self._prompt_length(prompt)
        encodings = self.tokenizer.encode_batch(batch)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        arguments = self.weights.arguments()
        bar = counter(len(texts), "encoding", show_progress, unit="text")
        import numba

        previous = numba.get_num_threads()
        numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))
        try:
            for part in self._calls(lengths):
                part_lengths = lengths[part]
                starts = np.zeros(len(part), dtype=np.int64)
                np.cumsum(part_lengths[:-1], out=starts[1:])
                ids = np.concatenate([np.asarray(encodings[i].ids, dtype=np.int64) for i in part])
                hidden = np.empty((len(ids), self.weights.word.shape[1]), dtype=np.float32)
                encode_rows(ids, starts, part_lengths, *arguments, hidden)
                out[part] = self._pool(hidden, starts, part_lengths, skip)
                bar.update(len(part))
        finally:
            numba.set_num_threads(previous)
            bar.close()
        return out

    def _pool(self, hidden: np.ndarray, starts: np.ndarray, lengths: np.ndarray, skip: int) -> np.ndarray:
        if self.pipeline.pooling[0] == "cls":
            vectors = hidden[starts]
        else:
            vectors = np.empty((len(starts), hidden.shape[1]), dtype=np.float32)
            for t, (start, length) in enumerate(zip(starts, lengths)):
                first = start + min(skip, length - 1) if skip else start
                vectors[t] = hidden[first:start + length].mean(axis=0)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)

    @staticmethod
    def _calls(lengths: np.ndarray):
        """Consecutive texts of at most CALL_ROWS rows (a longer text alone)."""
        start, n = 0, len(lengths)
        while start < n:
            end, rows = start, 0
            while end < n and (end == start or rows + lengths[end] <= CALL_ROWS):
                rows += int(lengths[end])
                end += 1
            yield np.arange(start, end)
            start = end
