"""BERT-family sentence-transformers models on the project's own int8 kernels (backend `numba-int8`), for CPUs.

The weights are read from the model folder's model.safetensors and quantised at load (about a second),
one symmetric int8 scale per output column (max|w|/127); activations are quantised per row at run time
(kernels/int8_encoder.py), so a text's vector is the same in any batch, with any batch-mates, in any
order and with any thread count, bit for bit. Texts are not padded: a call's texts are concatenated
token rows, cut into bundles that each thread runs through every layer; attention runs over each text's own
rows in vector tiles, and every other step over blocks of rows with its intermediates in cache, where ONNX
Runtime's graph makes a memory pass per operation (bench/results/encoder_roofline.md measures both on one
machine). The int8 products use the AMX tiles where the CPU has them and
Linux grants them, else AVX-512 VNNI where the CPU has it (kernels/int8_gemm.py), else plain loops (the same
integers whichever runs, so the same vectors; the loops are far slower: choose onnx-int8 there).

What it runs: `model_type` bert (BertModel: absolute positions from 0, token type 0, GELU), pooling
cls or mean, optional Normalize; the tokenizer and prompts are the folder's, as for onnx-int8. Other
architectures get a clear error naming the backends that run them.
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
from .caching import default_cache_dir
from .models import resolve_model
from .onnx_int8 import Pipeline, _tokenizer, prompt_tokens, read_pipeline, tokenize_for

log = logging.getLogger(__name__)

#: bump when the quantisation or the kernels' arithmetic changes: it is part of the fingerprint, so passage
#: vectors of one recipe are never queried with another's
RECIPE = 2
#: token rows per kernel call (a passage of up to 512 tokens is never split): a call's threads wait for its last
#: bundle, so fewer calls waste less; memory per call is its rows' hidden states (24 MiB at e5-small's width)
CALL_ROWS = 16384
POOLING = ("cls", "mean")


def preferred_here(model: str) -> bool:
    """Whether "auto" runs `model` on numba-int8 on this CPU: a BERT model the kernels run, on a CPU with AVX-512
    VNNI (AMX CPUs included, whose products then run on the AMX tiles). There it was measured faster than
    onnx-int8 at the same cosine to torch and the same recall (bench/results/encoder_roofline.md,
    docs/encoders.md: on AVX-512 VNNI alone, and on AMX, where ONNX Runtime's products use the tiles too); without
    VNNI the kernels' portable products are slow."""
    from ..kernels.int8_gemm import HAS_VNNI

    if not HAS_VNNI:
        return False
    try:
        _check_architecture(read_pipeline(resolve_model(model).folder))
    except ModelError:
        return False  # not a model it runs (or not one that loads at all: its runtime's loader says why)
    return True


def uses_amx(hidden: int, inner: int) -> bool:
    """Whether a model of these widths runs its int8 products on the AMX tiles here: AMX on the CPU, the tile state
    granted to this process, and both product depths (hidden, inner) whole AMX steps."""
    from ..kernels.int8_gemm import AMX_K, amx_ready

    return hidden % AMX_K == 0 and inner % AMX_K == 0 and amx_ready()


def _check_architecture(pipeline: Pipeline) -> dict:
    """The transformer's config.json, checked to be what the kernels compute."""
    where = pipeline.transformer / "config.json"
    try:
        config = json.loads(where.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"{where}: cannot read the model's configuration ({exc})") from None
    if not isinstance(config, dict) or config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu" \
            or config.get("position_embedding_type", "absolute") != "absolute":
        kind = config.get("model_type") if isinstance(config, dict) else None
        raise ModelError(f"{pipeline.transformer}: backend numba-int8 runs BERT models with absolute positions and "
                         f"GELU (model_type bert), not {kind!r}; use backend onnx-int8 or torch")
    try:
        hidden, heads = int(config["hidden_size"]), int(config["num_attention_heads"])
        inner, layers = int(config["intermediate_size"]), int(config["num_hidden_layers"])
    except (KeyError, TypeError, ValueError):
        raise ModelError(f"{where}: hidden_size, num_attention_heads, intermediate_size and num_hidden_layers "
                         "must be integers") from None
    from ..kernels.int8_gemm import PANEL

    if min(hidden, heads, inner, layers) < 1 or hidden % heads or hidden % PANEL or inner % PANEL:
        raise ModelError(f"{where}: backend numba-int8 needs hidden_size and intermediate_size multiples of {PANEL} "
                         f"and hidden_size a multiple of num_attention_heads (got {hidden}, {inner}, {heads} heads); "
                         "use backend onnx-int8 or torch")
    if len(pipeline.pooling) != 1 or pipeline.pooling[0] not in POOLING:
        raise ModelError(f"{pipeline.transformer}: pooling {list(pipeline.pooling)} is not supported by backend "
                         f"numba-int8 (it pools {' or '.join(POOLING)}); use backend onnx-int8 or torch")
    return config


_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file as read-only memory maps (no copy: the embedding table is read only
    where a token's row is used). Only float32 and float16 tensors are mapped; a file of other kinds is read
    whole by the safetensors package. Offsets and sizes are checked against the file."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            length = int.from_bytes(handle.read(8), "little")
            if not 2 <= length <= min(size - 8, 100_000_000):
                raise ValueError(f"a header of {length} bytes")
            header = json.loads(handle.read(length))
        tensors = {}
        for name, spec in header.items():
            if name == "__metadata__":
                continue
            dtype = _SAFETENSORS_DTYPES.get(spec.get("dtype"))
            if dtype is None:
                from safetensors.numpy import load_file

                return load_file(str(path))
            shape = tuple(int(n) for n in spec["shape"])
            begin, end = (int(n) for n in spec["data_offsets"])
            if not 0 <= begin <= end <= size - 8 - length or end - begin != int(np.prod(shape)) * np.dtype(dtype).itemsize:
                raise ValueError(f"tensor {name!r}: offsets {begin}..{end} do not hold shape {shape}")
            tensors[name] = np.memmap(path, dtype=dtype, mode="r", offset=8 + length + begin, shape=shape)
        return tensors
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ModelError(f"{path}: cannot read the weights ({exc})") from None


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

        def get(name: str, shape: tuple[int, ...] | None = None, whole: bool = True) -> np.ndarray:
            """The tensor `name`, float32; `whole`: read it all and check it finite (the embedding table is left
            mapped: a text reads only its tokens' rows, and the file's sha256 was checked by its resolver)."""
            for key in (name, f"bert.{name}"):
                if key in tensors:
                    value = tensors[key]
                    if whole or value.dtype != np.float32:
                        value = np.array(value, dtype=np.float32)
                    if shape is not None and value.shape != shape:
                        raise ModelError(f"{where}: tensor {key!r} has shape {value.shape}, expected {shape}")
                    if whole and not np.isfinite(value).all():
                        raise ModelError(f"{where}: tensor {key!r} holds values that are not finite")
                    return value
            raise ModelError(f"{where}: the weights have no tensor {name!r}")

        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = np.float32(config.get("layer_norm_eps", 1e-12))
        hidden, inner = int(config["hidden_size"]), int(config["intermediate_size"])
        self.word = get("embeddings.word_embeddings.weight", whole=False)
        self.position = get("embeddings.position_embeddings.weight")
        self.token_type = get("embeddings.token_type_embeddings.weight")[0].copy()
        if self.word.ndim != 2 or self.word.shape[1] != hidden or self.position.ndim != 2 \
                or self.position.shape[1] != hidden or self.token_type.shape != (hidden,):
            raise ModelError(f"{where}: the embedding tables do not have hidden_size {hidden} columns")
        self.embed_gamma = get("embeddings.LayerNorm.weight", (hidden,))
        self.embed_beta = get("embeddings.LayerNorm.bias", (hidden,))
        products = {"qkv": [], "out": [], "up": [], "down": []}
        norms = {"gamma1": [], "beta1": [], "gamma2": [], "beta2": []}
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            attention = p + "attention.self."
            qkv = np.concatenate([get(attention + f"{n}.weight", (hidden, hidden)) for n in ("query", "key", "value")])
            qkv_bias = np.concatenate([get(attention + f"{n}.bias", (hidden,)) for n in ("query", "key", "value")])
            for kind, weight, bias in (("qkv", qkv, qkv_bias),
                                       ("out", get(p + "attention.output.dense.weight", (hidden, hidden)),
                                        get(p + "attention.output.dense.bias", (hidden,))),
                                       ("up", get(p + "intermediate.dense.weight", (inner, hidden)),
                                        get(p + "intermediate.dense.bias", (inner,))),
                                       ("down", get(p + "output.dense.weight", (hidden, inner)),
                                        get(p + "output.dense.bias", (hidden,)))):
                q, scales = quantize_columns(weight)
                products[kind].append((pack(q), q.astype(np.int32).sum(axis=0).astype(np.int32), scales, bias))
            norms["gamma1"].append(get(p + "attention.output.LayerNorm.weight", (hidden,)))
            norms["beta1"].append(get(p + "attention.output.LayerNorm.bias", (hidden,)))
            norms["gamma2"].append(get(p + "output.LayerNorm.weight", (hidden,)))
            norms["beta2"].append(get(p + "output.LayerNorm.bias", (hidden,)))
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
        self.weights = _Weights(read_safetensors(weights_file), hf, weights_file)
        self.fingerprint = f"{resolved.fingerprint}+numba-int8:{RECIPE}"
        # the same derived tokenizer subset as onnx-int8's (keyed by the tokenizer file's sha256)
        self.tokenizer = _tokenizer(self.pipeline.transformer, self.pipeline.max_seq_length, default_cache_dir() / "onnx")
        self._prompt_lengths: dict[str, int] = {}
        self.threads = current_policy().encoder
        #: the int8 products on the AMX tiles where this CPU has them and Linux grants them (the same integers as
        #: the VNNI tile, so the same vectors bit for bit); a benchmark may set it False to time the VNNI tile
        self.amx = uses_amx(int(hf["hidden_size"]), int(hf["intermediate_size"]))

    def _prompt_length(self, prompt: str) -> int:
        if prompt not in self._prompt_lengths:
            self._prompt_lengths[prompt] = prompt_tokens(self.tokenizer, prompt)
        return self._prompt_lengths[prompt]

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        if len(texts) == 0:
            return empty(self.dim)
        from ..kernels.int8_encoder import encode_rows
        from ..progress import counter

        encodings, lengths, skip = tokenize_for(self, texts, kind)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        arguments = self.weights.arguments()
        bar = counter(len(texts), "encoding", show_progress, unit="text")
        import numba

        previous = numba.get_num_threads()
        threads = min(self.threads, numba.config.NUMBA_NUM_THREADS)
        numba.set_num_threads(threads)
        try:
            for part in self._calls(lengths):
                part_lengths = lengths[part]
                starts = np.zeros(len(part), dtype=np.int64)
                np.cumsum(part_lengths[:-1], out=starts[1:])
                ids = np.concatenate([np.asarray(encodings[i].ids, dtype=np.int64) for i in part])
                if ids.size and (ids.min() < 0 or ids.max() >= len(self.weights.word)):
                    raise ModelError(f"{self.pipeline.transformer}: the tokenizer gave token id {int(ids.max())}, beyond "
                                     f"the model's {len(self.weights.word)} embeddings; the folder's tokenizer and "
                                     "weights do not belong together")
                hidden = np.empty((len(ids), self.weights.word.shape[1]), dtype=np.float32)
                encode_rows(ids, starts, part_lengths, *arguments, hidden, threads, self.amx)
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
