"""The CPU encoder against this machine's own limit (issue 31, item 1): how fast ONNX Runtime multiplies
int8 (MatMulIntegerToFloat, u8 activations × s8 weights, one scale per output channel, as the onnx-int8
model does) and fp32 matrices at the model's own shapes, how many operations a token costs, and what the
encoder achieves on query texts and passage chunks at several batchings: efficiency = achieved ÷ measured
int8 rate. ONNX Runtime's per-op profile says where the rest of the time goes. The project's own int8 runtime
(`numba-int8`: one fused pass per block of rows, no padding) is timed against ONNX Runtime on the same texts, in
interleaved rounds, with its own tile's int8 rate, each runtime's cosine to the torch fp32 runtime and the check
that a text's numba-int8 vector is the same alone as in its batch.

The achieved rate counts the operations of the real tokens only (padding is waste, not work): the
linear layers' 2·K·N per token plus attention's 4·hidden·length per token and layer. Batchings are
timed in interleaved rounds (best round, median beside it) so load from other processes falls on all
alike: `batch_size` texts per batch whatever their length (the runtime before `batch_tokens`), and
batches of at most `batch_tokens` padded tokens at several budgets.

    python bench/encoder_roofline.py [--model multilingual-e5-small] [--rounds 2] [--passages 300] [--runtime-rounds 5]
    python bench/encoder_roofline.py --smoke     # all-MiniLM-L6-v2, the example texts, writes nothing

Queries: the 2Wiki dev questions; passages: 2Wiki chunk texts (the index's chunker, a fixed sample).
Writes bench/results/encoder_roofline.{json,md}.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import DATA, DATASETS, ROOT, write_results

import numpy as np

COMMAND = "python bench/encoder_roofline.py"
#: rows of the GEMM timings: tokens per call
GEMM_ROWS = (32, 512, 4096)
#: batchings timed: (label, batch_size, batch_tokens)
BATCHINGS = [("64 texts", 64, None), ("1 text", 1, None), ("512 tokens", 256, 512), ("1024 tokens", 256, 1024),
             ("2048 tokens", 256, 2048)]
INT8_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16", "avx512_bf16")


def cpu() -> dict:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    field = lambda key: next((line.split(":", 1)[1].strip() for line in text.splitlines()  # noqa: E731
                              if line.startswith(key)), "")
    flags = set(field("flags").split())
    from gpu_tigrag.threads import physical_cores

    return {"model": field("model name"), "family": field("cpu family"), "model_number": field("model\t"),
            "flags": [f for f in INT8_FLAGS if f in flags], "physical_cores": physical_cores()}


def int8_kernel(flags: list[str]) -> str:
    """The instructions ONNX Runtime's u8×s8 kernels use on this CPU (MLAS picks the widest present)."""
    if "amx_int8" in flags:
        return "AMX tiles"
    if "avx512_vnni" in flags:
        return "AVX-512 VNNI (vpdpbusd)"
    if "avx_vnni" in flags:
        return "AVX-VNNI (vpdpbusd, 256-bit)"
    if "avx512bw" in flags:
        return "AVX-512BW (vpmaddubsw + vpmaddwd)"
    return "AVX2 (vpmaddubsw + vpmaddwd)" if "avx2" in flags else "SSE"


# ---------------------------------------------------------------------------------------------------
# the machine's GEMM rates


def gemm_model(kind: str, k: int, n: int) -> bytes:
    """One-node ONNX model Y = A·W: fp32 MatMul, or MatMulIntegerToFloat as the int8 model uses it."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    if kind == "fp32":
        inits = [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "W")]
        node = helper.make_node("MatMul", ["A", "W"], ["Y"])
        a_type = TensorProto.FLOAT
    else:
        inits = [numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "W"),
                 numpy_helper.from_array(np.full(n, 0.01, np.float32), "w_scale"),
                 numpy_helper.from_array(np.zeros(n, np.int8), "w_zero"),
                 numpy_helper.from_array(np.array(1.0, np.float32), "a_scale"),
                 numpy_helper.from_array(np.array(128, np.uint8), "a_zero")]
        node = helper.make_node("MatMulIntegerToFloat", ["A", "W", "a_scale", "w_scale", "a_zero", "w_zero"], ["Y"],
                                domain="com.microsoft")
        a_type = TensorProto.UINT8
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("A", a_type, ["M", k])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", n])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


def gemm_rates(shapes: list[tuple[int, int]], threads: int, seconds: float) -> list[dict]:
    """GOP/s (2·M·K·N per second) of each kind, weight shape and row count, best of 3 timed runs."""
    import onnxruntime as ort

    rows = []
    for kind in ("int8", "fp32"):
        for k, n in shapes:
            options = ort.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
            session = ort.InferenceSession(gemm_model(kind, k, n), options, providers=["CPUExecutionProvider"])
            for m in GEMM_ROWS:
                rng = np.random.default_rng(1)
                a = (rng.integers(0, 256, (m, k)).astype(np.uint8) if kind == "int8"
                     else rng.standard_normal((m, k)).astype(np.float32))
                session.run(None, {"A": a})
                calls = max(2, int(seconds * 40e9 / (2 * m * k * n)))
                best = float("inf")
                for _ in range(3):
                    start = time.perf_counter()
                    for _ in range(calls):
                        session.run(None, {"A": a})
                    best = min(best, (time.perf_counter() - start) / calls)
                rows.append({"kind": kind, "k": k, "n": n, "m": m, "gops": 2 * m * k * n / best / 1e9})
    return rows


# ---------------------------------------------------------------------------------------------------
# the model


def model_costs(encoder) -> dict:
    """Operations per token of the int8 model: its weight products (2·K·N each) and its attention
    products (activation × activation MatMuls, two in each fused MultiHeadAttention: 2·hidden·length each per
    token)."""
    import onnx

    model = onnx.load_from_string((encoder.cache_folder / "model.onnx").read_bytes())
    weights = {init.name: tuple(init.dims) for init in model.graph.initializer}
    linear, attention_products = 0, 0
    for node in model.graph.node:
        if node.op_type == "MatMulIntegerToFloat" and node.input[1] in weights:
            k, n = weights[node.input[1]][-2:]
            linear += 2 * k * n
        elif node.op_type == "MatMul":
            if node.input[1] in weights:
                k, n = weights[node.input[1]][-2:]
                linear += 2 * k * n
            else:
                attention_products += 1
        elif node.op_type == "MultiHeadAttention":  # the fused graph: its score product and its product with V
            attention_products += 2
    if not attention_products:  # the page would count the work of a text as its weight products alone
        raise SystemExit(f"{encoder.cache_folder}: no attention product found in the model's graph")
    hidden = json.loads((encoder.pipeline.transformer / "config.json").read_text())["hidden_size"]
    shapes = sorted({weights[node.input[1]][-2:] for node in model.graph.node
                     if node.op_type == "MatMulIntegerToFloat" and node.input[1] in weights})
    return {"linear_ops_per_token": linear, "attention_products": attention_products, "hidden": hidden,
            "weight_shapes": [list(s) for s in shapes]}


def ops_per_token(costs: dict, length: float) -> float:
    """Operations of one token of a text of `length` tokens."""
    return costs["linear_ops_per_token"] + costs["attention_products"] * 2 * costs["hidden"] * length


# ---------------------------------------------------------------------------------------------------
# the encoder


def texts(smoke: bool, n_passages: int) -> dict[str, list[str]]:
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.evaluate.queries import load_queries
    from gpu_tigrag.text.pipeline import build_chunks

    if smoke:
        corpus, questions = ROOT / "examples" / "corpus.json", ROOT / "examples" / "questions.json"
    else:
        corpus, questions = (DATA / path for path in DATASETS["2wikimultihopqa"])
    chunks = build_chunks(load_corpus(corpus)).texts
    picked = sorted(np.random.default_rng(0).choice(len(chunks), size=min(n_passages, len(chunks)), replace=False))
    return {"query": [q.text for q in load_queries(questions)], "passage": [chunks[i] for i in picked]}


def token_counts(encoder, batch: list[str], kind: str) -> np.ndarray:
    prompt = encoder.resolved.prompt(kind)
    return np.array([len(e.ids) for e in encoder.tokenizer.encode_batch([prompt + t for t in batch])])


def time_batchings(encoder, batch: list[str], kind: str, rounds: int) -> dict[str, list[float]]:
    """Seconds of encoding `batch` under each batching, rounds interleaved; vectors checked identical."""
    times: dict[str, list[float]] = {label: [] for label, _, _ in BATCHINGS}
    reference = None
    for _ in range(rounds):
        for label, size, budget in BATCHINGS:
            encoder.batch_size, encoder.batch_tokens = size, budget
            start = time.perf_counter()
            vectors = encoder.encode(batch, kind=kind)
            times[label].append(time.perf_counter() - start)
            if reference is None:
                reference = vectors
            elif not np.array_equal(vectors, reference):
                raise SystemExit(f"{label}: the {kind} vectors differ from another batching's (the per-row contract)")
    return times


def op_profile(encoder, batch: list[str], kind: str, size: int, budget: int | None) -> dict[str, float]:
    """Share of node time per op type while `encoder` encodes `batch` (ONNX Runtime's profiler)."""
    import onnxruntime as ort

    from gpu_tigrag.encoders.onnx_rows import DISABLED_OPTIMIZERS

    original = encoder.session_for(kind)
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.intra_op_num_threads = original.get_session_options().intra_op_num_threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.enable_profiling, options.profile_file_prefix = True, f"{tmp}/profile"
        profiled = ort.InferenceSession((encoder.cache_folder / "model.onnx").read_bytes(), options,
                                        providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_OPTIMIZERS))
        encoder.sessions[kind] = profiled
        try:
            encoder.batch_size, encoder.batch_tokens = size, budget
            encoder.encode(batch, kind=kind)
            events = json.loads(Path(profiled.end_profiling()).read_text())
        finally:
            encoder.sessions[kind] = original
    spent: collections.Counter = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
            spent[event["args"]["op_name"]] += event["dur"]
    total = sum(spent.values()) or 1
    return {op: 100 * us / total for op, us in spent.most_common()}


def unfused_encoder(model: str, cache: Path):
    """The same model with its attention left unfused (the FORMAT 2 graph), cached under `cache`."""
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import onnx_attention
    from gpu_tigrag.encoders.onnx_int8 import OnnxInt8Encoder

    def refuse(model):
        raise onnx_attention.AttentionPatternError("left unfused for the comparison")

    real = onnx_attention.fuse_attention
    onnx_attention.fuse_attention = refuse
    try:
        return OnnxInt8Encoder(EncoderConfig(model=model, backend="onnx-int8"), cache_root=cache)
    finally:
        onnx_attention.fuse_attention = real


def fusion_comparison(encoder, unfused, sample: dict[str, list[str]], rounds: int) -> dict:
    """Texts/s of the fused and the unfused model at the default batching, rounds interleaved, the
    vectors checked bit-identical, and each one's per-op profile."""
    from gpu_tigrag.encoders.onnx_int8 import BATCH_TOKENS

    out = {}
    for kind, batch in sample.items():
        times: dict[str, list[float]] = {"unfused": [], "fused": []}
        vectors = {}
        for _ in range(rounds):
            for label, runtime in (("unfused", unfused), ("fused", encoder)):
                runtime.batch_size, runtime.batch_tokens = 256, BATCH_TOKENS
                start = time.perf_counter()
                vectors[label] = runtime.encode(batch, kind=kind)
                times[label].append(time.perf_counter() - start)
        if not np.array_equal(vectors["fused"], vectors["unfused"]):
            raise SystemExit(f"{kind}: the fused attention changed the vectors")
        out[kind] = {label: {"texts_per_s": len(batch) / min(t), "median_texts_per_s": len(batch) / statistics.median(t)}
                     for label, t in times.items()}
        out[kind]["profile_unfused"] = op_profile(unfused, batch, kind, 256, BATCH_TOKENS)
        out[kind]["profile_fused"] = op_profile(encoder, batch, kind, 256, BATCH_TOKENS)
        print(f"{kind:8s} fused attention: {out[kind]['fused']['median_texts_per_s']:.1f} texts/s against "
              f"{out[kind]['unfused']['median_texts_per_s']:.1f} unfused (medians), vectors identical", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------------
# the project's own runtime against ONNX Runtime's


def numba_tile_rates(shapes: list[tuple[int, int]], threads: int, seconds: float, amx: bool) -> list[dict]:
    """GOP/s of the numba-int8 products (kernels/int8_gemm.py) at the model's weight shapes: row blocks of
    int8_encoder.BLOCK_ROWS over `threads` threads, as the encoder runs them; `amx`: on the AMX tiles, else on the
    VNNI (or portable) tile."""
    import numba
    from numba import njit, prange

    from gpu_tigrag.kernels.int8_encoder import BLOCK_ROWS
    from gpu_tigrag.kernels.int8_gemm import pack, rows_times

    @njit(parallel=True)
    def product(a, packed, out, amx):
        for block in prange((a.shape[0] + BLOCK_ROWS - 1) // BLOCK_ROWS):
            row = block * BLOCK_ROWS
            rows_times(a, row, min(BLOCK_ROWS, a.shape[0] - row), packed, out, amx)

    previous = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    rows = []
    try:
        for k, n in shapes:
            rng = np.random.default_rng(1)
            packed = pack(rng.integers(-127, 128, (k, n), dtype=np.int8))
            for m in GEMM_ROWS:
                a = rng.integers(0, 256, (m, k), dtype=np.uint8)
                out = np.empty((m, n), dtype=np.int32)
                product(a, packed, out, amx)
                calls = max(2, int(seconds * 40e9 / (2 * m * k * n)))
                best = float("inf")
                for _ in range(3):
                    start = time.perf_counter()
                    for _ in range(calls):
                        product(a, packed, out, amx)
                    best = min(best, (time.perf_counter() - start) / calls)
                rows.append({"k": k, "n": n, "m": m, "gops": 2 * m * k * n / best / 1e9, "amx": amx})
    finally:
        numba.set_num_threads(previous)
    return rows


def amx_issue_peak(threads: int, seconds: float) -> float | None:
    """GOP/s of back-to-back `tdpbusd` (four independent 16 × 16 int32 C tiles a thread, A and B loaded once) on
    `threads` threads: the AMX units' issue limit. None where the AMX tiles are not ready (int8_gemm.amx_ready)."""
    from gpu_tigrag.kernels.int8_gemm import _amx_configure, _amx_functions, _amx_release, _tmm, amx_ready

    if not amx_ready():
        return None
    from llvmlite import ir
    from numba import njit, prange, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _issue(typingctx, steps, a, b):
        def codegen(context, builder, signature, args):
            steps, a_v, b_v = args
            amx = _amx_functions(builder)
            i64, pointer = ir.IntType(64), ir.IntType(8).as_pointer()
            for tile, array_type, value in ((4, signature.args[1], a_v), (5, signature.args[1], a_v),
                                            (6, signature.args[2], b_v), (7, signature.args[2], b_v)):
                data = builder.bitcast(context.make_array(array_type)(context, builder, value).data, pointer)
                builder.call(amx["load"], [_tmm(tile), data, ir.Constant(i64, 64)])
            for tile in range(4):
                builder.call(amx["zero"], [_tmm(tile)])
            with cgutils.for_range(builder, steps):
                for c, x, y in ((0, 4, 6), (1, 4, 7), (2, 5, 6), (3, 5, 7)):
                    builder.call(amx["dot"], [_tmm(c), _tmm(x), _tmm(y)])
            return context.get_dummy_value()

        return types.void(steps, a, b), codegen

    @njit(parallel=True)
    def issue(steps, a, b, slots):
        for _ in prange(slots):
            _amx_configure(np.int64(32))
            _issue(steps, a, b)
            _amx_release()

    a, b = np.ones((16, 64), dtype=np.uint8), np.ones((16, 64), dtype=np.int8)
    return _issue_rate(lambda steps, used: issue(np.int64(steps), a, b, used), 4 * 16 * 16 * 64 * 2, 100_000,
                       threads, seconds)


def _issue_rate(run, ops_per_step: int, first_steps: int, threads: int, seconds: float) -> float:
    """The best GOP/s of `run(steps, threads_used)` (ops_per_step per thread and step) over 5 timed calls on
    `threads` numba threads, the steps grown until a call lasts about `seconds`; one small call first compiles."""
    import numba

    previous = numba.get_num_threads()
    used = min(threads, numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(used)
    try:
        run(1000, used)
        steps, best = first_steps, 0.0
        for _ in range(5):
            start = time.perf_counter()
            run(steps, used)
            elapsed = time.perf_counter() - start
            best = max(best, used * steps * ops_per_step / elapsed / 1e9)
            steps = max(steps, int(steps * seconds / max(elapsed, 1e-6)))
    finally:
        numba.set_num_threads(previous)
    return best


def vnni_issue_peak(threads: int, seconds: float) -> float | None:
    """GOP/s of back-to-back `vpdpbusd` (16 independent 512-bit accumulators per thread, no loads) on `threads`
    threads: the int8 units' issue limit, which no product can pass. None on a CPU without AVX-512 VNNI."""
    from gpu_tigrag.kernels.int8_gemm import HAS_VNNI

    if not HAS_VNNI:
        return None
    from llvmlite import ir
    from numba import njit, prange, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _issue(typingctx, steps, out, slot):
        def codegen(context, builder, signature, args):
            steps, out_v, slot = args
            lanes = ir.VectorType(ir.IntType(32), 16)
            dpbusd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lanes, [lanes] * 3),
                                                    "llvm.x86.avx512.vpdpbusd.512")
            sums = [cgutils.alloca_once_value(builder, ir.Constant(lanes, [k] * 16)) for k in range(16)]
            a, b = ir.Constant(lanes, [0x01010101] * 16), ir.Constant(lanes, [0x01020304] * 16)
            with cgutils.for_range(builder, steps):
                for total in sums:
                    builder.store(builder.call(dpbusd, [builder.load(total), a, b]), total)
            whole = builder.load(sums[0])
            for total in sums[1:]:
                whole = builder.add(whole, builder.load(total))
            array = context.make_array(signature.args[1])(context, builder, out_v)
            builder.store(builder.extract_element(whole, ir.Constant(ir.IntType(32), 0)), builder.gep(array.data, [slot]))
            return context.get_dummy_value()

        return types.void(steps, out, slot), codegen

    @njit(parallel=True)
    def issue(steps, out):
        for t in prange(out.shape[0]):
            _issue(steps, out, t)

    return _issue_rate(lambda steps, used: issue(np.int64(steps), np.zeros(used, dtype=np.int32)), 16 * 64 * 2,
                       1_000_000, threads, seconds)


#: one runtime's timing in a fresh process: load it, encode the texts once (pages in what the first call touches),
#: then time one more call; prints the seconds, saves the vectors
_TIME_ONE = """
import json, sys, time
import numpy as np
from gpu_tigrag.threads import apply_thread_policy
apply_thread_policy()
from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.encoders import load_encoder
model, backend, kind, texts_file, vectors_file = sys.argv[1:6]
texts = json.loads(open(texts_file).read())
encoder = load_encoder(EncoderConfig(model=model, backend=backend.split()[0]), first_kind=kind)
if backend == "numba-int8 vnni":
    encoder.amx = False  # the VNNI tile on a CPU whose products otherwise run on the AMX tiles
encoder.encode(texts, kind=kind)
start = time.perf_counter()
vectors = encoder.encode(texts, kind=kind)
seconds = time.perf_counter() - start
np.save(vectors_file, vectors)
print(json.dumps({"seconds": seconds}))
"""


def _time_in_process(model: str, backend: str, kind: str, texts_file: Path, vectors_file: Path) -> float:
    import subprocess

    done = subprocess.run([sys.executable, "-c", _TIME_ONE, model, backend, kind, str(texts_file), str(vectors_file)],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"timing {backend} on {kind} texts failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def runtime_comparison(model: str, onnx_encoder, sample: dict[str, list[str]], rounds: int, costs: dict,
                       limit: float) -> dict:
    """Texts/s of onnx-int8 (its default batching) and numba-int8, each in a fresh process per round (one runtime
    per process, as a user runs it, under the engine's thread policy), rounds alternating; each one's cosine to
    the torch fp32 runtime; numba-int8's vectors of a sample of texts encoded alone."""
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders.numba_int8 import NumbaInt8Encoder
    from gpu_tigrag.encoders.sentence import SentenceTransformerEncoder
    from gpu_tigrag.kernels.int8_gemm import HAS_VNNI

    ours = NumbaInt8Encoder(EncoderConfig(model=model, backend="numba-int8"))
    reference = SentenceTransformerEncoder(EncoderConfig(model=model, backend="torch", device="cpu"))
    out: dict = {"vnni": HAS_VNNI, "amx": ours.amx}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, batch in sample.items():
            lengths = token_counts(onnx_encoder, batch, kind)
            work = float(sum(n * ops_per_token(costs, n) for n in lengths))
            linear = float(lengths.sum()) * costs["linear_ops_per_token"]
            texts_file = Path(tmp) / f"{kind}.json"
            texts_file.write_text(json.dumps(batch))
            times: dict[str, list[float]] = {"onnx-int8": [], "numba-int8": []}
            if ours.amx:
                times["numba-int8 vnni"] = []
            for _ in range(rounds):
                for name in times:
                    times[name].append(_time_in_process(model, name, kind, texts_file, Path(tmp) / f"{name}.npy"))
            vectors = {name: np.load(Path(tmp) / f"{name}.npy") for name in times}
            if "numba-int8 vnni" in vectors and not np.array_equal(vectors["numba-int8 vnni"], vectors["numba-int8"]):
                raise SystemExit(f"{kind}: numba-int8's vectors differ between the AMX tiles and the VNNI tile")
            torch_vectors = reference.encode(batch, kind=kind)
            picked = np.random.default_rng(3).choice(len(batch), size=min(16, len(batch)), replace=False)
            alone = np.stack([ours.encode([batch[i]], kind=kind)[0] for i in picked])
            row = {"texts": len(batch), "ops": work,
                   "alone_equals_batch": bool(np.array_equal(alone, vectors["numba-int8"][picked])),
                   "seconds": times}
            for name, t in times.items():
                cosine = (vectors[name] * torch_vectors).sum(axis=1)
                median = statistics.median(t)
                row[name] = {"median_texts_per_s": len(batch) / median, "best_texts_per_s": len(batch) / min(t),
                             "gops": work / median / 1e9, "efficiency": work / median / 1e9 / limit,
                             "linear_gops": linear / median / 1e9,
                             "cosine_mean": float(cosine.mean()), "cosine_min": float(cosine.min())}
            row["speedup"] = row["numba-int8"]["median_texts_per_s"] / row["onnx-int8"]["median_texts_per_s"]
            if "numba-int8 vnni" in row:
                row["amx_speedup"] = row["numba-int8"]["median_texts_per_s"] / row["numba-int8 vnni"]["median_texts_per_s"]
            out[kind] = row
            if not row["alone_equals_batch"]:
                raise SystemExit(f"{kind}: a numba-int8 vector differs alone and in its batch")
            print(f"{kind:8s} numba-int8 {row['numba-int8']['median_texts_per_s']:.1f} texts/s against onnx-int8 "
                  f"{row['onnx-int8']['median_texts_per_s']:.1f} ({row['speedup']:.2f}x, medians)", file=sys.stderr)
    return out


# ---------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="multilingual-e5-small")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--queries", type=int, default=499)
    parser.add_argument("--fusion-rounds", type=int, default=7, help="interleaved rounds of fused vs unfused attention")
    parser.add_argument("--runtime-rounds", type=int, default=5, help="interleaved rounds of numba-int8 vs onnx-int8")
    parser.add_argument("--smoke", action="store_true", help="all-MiniLM-L6-v2 on the example texts, writes nothing")
    args = parser.parse_args()
    if args.smoke:
        args.model, args.rounds, args.passages, args.queries, args.fusion_rounds = "all-MiniLM-L6-v2", 1, 40, 20, 1
        args.runtime_rounds = 1
        BATCHINGS[:] = [b for b in BATCHINGS if b[0] in ("64 texts", "1024 tokens")]

    import onnxruntime

    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders.onnx_int8 import BATCH_TOKENS, OnnxInt8Encoder

    machine = cpu()
    encoder = OnnxInt8Encoder(EncoderConfig(model=args.model, backend="onnx-int8"))
    threads = encoder.session.get_session_options().intra_op_num_threads
    costs = model_costs(encoder)
    print(f"{machine['model']} ({', '.join(machine['flags'])}), {threads} encoder thread(s); "
          f"{costs['linear_ops_per_token'] / 1e6:.1f} M linear ops per token", file=sys.stderr)
    gemm = gemm_rates([tuple(s) for s in costs["weight_shapes"]], threads, 0.01 if args.smoke else 0.5)
    limit = {kind: max(r["gops"] for r in gemm if r["kind"] == kind) for kind in ("int8", "fp32")}

    sample = texts(args.smoke, args.passages)
    sample["query"] = sample["query"][: args.queries]
    results = {}
    for kind in ("query", "passage"):
        batch = sample[kind]
        lengths = token_counts(encoder, batch, kind)
        work = float(sum(n * ops_per_token(costs, n) for n in lengths))
        times = time_batchings(encoder, batch, kind, args.rounds)
        rows = []
        for label, size, budget in BATCHINGS:
            best, median = min(times[label]), statistics.median(times[label])
            rows.append({"batching": label, "batch_size": size, "batch_tokens": budget, "seconds": best,
                         "median_seconds": median, "texts_per_s": len(batch) / best,
                         "tokens_per_s": float(lengths.sum()) / best, "gops": work / best / 1e9,
                         "efficiency": work / best / 1e9 / limit["int8"]})
        results[kind] = {"texts": len(batch), "mean_tokens": float(lengths.mean()), "max_tokens": int(lengths.max()),
                         "ops": work, "rows": rows,
                         "profile_before": op_profile(encoder, batch, kind, 64, None),
                         "profile_after": op_profile(encoder, batch, kind, 256, BATCH_TOKENS)}
        for row in rows:
            print(f"{kind:8s} {row['batching']:>12s}: {row['texts_per_s']:8.1f} texts/s  {row['gops']:6.1f} GOP/s  "
                  f"{100 * row['efficiency']:5.1f}% of int8", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        fusion = fusion_comparison(encoder, unfused_encoder(args.model, Path(tmp)), sample, args.fusion_rounds)
    from gpu_tigrag.kernels.int8_gemm import amx_ready

    shapes = [tuple(s) for s in costs["weight_shapes"]]
    tile = numba_tile_rates(shapes, threads, 0.01 if args.smoke else 0.5, False)
    if amx_ready():
        tile += numba_tile_rates(shapes, threads, 0.01 if args.smoke else 0.5, True)
    runtimes = runtime_comparison(args.model, encoder, sample, args.runtime_rounds, costs, limit["int8"])
    runtimes["tile"] = tile
    runtimes["vnni_issue_gops"] = vnni_issue_peak(threads, 0.01 if args.smoke else 0.3)
    runtimes["amx_issue_gops"] = amx_issue_peak(threads, 0.01 if args.smoke else 0.3)
    runtimes["rounds"] = args.runtime_rounds
    payload = {"command": f"{COMMAND} --model {args.model} --rounds {args.rounds} --passages {args.passages} "
                          f"--runtime-rounds {args.runtime_rounds}",
               "fusion": fusion, "fusion_rounds": args.fusion_rounds, "runtimes": runtimes,
               "cpu": machine, "int8_kernel": int8_kernel(machine["flags"]), "onnxruntime": onnxruntime.__version__,
               "threads": threads, "model": args.model, "costs": costs, "gemm": gemm, "limit_gops": limit,
               "batch_tokens_default": BATCH_TOKENS, "results": results}
    if args.smoke:
        markdown(payload)  # the page renders from what a run measures
        print("smoke run: nothing written", file=sys.stderr)
        return 0
    write_results("encoder_roofline", payload, markdown(payload))
    return 0


def markdown(p: dict) -> str:
    c, lim = p["costs"], p["limit_gops"]
    lines = [
        f"# The CPU encoder against this machine's limit ({p['model']}, onnx-int8)", "",
        f"Command: `{p['command']}`. CPU: {p['cpu']['model']} (family {p['cpu']['family']}, model "
        f"{p['cpu']['model_number']}), flags {', '.join(p['cpu']['flags']) or 'none of ' + ', '.join(INT8_FLAGS)}; "
        f"int8 kernel: {p['int8_kernel']}; {p['cpu']['physical_cores']} physical core(s), {p['threads']} encoder "
        f"thread(s); onnxruntime {p['onnxruntime']}. Every figure is a ratio to a baseline measured in the same run.",
        "",
        "## The machine's GEMM rates at the model's weight shapes (ONNX Runtime, GOP/s = 2·M·K·N per second)", "",
        "| kind | K × N | " + " | ".join(f"M = {m}" for m in GEMM_ROWS) + " |",
        "|---|---|" + "---|" * len(GEMM_ROWS),
    ]
    for kind in ("int8", "fp32"):
        for k, n in c["weight_shapes"]:
            cells = [next(r["gops"] for r in p["gemm"] if (r["kind"], r["k"], r["n"], r["m"]) == (kind, k, n, m))
                     for m in GEMM_ROWS]
            lines.append(f"| {kind} | {k} × {n} | " + " | ".join(f"{v:.1f}" for v in cells) + " |")
    lines += ["", f"**Limit used below: int8 {lim['int8']:.1f} GOP/s** (the best int8 cell; fp32 {lim['fp32']:.1f}, "
              f"int8 ÷ fp32 = {lim['int8'] / lim['fp32']:.2f}).", "",
              f"The model: {c['linear_ops_per_token'] / 1e6:.1f} M operations per token in its weight products, plus "
              f"{c['attention_products']} attention products of 2 × {c['hidden']} × length operations per token "
              "(the achieved rates below count real tokens only: padding is waste, not work).", ""]
    for kind in ("query", "passage"):
        r = p["results"][kind]
        lines += [f"## {kind} texts ({r['texts']}, {r['mean_tokens']:.1f} tokens on average, longest {r['max_tokens']})",
                  "", "| batching | texts/s best (median) | tokens/s | GOP/s | of the int8 limit |", "|---|---|---|---|---|"]
        base = r["rows"][0]
        for row in r["rows"]:
            median = r["texts"] / row["median_seconds"]
            lines.append(f"| {row['batching']} | {row['texts_per_s']:.1f} ({median:.1f}) | {row['tokens_per_s']:.0f} | "
                         f"{row['gops']:.1f} | {100 * row['efficiency']:.1f}% |")
        chosen = next(row for row in r["rows"] if row["batch_tokens"] == p["batch_tokens_default"])
        lines += ["", f"Default batching `batch_tokens = {p['batch_tokens_default']}` against 64 texts a batch (the "
                  f"runtime before): **{chosen['texts_per_s'] / base['texts_per_s']:.2f}×**.", "",
                  "ONNX Runtime's profile (share of node time), 64 texts a batch → the default batching:", "",
                  "| op | before | after |", "|---|---|---|"]
        ops = list(r["profile_before"])[:12]
        for op in ops:
            lines.append(f"| {op} | {r['profile_before'][op]:.1f}% | {r['profile_after'].get(op, 0.0):.1f}% |")
        lines.append("")
    if "fusion" in p:
        lines += ["## Fused attention (cache format 3) against the unfused graph (format 2), default batching", "",
                  "Each layer's attention (Q/K/V reshapes and transposes, the score product, its scale, the mask, the "
                  "softmax, the product with V, the transpose back) is one `com.microsoft.MultiHeadAttention` node "
                  "(`gpu_tigrag/encoders/onnx_attention.py`). Its CPU kernel uses the same MLAS products and softmax: "
                  "the run checks the vectors bit-identical, so the encoder's fingerprint (and every index built "
                  f"before) stays valid. {p['fusion_rounds']} interleaved rounds.", "",
                  "| texts | unfused texts/s, median (best) | fused texts/s, median (best) | fused ÷ unfused (medians) |",
                  "|---|---|---|---|"]
        for kind, f in p["fusion"].items():
            u, v = f["unfused"], f["fused"]
            lines.append(f"| {kind} | {u['median_texts_per_s']:.1f} ({u['texts_per_s']:.1f}) | "
                         f"{v['median_texts_per_s']:.1f} ({v['texts_per_s']:.1f}) | "
                         f"**{v['median_texts_per_s'] / u['median_texts_per_s']:.2f}×** |")
        for kind, f in p["fusion"].items():
            lines += ["", f"Profile, {kind} texts (share of node time), unfused → fused:", "",
                      "| op | unfused | fused |", "|---|---|---|"]
            ops = list(dict.fromkeys([*list(f["profile_unfused"])[:10], *list(f["profile_fused"])[:6]]))
            for op in ops:
                lines.append(f"| {op} | {f['profile_unfused'].get(op, 0.0):.1f}% | {f['profile_fused'].get(op, 0.0):.1f}% |")
        lines.append("")
    if "runtimes" in p:
        r = p["runtimes"]
        lines += ["## The project's own int8 runtime (numba-int8) against ONNX Runtime's (onnx-int8)", "",
                  "`gpu_tigrag/encoders/numba_int8.py` runs the same model (`kernels/int8_encoder.py`, `kernels/int8_gemm.py`): "
                  "texts concatenated with no padding; per layer one parallel pass of attention per (text, head) (float32 "
                  "vector tiles, `kernels/attention_tiles.py`) and one "
                  "per block of 32 rows for everything else (output projection, residual and layer norm, feed-forward "
                  "with GELU, the next layer's Q/K/V), its intermediates in the block's cache-resident scratch; int8 "
                  f"products {'on the AMX tiles (`tdpbusd`, 32 rows × 32 columns a step; the VNNI tile timed beside them as numba-int8 vnni, its vectors checked bit-identical)' if r.get('amx') else 'in AVX-512 VNNI tiles' if r['vnni'] else 'in portable loops (this CPU has no AVX-512 VNNI)'}. "
                  f"Same texts; each runtime in a fresh process per round under the engine's thread policy (one runtime "
                  f"per process, as a user runs it: timed in one process the two disturbed each other, numba-int8's query "
                  f"rounds ranging from 663 to 984 texts/s), the second of two calls timed, {r['rounds']} alternating rounds, medians; onnx-int8 at its "
                  "default batching.", "",
                  "Its products' int8 rate at the model's shapes (GOP/s, row blocks over the encoder's threads), beside "
                  "ONNX Runtime's above:", "",
                  "| products | K × N | " + " | ".join(f"M = {m}" for m in GEMM_ROWS) + " |",
                  "|---|---|" + "---|" * len(GEMM_ROWS)]
        for amx in sorted({t.get("amx", False) for t in r["tile"]}):
            for k, n in c["weight_shapes"]:
                cells = [next(t["gops"] for t in r["tile"] if (t["k"], t["n"], t["m"], t.get("amx", False)) == (k, n, m, amx))
                         for m in GEMM_ROWS]
                lines.append(f"| {'AMX tiles' if amx else 'VNNI tile' if r['vnni'] else 'portable'} | {k} × {n} | "
                             + " | ".join(f"{v:.1f}" for v in cells) + " |")
        lines += ["", "| texts | runtime | texts/s median (best) | GOP/s | of the int8 limit | cosine to torch fp32, mean (min) |",
                  "|---|---|---|---|---|---|"]
        for kind in ("query", "passage"):
            for name in ("onnx-int8", "numba-int8", "numba-int8 vnni"):
                if name not in r[kind]:
                    continue
                x = r[kind][name]
                lines.append(f"| {kind} | {name} | {x['median_texts_per_s']:.1f} ({x['best_texts_per_s']:.1f}) | "
                             f"{x['gops']:.1f} | {100 * x['efficiency']:.1f}% | {x['cosine_mean']:.5f} ({x['cosine_min']:.5f}) |")
        peak = r.get("vnni_issue_gops")
        vnni_run = "numba-int8 vnni" if "numba-int8 vnni" in r["query"] else "numba-int8"
        if peak:
            lines += ["", f"The int8 units' issue limit on the encoder's threads (`vpdpbusd` back to back, 16 independent "
                      f"accumulators a thread, no loads): **{peak:.0f} GOP/s**. Against it, the weight products alone (the "
                      "tokens' linear operations, attention not counted) of numba-int8 on its VNNI tile run at " + ", ".join(
                          f"{100 * r[kind][vnni_run]['linear_gops'] / peak:.1f} % ({kind} texts)"
                          for kind in ("query", "passage") if "linear_gops" in r[kind][vnni_run]) + "."]
        amx_peak = r.get("amx_issue_gops")
        if amx_peak:
            lines += ["", f"The AMX units' issue limit on the encoder's threads (`tdpbusd` back to back on four C tiles a "
                      f"thread, no loads): **{amx_peak:.0f} GOP/s**. Against it, numba-int8's weight products alone run at "
                      + ", ".join(f"{100 * r[kind]['numba-int8']['linear_gops'] / amx_peak:.1f} % ({kind} texts)"
                                  for kind in ("query", "passage")) + "; numba-int8 on the AMX tiles ÷ on the VNNI tile "
                      "(medians): " + ", ".join(f"{kind} texts **{r[kind]['amx_speedup']:.2f}×**"
                                               for kind in ("query", "passage") if "amx_speedup" in r[kind]) + "."]
        lines += ["", "numba-int8 ÷ onnx-int8 (medians): " + ", ".join(
            f"{kind} texts **{r[kind]['speedup']:.2f}×**" for kind in ("query", "passage")) + ". A sample of 16 texts "
            "of each kind encoded alone gave their in-batch numba-int8 vectors bit for bit: "
            + ", ".join(f"{kind} {'yes' if r[kind]['alone_equals_batch'] else 'NO'}" for kind in ("query", "passage")) + ".", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
