"""The numba-int8 encoder runtime (issue 31, item 2): the int8 tiles (VNNI and portable twins) against exact
integer products, the kernels' exp and GELU against float64, and the real all-MiniLM-L6-v2 folder end to end:
vectors against the torch runtime, a text's vector bit-identical alone, in any batch, in any order, across
kernel calls and with any thread count, prompts by kind, and clear errors for what it does not run."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import numba
import numpy as np
import pytest
from helpers import ENCODER_TEXTS, assert_close_to_torch
from numba import njit

from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.encoders import load_encoder, resolve_model
from gpu_tigrag.encoders import numba_int8
from gpu_tigrag.encoders.numba_int8 import NumbaInt8Encoder, quantize_columns
from gpu_tigrag.errors import ModelError
from gpu_tigrag.kernels import attention_tiles, int8_encoder, int8_gemm

CONFIG = EncoderConfig(model="all-MiniLM-L6-v2", backend="numba-int8", device="cpu")
TEXTS = ENCODER_TEXTS


# ---------------------------------------------------------------------------------------------------
# the int8 products


@pytest.mark.parametrize("k, n", [(4, 32), (64, 96), (384, 1536)])
def test_rows_times_gives_the_exact_integer_products(k, n):
    rng = np.random.default_rng(k + n)
    weights = rng.integers(-127, 128, (k, n), dtype=np.int8)
    packed = int8_gemm.pack(weights)
    for rows in (1, 7, 8, 9, 37):
        a = rng.integers(0, 256, (rows, k), dtype=np.uint8)
        out = np.full((rows, n), -1, dtype=np.int32)
        int8_gemm.rows_times(a, 0, rows, packed, out)
        np.testing.assert_array_equal(out, a.astype(np.int64) @ weights.astype(np.int64))


def test_portable_tile_is_the_vnni_tile():
    """The twins give the same integers, tails of a tile included (on a CPU without VNNI: portable against numpy)."""
    rng = np.random.default_rng(1)
    weights = rng.integers(-127, 128, (96, 64), dtype=np.int8)
    packed = int8_gemm.pack(weights)
    a = rng.integers(0, 256, (11, 96), dtype=np.uint8)
    expected = a.astype(np.int64) @ weights.astype(np.int64)
    twins = [int8_gemm.tile_portable] + ([int8_gemm.tile_vnni] if int8_gemm.HAS_VNNI else [])
    for tile in twins:
        out = np.zeros((11, 64), dtype=np.int32)
        for panel in range(2):
            tile(a, 0, 8, packed, panel, out, panel * int8_gemm.PANEL)
            tile(a, 8, 3, packed, panel, out, panel * int8_gemm.PANEL)
        np.testing.assert_array_equal(out, expected)


needs_amx = pytest.mark.skipif(not int8_gemm.amx_ready(), reason="no AMX tiles on this CPU (or not granted)")


@needs_amx
@pytest.mark.parametrize("k, n", [(64, 32), (384, 1152), (1536, 384)])
def test_amx_products_are_the_exact_integer_products(k, n):
    """The AMX tiles against numpy's exact products: every row count around the two 16-row A tiles (one tile, a
    partial second, both, several calls), starting rows inside a larger array, rows outside the call untouched."""
    rng = np.random.default_rng(k * n)
    weights = rng.integers(-127, 128, (k, n), dtype=np.int8)
    packed = int8_gemm.pack(weights)
    a = rng.integers(0, 256, (80, k), dtype=np.uint8)
    expected = a.astype(np.int64) @ weights.astype(np.int64)
    for row, rows in ((0, 1), (0, 15), (0, 16), (3, 17), (5, 31), (0, 32), (7, 33), (11, 69)):
        out = np.full((80, n), -1, dtype=np.int32)
        int8_gemm.rows_times(a, row, rows, packed, out, True)
        np.testing.assert_array_equal(out[row:row + rows], expected[row:row + rows])
        assert (out[:row] == -1).all() and (out[row + rows:] == -1).all()
    if k % int8_gemm.AMX_K == 0:
        short = int8_gemm.pack(weights[: k - 32])  # K not whole tile steps: refused, not cut short
        with pytest.raises(ValueError, match="multiple of AMX_K"):
            int8_gemm.rows_times(a[:, : k - 32], 0, 4, short, np.zeros((4, n), dtype=np.int32), True)


def test_amx_is_asked_for_only_where_it_can_run():
    """amx_ready: never without AMX on the CPU; the encoder uses the tiles only where ready and the product
    depths are whole tile steps."""
    if not int8_gemm.HAS_AMX:
        assert not int8_gemm.amx_ready()
    assert numba_int8.uses_amx(384, 1536) == int8_gemm.amx_ready()
    assert not numba_int8.uses_amx(384 + 32, 1536)


def test_pack_refuses_shapes_it_cannot_tile():
    with pytest.raises(ValueError, match="multiple of 4"):
        int8_gemm.pack(np.zeros((6, 32), dtype=np.int8))
    with pytest.raises(ValueError, match="N of 32"):
        int8_gemm.pack(np.zeros((8, 40), dtype=np.int8))


def test_columns_are_quantised_symmetrically_per_output():
    w = np.array([[1.0, -2.0, 0.0], [0.5, 4.0, 0.0]], dtype=np.float32)  # out × in
    q, scales = quantize_columns(w)
    assert q.shape == (3, 2) and q.dtype == np.int8
    np.testing.assert_allclose(scales, [2.0 / 127, 4.0 / 127])
    np.testing.assert_array_equal(q[:, 0], [64, -127, 0])  # 1 / (2/127) = 63.5 rounds to even
    np.testing.assert_array_equal(q[:, 1], [16, 127, 0])


# ---------------------------------------------------------------------------------------------------
# the float steps


@njit
def _gelu_all(x, out):
    for i in range(x.shape[0]):
        out[i] = int8_encoder._gelu(x[i])


def test_gelu_is_exact_gelu_to_float32_precision():
    x = np.linspace(-12, 12, 200_001, dtype=np.float32)
    out = np.empty_like(x)
    _gelu_all(x, out)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    assert np.abs(out - exact).max() < 2e-6
    assert np.isfinite(out).all()


@njit
def _softmax_by_tiles(scores, length, inverse):
    for i in range(0, scores.shape[0], attention_tiles.TILE_ROWS):
        rows = min(attention_tiles.TILE_ROWS, scores.shape[0] - i)
        attention_tiles._softmax_tile(scores[i:], np.int64(rows), np.int64(length), np.int64(scores.shape[1]),
                                      inverse[i:])


@njit
def _softmax_by_rows(scores, length, inverse):
    for i in range(scores.shape[0]):
        attention_tiles._softmax_row(scores, i, length, inverse)


@pytest.mark.parametrize("softmax", [_softmax_by_tiles, _softmax_by_rows])
def test_softmax_rows_match_float64_and_never_overflow(softmax):
    """The vector tile (zeros past the text's keys) and the plain loops (untouched there) against float64."""
    rng = np.random.default_rng(2)
    for spread in (1.0, 30.0, 300.0):  # 300: differences far below −87, where exp is clamped
        scores = (rng.standard_normal((13, 32)) * spread).astype(np.float32)
        expected = np.exp(scores[:, :19].astype(np.float64) - scores[:, :19].max(axis=1, keepdims=True))
        tail = scores[:, 19:].copy()
        inverse = np.zeros(13, dtype=np.float32)
        softmax(scores, 19, inverse)
        assert np.isfinite(scores).all()
        np.testing.assert_allclose(scores[:, :19], expected, rtol=1e-5, atol=2e-38)
        np.testing.assert_allclose(inverse, 1 / expected.sum(axis=1), rtol=1e-5)
        np.testing.assert_array_equal(scores[:, 19:], 0 if softmax is _softmax_by_tiles else tail)


def _attention_reference(qkv, start, length, head, size, hidden):
    q = qkv[start:start + length, head * size:(head + 1) * size].astype(np.float64)
    k = qkv[start:start + length, hidden + head * size:hidden + (head + 1) * size].astype(np.float64)
    v = qkv[start:start + length, 2 * hidden + head * size:2 * hidden + (head + 1) * size].astype(np.float64)
    scores = q @ k.T / math.sqrt(size)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return (weights / weights.sum(axis=1, keepdims=True)) @ v


@pytest.mark.parametrize("size", [32, 64, 16, 48])  # tiles (multiples of 32) and plain loops
def test_attention_matches_float64_at_every_length(size):
    """Lengths around the tiles' 4 rows and 32 columns; each head writes its own columns only."""
    heads = 3
    hidden = heads * size
    rng = np.random.default_rng(size)
    for length in (1, 2, 3, 4, 5, 23, 31, 32, 33, 70):
        qkv = (rng.standard_normal((length + 5, 3 * hidden)) * 2).astype(np.float32)
        out = np.full((length + 5, hidden), np.float32(7.0))
        scratch = np.full(attention_tiles.scratch_floats(length, size), np.nan, dtype=np.float32)
        for head in range(heads):
            attention_tiles.attend(qkv, 2, length, head, size, hidden, scratch, out)
            expected = _attention_reference(qkv, 2, length, head, size, hidden)
            np.testing.assert_allclose(out[2:2 + length, head * size:(head + 1) * size], expected, rtol=2e-4, atol=2e-5)
        assert (out[:2] == 7).all() and (out[2 + length:] == 7).all()


@pytest.mark.parametrize("size", [32, 48])
def test_a_texts_attention_does_not_depend_on_its_neighbours(size):
    """The same rows at another offset, beside other rows, with a longer text's scratch: the same bits."""
    hidden = 2 * size
    rng = np.random.default_rng(9)
    text = rng.standard_normal((23, 3 * hidden)).astype(np.float32)
    alone_qkv, alone = text.copy(), np.zeros((23, hidden), dtype=np.float32)
    attention_tiles.attend(alone_qkv, 0, 23, 1, size, hidden, np.zeros(attention_tiles.scratch_floats(23, size),
                           dtype=np.float32), alone)
    packed = rng.standard_normal((100, 3 * hidden)).astype(np.float32)
    packed[40:63] = text
    out = np.zeros((100, hidden), dtype=np.float32)
    scratch = rng.standard_normal(attention_tiles.scratch_floats(90, size)).astype(np.float32)
    attention_tiles.attend(packed, 40, 23, 1, size, hidden, scratch, out)
    np.testing.assert_array_equal(out[40:63], alone)


def test_bundles_keep_consecutive_texts_up_to_the_row_budget():
    """Texts together while their rows fit the budget; a longer text alone; every text in exactly one bundle."""
    bounds = int8_encoder.bundles(np.array([5, 5, 200, 3, 3, 9, 1], dtype=np.int64), 10)
    np.testing.assert_array_equal(bounds, [0, 2, 3, 5, 7])
    np.testing.assert_array_equal(int8_encoder.bundles(np.array([40], dtype=np.int64), 10), [0, 1])
    rng = np.random.default_rng(4)
    lengths = rng.integers(1, 60, 300).astype(np.int64)
    bounds = int8_encoder.bundles(lengths, 128)
    assert bounds[0] == 0 and bounds[-1] == 300 and (np.diff(bounds) >= 1).all()
    for first, end in zip(bounds[:-1], bounds[1:]):
        assert end - first == 1 or lengths[first:end].sum() <= 128
        assert end == 300 or lengths[first:end + 1].sum() > 128  # the next text did not fit


# ---------------------------------------------------------------------------------------------------
# the encoder


@pytest.fixture(scope="module")
def encoder():
    return NumbaInt8Encoder(CONFIG)


def test_identity_and_dispatch(encoder):
    resolved = resolve_model(CONFIG.model)
    assert (encoder.name, encoder.backend, encoder.dim) == ("all-MiniLM-L6-v2", "numba-int8", 384)
    assert encoder.fingerprint == f"{resolved.fingerprint}+numba-int8:{numba_int8.RECIPE}"
    assert isinstance(load_encoder(CONFIG), NumbaInt8Encoder)


def test_vectors_close_to_torch(encoder):
    assert_close_to_torch(encoder, TEXTS, "all-MiniLM-L6-v2", least=0.99)


def test_a_text_has_one_vector_whatever_its_batch(encoder, monkeypatch):
    """Alone, in the batch, in another order, split over many kernel calls, on one thread or two: the same bits."""
    alone = np.stack([encoder.encode([t])[0] for t in TEXTS])
    np.testing.assert_array_equal(encoder.encode(TEXTS), alone)
    permutation = [3, 0, 5, 2, 4, 1]
    np.testing.assert_array_equal(encoder.encode([TEXTS[i] for i in permutation]), alone[permutation])
    np.testing.assert_array_equal(encoder.encode(TEXTS * 3)[len(TEXTS):2 * len(TEXTS)], alone)
    monkeypatch.setattr(numba_int8, "CALL_ROWS", 40)  # several calls, the longest text alone in one
    np.testing.assert_array_equal(encoder.encode(TEXTS), alone)
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        monkeypatch.setattr(encoder, "threads", threads)
        np.testing.assert_array_equal(encoder.encode(TEXTS), alone)
    assert encoder.encode([]).shape == (0, 384)


@needs_amx
def test_amx_and_vnni_give_the_same_vectors(encoder, monkeypatch):
    """The AMX tiles and the VNNI (or portable) tile sum the same integers: the same vectors bit for bit, so an index
    built on one CPU answers queries encoded on the other."""
    assert encoder.amx
    on_tiles = encoder.encode(TEXTS)
    monkeypatch.setattr(encoder, "amx", False)
    np.testing.assert_array_equal(encoder.encode(TEXTS), on_tiles)


def test_calls_split_texts_by_rows(monkeypatch):
    monkeypatch.setattr(numba_int8, "CALL_ROWS", 10)
    parts = [list(p) for p in NumbaInt8Encoder._calls(np.array([4, 5, 12, 3, 3, 3, 1]))]
    assert parts == [[0, 1], [2], [3, 4, 5, 6]]


def test_prompts_applied_by_kind(encoder, monkeypatch):
    """A query is embedded as the prompt + its text (the folder pools the prompt's tokens too)."""
    monkeypatch.setattr(encoder, "resolved", dataclasses.replace(encoder.resolved, prompts={"query": "query: "}))
    query = encoder.encode(["cats"], kind="query")[0]
    np.testing.assert_array_equal(query, encoder.encode(["query: cats"], kind="passage")[0])
    assert not np.array_equal(query, encoder.encode(["cats"], kind="passage")[0])


def _copy(tmp_path, change):
    folder = resolve_model(CONFIG.model).folder
    copy = tmp_path / "model"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "config.json").read_text())
    change(config)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(model_type="xlm-roberta"), "runs BERT models"),
    (lambda c: c.update(hidden_act="relu"), "runs BERT models"),
    (lambda c: c.update(intermediate_size=1000), "multiples of 32"),
    (lambda c: c.update(num_attention_heads="many"), "must be integers"),
])
def test_models_it_does_not_run_are_clear_errors(tmp_path, change, message):
    copy = _copy(tmp_path, change)
    with pytest.raises(ModelError, match=message):
        NumbaInt8Encoder(dataclasses.replace(CONFIG, model=str(copy)))


def test_weights_that_do_not_fit_the_configuration_are_errors(tmp_path):
    copy = _copy(tmp_path, lambda c: c.update(num_hidden_layers=7))  # the file holds 6 layers
    with pytest.raises(ModelError, match="no tensor 'encoder.layer.6"):
        NumbaInt8Encoder(dataclasses.replace(CONFIG, model=str(copy)))


def test_gpu_device_is_refused():
    with pytest.raises(ModelError, match="runs on CPU"):
        NumbaInt8Encoder(dataclasses.replace(CONFIG, device="cuda"))


def test_auto_picks_numba_int8_only_where_it_was_measured_faster(monkeypatch):
    """auto on a CPU: numba-int8 for a BERT model on AVX-512 VNNI, with AMX or without; onnx-int8 without VNNI
    (portable loops) and for models the kernels do not run."""
    import torch

    from gpu_tigrag.encoders import resolve_backend

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    auto = dataclasses.replace(CONFIG, backend="auto")
    for vnni, amx, expected in ((True, False, "numba-int8"), (True, True, "numba-int8"), (False, False, "onnx-int8")):
        monkeypatch.setattr(int8_gemm, "HAS_VNNI", vnni)
        monkeypatch.setattr(int8_gemm, "HAS_AMX", amx)
        assert resolve_backend(auto) == expected
        assert resolve_backend(dataclasses.replace(auto, model="hashing:64")) == "hashing"
    monkeypatch.setattr(int8_gemm, "HAS_VNNI", True)
    monkeypatch.setattr(int8_gemm, "HAS_AMX", False)
    monkeypatch.setattr(numba_int8, "_check_architecture", lambda pipeline: (_ for _ in ()).throw(ModelError("no")))
    assert resolve_backend(auto) == "onnx-int8"
