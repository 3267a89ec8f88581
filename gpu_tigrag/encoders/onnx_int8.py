"""sentence-transformers models on ONNX Runtime with int8 weights (backend `onnx-int8`), for CPUs.

At first use the model's transformer is exported from its local folder to ONNX (torch.onnx.export,
nothing downloaded), then its weights are quantised to int8 by ONNX Runtime's dynamic quantisation
(signed int8, one scale per output channel), and its activations are quantised per row at run time
(one scale per token of each text, `onnx_rows.py`): a text's vector is the same in any batch, with any
batch-mates and any padding, bit for bit (bench/results/determinism.md). The result is cached under `default_cache_dir()/onnx/<weights sha256>-int8/` with a manifest (source
fingerprint, ONNX Runtime version, quantisation settings, sha256 of the .onnx file), checked at
every load: a damaged or outdated copy is rebuilt, with a log line. The folder is written
atomically; when two processes build it at once, the later one finds the first one's copy and
drops its own.

Encoding follows the folder's sentence-transformers modules (Transformer, Pooling, Normalize):
the folder's fast tokenizer, the model's prompt for the text kind, truncation to max_seq_length,
pooling with the attention mask in NumPy, then L2 normalisation. Texts are sorted by token length
and batched, so a batch pads little (which costs time, never a different vector), and the vectors
come back in input order.

Measured against the torch runtime on this project's data: bench/results/encoder_speed.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from ..atomic import OLD_MARK, TMP_MARK, atomic_directory
from ..config_types import EncoderConfig
from ..errors import ModelError
from ..threads import ONNX_ALLOW_SPINNING, ONNX_QUERY_SPINNING, current_policy
from ..threads import physical_cores  # noqa: F401 (bench/encoder_speed reads it from here)
from .base import PASSAGE, QUERY, check_kind, empty
from .caching import default_cache_dir
from .models import ResolvedModel, resolve_model
from .onnx_rows import DISABLED_OPTIMIZERS
from .tokenizer_subset import SubsetTokenizer, load_tokenizer

log = logging.getLogger(__name__)

MODEL_FILE, MANIFEST_FILE = "model.onnx", "manifest.json"
#: bump when the export or quantisation recipe changes: cached copies of another format are rebuilt
#: (2: per-row activation scales, every MatMul with a weight quantised; 3: fused attention, the
#: manifest's `vectors_sha256` names the unfused model whose vectors the fused one reproduces bit for bit)
FORMAT = 3
OPSET = 17
#: quantisation settings (chosen by measurement, bench/results/encoder_speed.md and determinism.md):
#: signed int8 weights use the VNNI int8 dot products; one scale per output channel keeps the cosine
#: to fp32 at ~0.994 (one scale per tensor: ~0.95); activations get one scale per row (per token)
QUANTIZATION = {"weight_type": "QInt8", "per_channel": True, "reduce_range": False, "activations": "per-row",
                "float_ffn_output_layers": 0.0}
#: `float_ffn_output_layers`: the share of the layers, from the first, whose feed-forward output
#: projection stays float32. With per-tensor activation scales these were the MatMuls most sensitive
#: to int8 (on MiniLM, keeping the first half float lifted the mean cosine to torch from 0.9936 to
#: 0.9961); with per-row scales keeping them float gains nothing measurable (e5-small, 300 2Wiki
#: questions: mean cosine to torch 0.99906 with half of them float, 0.99898 with none), so none is.
_FFN_OUTPUT = re.compile(r"/encoder/layers?\.(\d+)/output/dense/MatMul$")
#: stale temporaries of killed builds older than this are removed
STALE_SECONDS = 3600
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: OnnxInt8Encoder.batch_tokens (bench/results/encoder_roofline.md)
BATCH_TOKENS = 1024
POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len_tokens")
_LEGACY_POOLING = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                   "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                   "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


# ---------------------------------------------------------------------------------------------------
# the folder's modules


@dataclass(frozen=True)
class Pipeline:
    """What a sentence-transformers folder computes: its transformer folder, the longest input in
    tokens, whether texts are lower-cased first, the pooling modes and whether prompt tokens pool."""

    transformer: Path
    max_seq_length: int
    lower_case: bool
    pooling: tuple[str, ...]
    include_prompt: bool
    dim: int


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: cannot read the model's configuration ({exc})") from None
    if not isinstance(value, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return value


def _pooling(config: dict, where: Path) -> tuple[tuple[str, ...], bool, int]:
    modes = config.get("pooling_mode")
    if modes is None:
        modes = [mode for key, mode in _LEGACY_POOLING.items() if config.get(key)]
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    unsupported = [m for m in modes if m not in POOLING_MODES]
    if not modes or unsupported:
        raise ModelError(f"{where}: pooling {list(modes) or 'none'} is not supported by the onnx-int8 backend "
                         f"(supported: {', '.join(POOLING_MODES)}); use backend torch")
    dim = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    return modes, bool(config.get("include_prompt", True)), int(dim) if dim else 0


def read_pipeline(folder: Path) -> Pipeline:
    """The modules of the sentence-transformers folder `folder`: a transformer, then pooling, then
    optionally Normalize. Any other module (Dense, ...) is an error, not skipped."""
    modules_file = folder / "modules.json"
    if modules_file.is_file():
        modules = json.loads(modules_file.read_text())
    else:  # a bare transformers folder: sentence-transformers' defaults (mean pooling)
        modules = [{"type": "sentence_transformers.models.Transformer", "path": ""}]
    transformer, pooling = None, None
    for module in modules:
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        path = folder / module.get("path", "")
        if kind == "Transformer" and transformer is None:
            transformer = path
        elif kind == "Pooling" and transformer is not None and pooling is None:
            pooling = _pooling(_read_json(path / "config.json"), path / "config.json")
        elif kind != "Normalize":
            raise ModelError(f"{modules_file}: module {module.get('type')!r} is not supported by the onnx-int8 "
                             "backend (it runs Transformer, Pooling and Normalize); use backend torch")
    if transformer is None:
        raise ModelError(f"{folder}: no Transformer module")
    settings = {}
    for name in ("sentence_bert_config.json", "sentence_xlnet_config.json"):
        if (transformer / name).is_file():
            settings = _read_json(transformer / name)
            break
    hf = _read_json(transformer / "config.json")
    positions = int(hf.get("max_position_embeddings", 512))
    max_len = int(settings.get("max_seq_length") or positions)
    modes, include_prompt, dim = pooling or (("mean",), True, 0)
    dim = int(hf.get("hidden_size", dim)) * len(modes)
    return Pipeline(transformer, min(max_len, positions), bool(settings.get("do_lower_case", False)),
                    modes, include_prompt, dim)


# ---------------------------------------------------------------------------------------------------
# export, quantisation and the cache


def cache_folder(resolved: ResolvedModel, root: Path | None = None) -> Path:
    digest = resolved.fingerprint.split(":", 1)[-1]
    return (root if root is not None else default_cache_dir() / "onnx") / f"{digest}-int8"


def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ort_version() -> str:
    import onnxruntime

    return onnxruntime.__version__


def _expected_manifest(resolved: ResolvedModel, pipeline: Pipeline) -> dict:
    return {"format": FORMAT, "source_fingerprint": resolved.fingerprint, "onnxruntime": _ort_version(),
            "quantization": QUANTIZATION, "opset": OPSET, "max_seq_length": pipeline.max_seq_length}


def load_cached(folder: Path, expected: dict, report: bool = True) -> tuple[bytes, list[str], str] | None:
    """The model bytes, input names and the vectors' digest (`vectors_sha256`: the unfused model's
    sha256, which the fingerprint carries) of the cached copy in `folder`, or None when
    there is none or it is damaged or outdated (logged if `report`). Bytes are checked against the
    manifest's sha256 as read, so a copy replaced while being read is never used half old, half new."""
    warn = log.warning if report else log.debug
    manifest_file = folder / MANIFEST_FILE
    if not manifest_file.is_file():
        return None
    try:
        manifest = json.loads(manifest_file.read_text())
        data = (folder / MODEL_FILE).read_bytes()
    except (OSError, ValueError) as exc:
        warn("%s: cached ONNX model is unreadable (%s); rebuilding it", folder, exc)
        return None
    if not isinstance(manifest, dict):
        warn("%s: cached ONNX manifest is not a JSON object; rebuilding it", folder)
        return None
    stale = [key for key, value in expected.items() if manifest.get(key) != value]
    if stale:
        warn("%s: cached ONNX model was built with other settings (%s); rebuilding it", folder, ", ".join(stale))
        return None
    digest = _sha256_bytes(data)
    if manifest.get("sha256") != digest:
        warn("%s: cached ONNX model is damaged (sha256 mismatch); rebuilding it", folder)
        return None
    inputs = manifest.get("inputs")
    if not isinstance(inputs, list) or not inputs or not set(inputs) <= set(INPUTS):
        warn("%s: cached ONNX manifest lists no valid inputs; rebuilding it", folder)
        return None
    vectors = manifest.get("vectors_sha256")
    if not isinstance(vectors, str) or not re.fullmatch(r"[0-9a-f]{64}", vectors):
        warn("%s: cached ONNX manifest names no vectors digest; rebuilding it", folder)
        return None
    return data, inputs, vectors


def _export_fp32(pipeline: Pipeline, target: Path) -> list[str]:
    """torch.onnx.export of the folder's transformer (last hidden state), with dynamic batch and length."""
    from .sentence import _quiet_offline_hub

    _quiet_offline_hub()
    import inspect
    import warnings

    import torch
    from transformers import AutoModel

    try:
        model = AutoModel.from_pretrained(str(pipeline.transformer), attn_implementation="eager")
    except Exception as exc:
        raise ModelError(f"{pipeline.transformer}: cannot load the transformer to export it to ONNX: {exc}") from None
    model.eval()
    accepted = inspect.signature(model.forward).parameters
    inputs = [name for name in INPUTS if name in accepted]
    if inputs[:2] != ["input_ids", "attention_mask"]:
        raise ModelError(f"{pipeline.transformer}: the transformer does not take input_ids and attention_mask")

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return self.inner(**dict(zip(inputs, args)), return_dict=True).last_hidden_state

    example = torch.ones((2, 8), dtype=torch.long)
    args = tuple(example if name != "token_type_ids" else torch.zeros_like(example) for name in inputs)
    axes = {name: {0: "batch", 1: "sequence"} for name in [*inputs, "last_hidden_state"]}
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(LastHiddenState(model), args, str(target), dynamo=False, input_names=inputs,
                              output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
                              do_constant_folding=True)
    except Exception as exc:
        raise ModelError(f"{pipeline.transformer}: ONNX export failed: {exc}") from None
    return inputs


def float_nodes(model_path: Path) -> list[str]:
    """The MatMul nodes that stay float32 (QUANTIZATION's `float_ffn_output_layers`). Models whose
    node names do not follow BERT's (`/encoder/layer.N/output/dense/MatMul`) keep none float."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    ffn = {}
    for node in model.graph.node:
        match = _FFN_OUTPUT.search(node.name) if node.op_type == "MatMul" else None
        if match:
            ffn[int(match.group(1))] = node.name
    keep = round(len(ffn) * QUANTIZATION["float_ffn_output_layers"])
    return [ffn[layer] for layer in sorted(ffn)[:keep]]


def _quantize(source: Path, target: Path) -> tuple[str, str]:
    """int8 weights by ONNX Runtime's dynamic quantisation, then per-row activation scales, then fused
    attention. Returns the sha256 of the model before the fusion (the vectors' recipe: the fusion does
    not change a bit of them, so the fingerprint of a FORMAT 2 copy stays valid) and "fused" or "unfused"."""
    import onnx

    from .onnx_attention import AttentionPatternError, fuse_attention
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from .onnx_rows import RewriteError, per_row_activation_scales

    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # the quantiser's advice to pre-process goes to the root logger
    try:
        quantize_dynamic(str(source), str(target), weight_type=getattr(QuantType, QUANTIZATION["weight_type"]),
                         per_channel=QUANTIZATION["per_channel"], reduce_range=QUANTIZATION["reduce_range"],
                         nodes_to_exclude=float_nodes(source))
    except Exception as exc:
        raise ModelError(f"{source}: int8 quantisation failed: {exc}") from None
    finally:
        root.setLevel(level)
    model = onnx.load(str(target))
    try:
        per_row_activation_scales(model)
    except RewriteError as exc:
        raise ModelError(f"{source}: the quantised model has an unexpected structure ({exc})") from None
    vectors_digest = _sha256_bytes(model.SerializeToString())
    try:
        blocks = fuse_attention(model)
        attention = "fused"
        log.info("onnx-int8: %d attention blocks fused", blocks)
    except AttentionPatternError as exc:
        attention = "unfused"
        log.info("onnx-int8: attention left unfused (%s): slower, the same vectors", exc)
    onnx.save(model, str(target))
    return vectors_digest, attention


class _Redundant(Exception):
    """Another process finished the same cache folder first."""


def _remove_stale(folder: Path) -> None:
    """Temporaries of builds killed long ago (a recent one may be a build still under way)."""
    if not folder.parent.is_dir():
        return
    now = time.time()
    for path in folder.parent.iterdir():
        if path.name.startswith((f".{folder.name}{TMP_MARK}", f".{folder.name}{OLD_MARK}")):
            try:
                if now - path.stat().st_mtime > STALE_SECONDS:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass


def build_cached(resolved: ResolvedModel, pipeline: Pipeline, folder: Path) -> tuple[bytes, list[str], str]:
    """Export, quantise and cache the model in `folder` (atomically); returns what `load_cached` does."""
    expected = _expected_manifest(resolved, pipeline)
    _remove_stale(folder)
    start = time.perf_counter()
    log.info("onnx-int8: exporting and quantising %s (once; cached in %s)", resolved.name, folder)
    resolved.ensure_weights()
    try:
        with atomic_directory(folder, replaceable_if=MANIFEST_FILE) as tmp:
            fp32 = tmp / "model.fp32.onnx"
            inputs = _export_fp32(pipeline, fp32)
            digest, attention = _quantize(fp32, tmp / MODEL_FILE)
            fp32.unlink()
            data = (tmp / MODEL_FILE).read_bytes()
            manifest = {**expected, "inputs": inputs, "sha256": _sha256_bytes(data), "vectors_sha256": digest,
                        "attention": attention, "created": time.time()}
            (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1) + "\n")
            for path in (tmp / MODEL_FILE, tmp / MANIFEST_FILE):
                with open(path, "rb") as handle:
                    os.fsync(handle.fileno())
            if load_cached(folder, expected, report=False) is not None:
                raise _Redundant
    except _Redundant:
        log.info("onnx-int8: another process cached %s first; using its copy", resolved.name)
        found = load_cached(folder, expected)
        if found is not None:
            return found
        return build_cached(resolved, pipeline, folder)
    log.info("onnx-int8: %s ready in %.1f s", resolved.name, time.perf_counter() - start)
    return data, inputs, digest


def prepare(resolved: ResolvedModel, pipeline: Pipeline, root: Path | None = None) -> tuple[bytes, list[str], str]:
    """The int8 ONNX model of `resolved` (bytes, input names, the vectors' digest): from the cache,
    else built into it."""
    folder = cache_folder(resolved, root)
    found = load_cached(folder, _expected_manifest(resolved, pipeline))
    return found if found is not None else build_cached(resolved, pipeline, folder)


# ---------------------------------------------------------------------------------------------------
# runtime


def _tokenizer(folder: Path, max_length: int, cache: Path | None = None) -> SubsetTokenizer:
    """The folder's fast tokenizer, truncating to `max_length`, unpadded; from tokenizer.json through its
    Latin subset where one applies (tokenizer_subset.py: the same ids, a third of the load time),
    derived into `cache` once."""
    if (folder / "tokenizer.json").is_file():
        return load_tokenizer(folder / "tokenizer.json", max_length, cache)
    from .sentence import _quiet_offline_hub

    _quiet_offline_hub()
    from transformers import AutoTokenizer

    try:
        whole = AutoTokenizer.from_pretrained(str(folder), use_fast=True).backend_tokenizer
    except Exception as exc:
        raise ModelError(f"{folder}: no fast tokenizer (tokenizer.json) and none can be made: {exc}") from None
    return SubsetTokenizer(None, max_length, None, whole=whole)


def prompt_tokens(tokenizer: SubsetTokenizer, prompt: str) -> int:
    """Tokens of `prompt` at the start of an encoded text (leading special tokens included, the trailing one
    not), as sentence-transformers counts them for include_prompt=false."""
    encoding = tokenizer.encode(prompt)
    n = len(encoding.ids)
    if n and encoding.special_tokens_mask[-1]:
        n -= 1
    return n


def tokenize_for(encoder: Any, texts: Sequence[str], kind: str) -> tuple[list, np.ndarray, int]:
    """What both int8 runtimes feed their model: each text after the folder's prompt for `kind` (lower-cased where
    the folder says so), tokenised; returns (encodings, token counts, leading prompt tokens left out of pooling)."""
    prompt = encoder.resolved.prompt(kind)
    batch = [prompt + text for text in texts]
    if encoder.pipeline.lower_case:
        batch = [text.lower() for text in batch]
    skip = 0 if encoder.pipeline.include_prompt or not prompt else encoder._prompt_length(prompt)
    encodings = encoder.tokenizer.encode_batch(batch)
    lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
    return encodings, lengths, skip


class _Background:
    """`work()` run in a daemon thread; `result()` waits for it and returns its value or raises its error."""

    def __init__(self, work: Callable[[], Any]):
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name="onnx-session", daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self._value = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


class OnnxInt8Encoder:
    """A sentence-transformers model on ONNX Runtime with int8 weights (see the module doc). The
    fingerprint is the source weights' plus the sha256 of the quantised model, so passage vectors of
    one quantisation are never queried with another's (a new recipe or ONNX Runtime version);
    `backend` tells the runtime apart."""

    backend = "onnx-int8"
    #: sort texts by token length before batching (off only to measure what it gains)
    length_buckets = True
    #: tokens per batch, padding included (rows × the batch's longest text): a batch of long passages
    #: gets fewer rows, so its activations (and attention's rows × heads × width² scores) stay in cache
    #: and memory follows the budget, not the batch size; None: `batch_size` texts whatever their length.
    #: Chosen by measurement (bench/results/encoder_roofline.md); a text's vector is the same either way.
    batch_tokens: int | None = BATCH_TOKENS

    def __init__(self, config: EncoderConfig = EncoderConfig(), cache_root: str | Path | None = None,
                 threads: int | None = None, first_kind: str = QUERY):
        """`first_kind`: the kind of text this process embeds first (a build: PASSAGE), whose session is built
        while the tokenizer loads; a session for the other kind is built when it is first needed."""
        try:
            import onnxruntime as ort
        except ImportError:
            raise ModelError("encoder backend onnx-int8 needs the package onnxruntime (pip install onnxruntime onnx)") from None
        if config.device.startswith("cuda"):
            raise ModelError("encoder backend onnx-int8 runs on CPU; use backend torch for device cuda")
        check_kind(first_kind)
        resolved = resolve_model(config.model)
        self.name, self.fingerprint, self.resolved = config.model, resolved.fingerprint, resolved
        self.pipeline = read_pipeline(resolved.folder)
        self.dim = self.pipeline.dim
        self.batch_size = config.batch_size
        self.cache_folder = cache_folder(resolved, Path(cache_root) if cache_root is not None else None)
        self._ort, self._threads = ort, threads
        # the model's bytes are read and hashed and its session built (ONNX Runtime and hashlib release the
        # GIL) in a thread while this one loads the tokenizer (which holds it): ~0.3 s of a one-question process
        loading = _Background(lambda: self._session(ort, resolved, threads, first_kind))
        self.tokenizer = _tokenizer(self.pipeline.transformer, self.pipeline.max_seq_length, self.cache_folder.parent)
        session, self.inputs, digest = loading.result()
        #: the session of each kind of text embedded so far: the same model and threads, so the same vectors; they
        #: differ in how idle threads wait (threads.ONNX_QUERY_SPINNING, ONNX_ALLOW_SPINNING)
        self.sessions: dict[str, Any] = {first_kind: session}
        self.fingerprint = f"{resolved.fingerprint}+int8:{digest[:16]}"
        self._prompt_lengths: dict[str, int] = {}

    @property
    def session(self) -> Any:
        """The session built first (its options: threads, graph)."""
        return next(iter(self.sessions.values()))

    def session_for(self, kind: str) -> Any:
        """The session that embeds texts of `kind`, built on first use."""
        if kind not in self.sessions:
            self.sessions[kind] = self._session(self._ort, self.resolved, self._threads, kind)[0]
        return self.sessions[kind]

    def _session(self, ort: Any, resolved: ResolvedModel, threads: int | None, kind: str) -> tuple[Any, list[str], str]:
        """(ONNX Runtime session, input names, the vectors' digest) of the cached int8 model (built first if absent),
        its idle threads waiting as texts of `kind` want (threads.ONNX_QUERY_SPINNING)."""
        data, inputs, digest = prepare(resolved, self.pipeline, self.cache_folder.parent)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or current_policy().encoder  # physical cores, at most the policy's
        options.inter_op_num_threads = 1
        spinning = ONNX_QUERY_SPINNING if kind == QUERY else ONNX_ALLOW_SPINNING
        options.add_session_config_entry("session.intra_op.allow_spinning", spinning)
        if spinning == "1":
            options.add_session_config_entry("session.force_spinning_stop", "1")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"],
                                           disabled_optimizers=list(DISABLED_OPTIMIZERS))
        except Exception as exc:
            raise ModelError(f"{self.cache_folder}: ONNX Runtime cannot load the int8 model: {exc}") from None
        return session, inputs, digest

    def _prompt_length(self, prompt: str) -> int:
        if prompt not in self._prompt_lengths:
            self._prompt_lengths[prompt] = prompt_tokens(self.tokenizer, prompt)
        return self._prompt_lengths[prompt]

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        parts = []
        weights = mask[..., None].astype(np.float32)
        for mode in self.pipeline.pooling:
            if mode == "cls":
                parts.append(hidden[:, 0])
            elif mode == "max":
                parts.append(np.where(weights > 0, hidden, np.float32(-1e9)).max(axis=1))
            else:
                sums = np.einsum("bsh,bs->bh", hidden, mask.astype(np.float32))
                counts = np.maximum(weights.sum(axis=1), 1e-9)
                parts.append(sums / (counts if mode == "mean" else np.sqrt(counts)))
        vectors = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)

    def encode(self, texts: Sequence[str], show_progress: bool = False, kind: str = PASSAGE) -> np.ndarray:
        check_kind(kind)
        if len(texts) == 0:
            return empty(self.dim)
        encodings, lengths, skip = tokenize_for(self, texts, kind)
        # longest first: a batch pads to a similar length
        order = np.argsort(-lengths, kind="stable") if self.length_buckets else np.arange(len(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        session = self.session_for(kind)
        from ..progress import counter

        bar = counter(len(texts), "encoding", show_progress, unit="text")
        for rows in self._batches(order, lengths):
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(None, {name: feeds[name] for name in self.inputs})[0]
            if skip:
                mask = mask.copy()
                mask[:, :skip] = 0
            out[rows] = self._pool(hidden, mask)
            bar.update(len(rows))
        bar.close()
        return out

    def _batches(self, order: np.ndarray, lengths: np.ndarray) -> Iterator[np.ndarray]:
        """Positions of the texts of each batch, in `order`: at most `batch_size` texts and, where
        `batch_tokens` is set, at most that many tokens once padded to the batch's longest text (a
        longer text alone). Longest first, so the first text of a batch sets its width."""
        start, n = 0, len(order)
        while start < n:
            rows = self.batch_size
            if self.batch_tokens:
                width = int(lengths[order[start : start + rows]].max())
                rows = max(1, min(rows, self.batch_tokens // max(width, 1)))
            yield order[start : start + rows]
            start += rows
