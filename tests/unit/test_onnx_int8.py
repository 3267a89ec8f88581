"""The onnx-int8 encoder runtime (issue 12): export + int8 quantisation of the real all-MiniLM-L6-v2
folder into a cache with a checked manifest, vectors against the torch runtime, order after length
bucketing, prompts by kind, a damaged or concurrently built cache, the encoder's identity and the
"auto" backend.

One export (~6-10 s on two cores) serves the module; the damage test exports once more."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil

import numpy as np
import pytest
from helpers import ENCODER_TEXTS, assert_close_to_torch

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime onnx)")

from gpu_tigrag.config import EncoderConfig  # noqa: E402
from gpu_tigrag.encoders import load_encoder, resolve_backend, resolve_model  # noqa: E402
from gpu_tigrag.encoders import onnx_int8  # noqa: E402
from gpu_tigrag.encoders.onnx_int8 import MANIFEST_FILE, MODEL_FILE, OnnxInt8Encoder, read_pipeline  # noqa: E402
from gpu_tigrag.errors import ModelError  # noqa: E402

CONFIG = EncoderConfig(model="all-MiniLM-L6-v2", backend="onnx-int8", device="cpu")
TEXTS = ENCODER_TEXTS


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tigrag_cache")


@pytest.fixture(scope="module")
def encoder(cache):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIGRAG_CACHE_DIR", str(cache))
        return OnnxInt8Encoder(CONFIG)


def test_identity_and_cache_manifest(encoder, cache):
    resolved = resolve_model(CONFIG.model)
    assert (encoder.name, encoder.backend, encoder.dim) == ("all-MiniLM-L6-v2", "onnx-int8", 384)
    folder = cache / "onnx" / f"{resolved.fingerprint.split(':', 1)[1]}-int8"
    assert encoder.cache_folder == folder
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    # the same weights, and the quantised model that computed the vectors (before its attention was fused:
    # the fusion changes no bit of them, so a FORMAT 2 copy's fingerprint stays valid)
    assert encoder.fingerprint == f"{resolved.fingerprint}+int8:{manifest['vectors_sha256'][:16]}"
    assert manifest["attention"] == "fused" and manifest["vectors_sha256"] != manifest["sha256"]
    import onnxruntime

    assert manifest["source_fingerprint"] == resolved.fingerprint
    assert manifest["onnxruntime"] == onnxruntime.__version__
    assert manifest["quantization"]["weight_type"] == "QInt8" and manifest["quantization"]["per_channel"]
    assert manifest["sha256"] == onnx_int8._sha256_bytes((folder / MODEL_FILE).read_bytes())
    assert sorted(p.name for p in folder.iterdir()) == [MANIFEST_FILE, MODEL_FILE]  # no fp32 copy left
    import onnx

    ops = [n.op_type for n in onnx.load(str(folder / MODEL_FILE)).graph.node]
    # every MatMul with a weight is int8 (6 per layer), its activations quantised per row: no per-tensor
    # DynamicQuantizeLinear is left; the 2 float attention products and the softmax of each layer are
    # one fused MultiHeadAttention, with no transposes left
    assert ops.count("MatMulIntegerToFloat") == 6 * 6 and ops.count("MultiHeadAttention") == 6
    assert "MatMul" not in ops and "Softmax" not in ops and "Transpose" not in ops
    assert "DynamicQuantizeLinear" not in ops and "MatMulInteger" not in ops
    assert ops.count("QuantizeLinear") == 6 * 4  # q/k/v share one input; attention output, FFN in and out
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no temporaries


def test_cached_copy_is_loaded_without_export(encoder, cache, monkeypatch):
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(cache))

    def no_export(*args):
        raise AssertionError("exported again although the cache is valid")

    monkeypatch.setattr(onnx_int8, "_export_fp32", no_export)
    again = OnnxInt8Encoder(CONFIG)
    np.testing.assert_array_equal(again.encode(TEXTS), encoder.encode(TEXTS))


def test_load_encoder_dispatch(encoder, cache, monkeypatch):
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(cache))
    loaded = load_encoder(CONFIG)
    assert isinstance(loaded, OnnxInt8Encoder) and loaded.backend == "onnx-int8"


def test_vectors_close_to_torch(encoder):
    assert_close_to_torch(encoder, TEXTS, "all-MiniLM-L6-v2", least=0.98)


def test_order_restored_after_length_bucketing(encoder, monkeypatch):
    """Batches of 2 sorted by length: each vector comes back at its text's input position. The texts
    differ in length, so any input order gives the same batches, hence the same vectors permuted,
    and each is its text's vector encoded alone (per-row activation scales)."""
    single = np.stack([encoder.encode([t])[0] for t in TEXTS])
    monkeypatch.setattr(encoder, "batch_size", 2)
    permutation = [3, 0, 5, 2, 4, 1]
    in_order = encoder.encode(TEXTS)
    batched = encoder.encode([TEXTS[i] for i in permutation])
    np.testing.assert_allclose(batched, in_order[permutation], atol=1e-6)
    similarity = batched @ single.T
    assert list(similarity.argmax(axis=1)) == permutation
    assert np.diag(similarity[:, permutation]).min() >= 0.98
    assert encoder.encode([]).shape == (0, 384)


def test_batches_follow_the_token_budget_and_keep_every_vector(encoder, monkeypatch):
    """A batch holds at most `batch_tokens` tokens once padded to its longest text (a longer text alone) and at
    most `batch_size` texts; every text is in one batch; and the vectors are those of any other batching, bit for
    bit (per-row activation scales)."""
    texts = [TEXTS[i % len(TEXTS)] + " and more" * (i % 7) for i in range(40)]
    lengths = np.array([len(e.ids) for e in encoder.tokenizer.encode_batch(texts)])
    order = np.argsort(-lengths, kind="stable")
    seen = []
    for budget, size in ((64, 64), (16, 64), (400, 3), (None, 5)):
        monkeypatch.setattr(encoder, "batch_tokens", budget)
        monkeypatch.setattr(encoder, "batch_size", size)
        batches = list(encoder._batches(order, lengths))
        assert sorted(np.concatenate(batches).tolist()) == list(range(len(texts)))
        for rows in batches:
            assert len(rows) <= size
            if budget is not None:
                assert len(rows) == 1 or len(rows) * lengths[rows].max() <= budget
        seen.append(encoder.encode(texts))
    assert max(lengths) > 16  # the budget of 16 puts some texts alone
    for vectors in seen[1:]:
        np.testing.assert_array_equal(vectors, seen[0])


def test_prompts_applied_by_kind(encoder, monkeypatch):
    resolved = dataclasses.replace(encoder.resolved, prompts={"query": "query: ", "passage": "passage: "})
    monkeypatch.setattr(encoder, "resolved", resolved)
    as_query = encoder.encode(["who directed Titanic?"], kind="query")
    as_passage = encoder.encode(["who directed Titanic?"], kind="passage")
    monkeypatch.setattr(encoder, "resolved", dataclasses.replace(resolved, prompts={}))
    np.testing.assert_allclose(as_query, encoder.encode(["query: who directed Titanic?"]), atol=1e-6)
    np.testing.assert_allclose(as_passage, encoder.encode(["passage: who directed Titanic?"]), atol=1e-6)
    assert float((as_query @ as_passage.T)[0, 0]) < 0.9999
    with pytest.raises(ModelError):
        encoder.encode(["x"], kind="document")


def test_prompt_excluded_from_pooling_when_the_folder_says_so(encoder, monkeypatch):
    """include_prompt=false (sentence-transformers' Pooling): the prompt's tokens, [CLS] included, do
    not pool; the text's own tokens still see the prompt through attention."""
    monkeypatch.setattr(encoder, "resolved", dataclasses.replace(encoder.resolved, prompts={"query": "query: "}))
    assert encoder._prompt_length("query: ") == 3  # [CLS] query :
    with_prompt = encoder.encode(["cats"], kind="query")
    monkeypatch.setattr(encoder, "pipeline", dataclasses.replace(encoder.pipeline, include_prompt=False))
    without = encoder.encode(["cats"], kind="query")
    assert float((with_prompt @ without.T)[0, 0]) < 0.999


def test_damaged_cache_is_rebuilt(encoder, tmp_path, monkeypatch, caplog):
    source = encoder.cache_folder
    root = tmp_path / "cache"
    shutil.copytree(source, root / "onnx" / source.name)
    model = root / "onnx" / source.name / MODEL_FILE
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(root))
    with caplog.at_level(logging.INFO, logger="gpu_tigrag.encoders.onnx_int8"):
        rebuilt = OnnxInt8Encoder(CONFIG)
    assert "damaged" in caplog.text and "exporting" in caplog.text
    manifest = json.loads((root / "onnx" / source.name / MANIFEST_FILE).read_text())
    assert manifest["sha256"] == onnx_int8._sha256_bytes(model.read_bytes())
    np.testing.assert_allclose(rebuilt.encode(TEXTS), encoder.encode(TEXTS), atol=1e-5)
    # an outdated manifest (another ONNX Runtime) is rebuilt too, without exporting when valid again
    manifest["onnxruntime"] = "0.0.1"
    (root / "onnx" / source.name / MANIFEST_FILE).write_text(json.dumps(manifest))
    expected = onnx_int8._expected_manifest(encoder.resolved, encoder.pipeline)
    assert onnx_int8.load_cached(root / "onnx" / source.name, expected) is None
    assert "other settings (onnxruntime)" in caplog.text


def test_concurrent_build_keeps_the_first_copy(encoder, tmp_path, monkeypatch):
    """Another process finishes the same folder while this one exports: this one drops its copy and
    uses the finished one (its files unchanged)."""
    target = tmp_path / "onnx" / encoder.cache_folder.name
    real_quantize = onnx_int8._quantize

    def quantize_while_another_finishes(source, out):
        found = real_quantize(source, out)
        shutil.copytree(encoder.cache_folder, target)
        return found

    monkeypatch.setattr(onnx_int8, "_quantize", quantize_while_another_finishes)
    before = None
    data, inputs, _digest = onnx_int8.prepare(encoder.resolved, encoder.pipeline, tmp_path / "onnx")
    before = (encoder.cache_folder / MODEL_FILE).read_bytes()
    assert data == before and inputs == encoder.inputs
    assert (target / MODEL_FILE).read_bytes() == before
    assert not [p for p in target.parent.iterdir() if p.name.startswith(".")]


def test_fused_attention_gives_the_unfused_vectors_bit_for_bit(encoder, tmp_path, monkeypatch):
    """The unfused model (the attention rewrite refused) computes every vector of the fused one exactly,
    in several batchings, and carries the same fingerprint: indexes of either are queried by the other."""
    from gpu_tigrag.encoders import onnx_attention

    def refuse(model):
        raise onnx_attention.AttentionPatternError("refused by the test")

    monkeypatch.setattr(onnx_attention, "fuse_attention", refuse)
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(tmp_path))
    unfused = OnnxInt8Encoder(CONFIG)
    manifest = json.loads((unfused.cache_folder / MANIFEST_FILE).read_text())
    assert manifest["attention"] == "unfused" and manifest["vectors_sha256"] == manifest["sha256"]
    assert unfused.fingerprint == encoder.fingerprint
    texts = [TEXTS[i % len(TEXTS)] + " and more" * (i % 5) for i in range(24)]
    for size, budget in ((64, None), (1, None), (5, 96)):
        for runtime in (encoder, unfused):
            monkeypatch.setattr(runtime, "batch_size", size)
            monkeypatch.setattr(runtime, "batch_tokens", budget)
        for kind in ("query", "passage"):
            np.testing.assert_array_equal(encoder.encode(texts, kind=kind), unfused.encode(texts, kind=kind))


def test_an_attention_of_another_shape_is_left_unfused():
    """The rewrite changes nothing unless every attention block has the pattern it replaces."""
    import onnx
    from onnx import TensorProto, helper

    from gpu_tigrag.encoders.onnx_attention import AttentionPatternError, fuse_attention

    x = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s"])
    graph = helper.make_graph([helper.make_node("Cast", ["attention_mask"], ["f"], to=TensorProto.FLOAT),
                               helper.make_node("Softmax", ["f"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph)
    before = model.SerializeToString()
    with pytest.raises(AttentionPatternError, match="expected a Add producer"):
        fuse_attention(model)
    assert model.SerializeToString() == before
    with pytest.raises(AttentionPatternError, match="no attention softmax"):
        fuse_attention(helper.make_model(helper.make_graph([helper.make_node("Cast", ["attention_mask"], ["y"],
                                                                                to=TensorProto.FLOAT)],
                                                            "g", [x], [y])))
    assert onnx.checker.check_model(model) is None


def test_unsupported_modules_are_errors(tmp_path):
    folder = resolve_model(CONFIG.model).folder
    copy = tmp_path / "model"
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("*.safetensors"))
    pipeline = read_pipeline(copy)
    assert (pipeline.pooling, pipeline.max_seq_length, pipeline.dim) == (("mean",), 256, 384)
    modules = json.loads((copy / "modules.json").read_text())
    (copy / "modules.json").write_text(json.dumps([*modules, {"idx": 3, "name": "3", "path": "3_Dense",
                                                              "type": "sentence_transformers.models.Dense"}]))
    with pytest.raises(ModelError, match="Dense"):
        read_pipeline(copy)
    (copy / "modules.json").write_text(json.dumps(modules))
    (copy / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 384,
                                                                "pooling_mode_lasttoken": True}))
    with pytest.raises(ModelError, match="lasttoken"):
        read_pipeline(copy)


def test_failed_export_is_an_error(tmp_path, monkeypatch):
    folder = resolve_model(CONFIG.model).folder
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    (copy / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 384, "vocab_size": -5}))
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(ModelError, match="export"):
        OnnxInt8Encoder(EncoderConfig(model=str(copy), backend="onnx-int8", device="cpu"))
    assert not (tmp_path / "cache" / "onnx").exists() or not any((tmp_path / "cache" / "onnx").iterdir())


def test_auto_backend_on_cpu(monkeypatch):
    """On a CPU where numba-int8 is not the measured choice (numba_int8.preferred_here), auto is onnx-int8."""
    import torch

    from gpu_tigrag.encoders import numba_int8

    monkeypatch.setattr(numba_int8, "preferred_here", lambda model: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_backend(EncoderConfig(backend="auto")) == "onnx-int8"
    assert resolve_backend(EncoderConfig(backend="auto", device="cpu")) == "onnx-int8"
    assert resolve_backend(EncoderConfig(backend="torch")) == "torch"
    assert resolve_backend(EncoderConfig(model="hashing:64", backend="auto")) == "hashing"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_backend(EncoderConfig(backend="auto")) == "torch"
    assert resolve_backend(EncoderConfig(backend="auto", device="cpu")) == "onnx-int8"


def test_queries_and_passages_get_their_own_session_and_the_same_vectors(cache, monkeypatch):
    """Query texts run on a session whose idle threads spin while a run lasts (nothing runs beside a query's
    encoder call), passages on one whose threads sleep (a build's NER thread needs the core); the session of
    the first kind is built on loading, the other when first needed; the vectors do not depend on which session
    computed them (MiniLM has no prompts, so the same texts as either kind are the same inputs)."""
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(cache))
    encoder = OnnxInt8Encoder(CONFIG, first_kind="passage")
    assert list(encoder.sessions) == ["passage"]
    passages = encoder.encode(TEXTS, kind="passage")
    assert list(encoder.sessions) == ["passage"]
    queries = encoder.encode(TEXTS, kind="query")
    assert list(encoder.sessions) == ["passage", "query"]
    np.testing.assert_array_equal(queries, passages)
    spinning = {kind: session.get_session_options().get_session_config_entry("session.intra_op.allow_spinning")
                for kind, session in encoder.sessions.items()}
    assert spinning == {"passage": "0", "query": "1"}
    assert encoder.sessions["query"].get_session_options().get_session_config_entry("session.force_spinning_stop") == "1"
    assert list(OnnxInt8Encoder(CONFIG).sessions) == ["query"]  # a query process prepares the query session
    with pytest.raises(ModelError, match="text kind"):
        OnnxInt8Encoder(CONFIG, first_kind="questions")


def test_builds_load_the_encoder_for_passages(monkeypatch, tmp_path):
    """Every build path asks `load_encoder` for a passage encoder (its first session the non-spinning one)."""
    from gpu_tigrag.config import IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.encoders import load_encoder as real_load
    from gpu_tigrag.index import add as add_module, build as build_module, stream as stream_module
    from helpers import EXAMPLES, EXAMPLE_ENCODER, string_entities

    asked = []

    def recording(config, first_kind="query"):
        asked.append(first_kind)
        return real_load(config, first_kind=first_kind)

    for module in (build_module, stream_module, add_module):
        monkeypatch.setattr(module, "load_encoder", recording)
    config = IndexConfig(encoder=EncoderConfig(model=EXAMPLE_ENCODER))
    corpus = load_corpus(EXAMPLES / "corpus.json")
    index = build_module.build_index(corpus[:20], config, entity_extractor=string_entities)
    add_module.add_passages(index, corpus[20:], entity_extractor=string_entities)
    stream_module.build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "streamed", config, partition_size=10,
                                        workers=1, entity_extractor=string_entities)
    assert asked == ["passage", "passage", "passage"]
