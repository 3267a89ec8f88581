"""The GPU check: parity tests and throughput on one NVIDIA GPU, each GPU figure next to the
CPU figure from the same code. Run through bench/checks/gpu_check.sh (see bench/README.md).

Sections (each recorded, an error in one does not hide the others; exit status 1 if any failed):
  parity      `pytest -m gpu`: every test marked gpu (the CuPy case of each backend-parametrised test, and the
              CuPy-against-NumPy comparisons, kernels included); the smoke run checks that they skip cleanly
  indexing    graph + BM25 of synthetic Zipf corpora generated on the device (100k and 1M chunks);
              the arrays' digests per backend, identical where both ran
  pair_count  counting those corpora's window pair keys: sort (xp.unique) vs hash (atomics kernel)
  dense_search the exact dense first stage (FlatSearch) on random unit vectors: its screened search (a cuBLAS /
              BLAS product, near-ties re-scored in k order: ops/screen.py) against its plain scan (`query_dot`
              on every chunk) per backend, batches of 1 and 256, q/s and whether the two answers are identical
  load_index  the cached 2Wiki index, its query texts and recorded query vectors
  ppr         batched PPR queries/s on the 2Wiki graph at B = 256, 1024, 4096, and bytes/s; the sparse
              push PPR's queries/s, its ratio to the exact iterate and their top-γ overlap
  engine      end-to-end 2-hop retrieval queries/s on the 2Wiki index, encoder excluded; top-5 against the CPU
  encoder     the torch encoder runtime: passages/s of the 2Wiki chunks and queries/s of its questions on CUDA
              (fp16, batch from free memory, and at batches 256 and 1024) against the CPU, fp16-vs-fp32 cosine,
              and end-to-end queries/s of the engine with the live encoder, with the encoder's share of that
              time and its texts per question. The default encoder's weights (multilingual-e5-small) are used
              where installed; where they are not (the carry limit keeps them off the GPU machine), its
              architecture with random weights, which is the same work per text: the report says which
  workers     bench/gpu_workers.py: one GPU Dask worker against CPU workers on `tigrag run`
  scale       the defaults at scale: synthetic indexes of --scale-passages passages (stand-in encoder and NER,
              streamed with the device backend), TIGRAG paper and best with their default modes (`auto`
              chooses sparse blocks and push PPR from 50,000 chunks) timed by `tigrag bench` on the device
              and on the CPU, q/s and which modes ran; a size whose build cannot finish before the
              deadline is skipped and says so (last section: raise --deadline-s to give it the time)

`--smoke` is the CPU dry run that CI runs (tests/interface/test_gpu_check_smoke.py): numpy in the device's
place, tiny sizes, and a tiny index of examples/corpus.json built with the stand-in encoder and NER
(nothing from .cache needed); the encoder section also runs the random-weights path. `--deadline-s` bounds the whole run: subprocess sections get the time
left, and the report is rewritten after every section.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

if not __package__:  # run as `python bench/checks/gpu_check.py`: import `bench` (and gpu_tigrag) from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import ROOT, synchronize, timed

from gpu_tigrag.backend import Backend, get_backend
from gpu_tigrag.config import BM25Config, RetrievalConfig
from gpu_tigrag.methods.tigrag.config import PPRConfig
from gpu_tigrag.synth import zipf_token_csr

COPY_BANDWIDTH_H200 = 4.3e12  # bytes/s, device-to-device copy measured on an H200


#: the parity tests, selected by marker: every test marked `gpu` (the CuPy case of each test that takes the
#: `backend` fixture, and the CuPy-against-NumPy comparisons; see tests/conftest.py). On a CPU machine (`--smoke`)
#: they are all collected and skipped, which checks that the selection works and that they skip cleanly.
PARITY_MARKER = "gpu"


class Deadline:
    """Seconds left of the run's time budget, for the timeouts of subprocess sections."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        """Time left, at most `cap`; a section with less than 5 s left is not started."""
        left = min(cap, self.end - time.monotonic())
        if left < 5:
            raise TimeoutError("no time left in the run's deadline (--deadline-s)")
        return left


def device_info() -> dict[str, Any]:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    free, total = cupy.cuda.Device(0).mem_info
    import numba

    return {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "memory_total_gib": total / 2**30, "memory_free_gib": free / 2**30, "cupy": cupy.__version__,
            "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(), "cuda_driver": cupy.cuda.runtime.driverGetVersion(),
            "numba": numba.__version__, "python": platform.python_version(), "cpus": os.cpu_count()}


def run_parity(out: Path, marker: str, timeout: float, need_passed: bool = True) -> dict[str, Any]:
    """pytest on the tests marked `marker` (`-m`, the whole tests/ folder collected; a module that fails to
    import is reported, the others still run); ok when it exits 0 and, with `need_passed`, at least one passed
    (on a device machine every `gpu` test must run: all skipped means CuPy saw no device). Counts of
    passed/skipped/failed/errors/deselected from its summary line."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", "-m", marker, "tests"], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    (out / "parity_pytest.txt").write_text(proc.stdout + proc.stderr)
    summary = [line for line in proc.stdout.splitlines()
               if re.search(r"\d+ (passed|skipped|failed|errors?|deselected)", line)]
    counts = dict.fromkeys(("passed", "skipped", "failed", "errors", "deselected"), 0)
    for n, word in re.findall(r"(\d+) (passed|skipped|failed|errors?|deselected)", summary[-1] if summary else ""):
        counts["errors" if word.startswith("error") else word] = int(n)
    ok = proc.returncode == 0 and (counts["passed"] > 0 or not need_passed)
    return {"returncode": proc.returncode, "summary": summary[-1] if summary else proc.stdout[-500:],
            "marker": marker, "counts": counts, "ok": ok}


#: backends compared: the device one first; `--smoke` on a CPU machine runs "numpy" twice
BACKENDS = ["cupy", "numpy"]


SYNTH_VOCAB, SYNTH_MEAN_LENGTH = 200_000, 60


def synthetic_corpora(sizes: list[int], cpu_max: int):
    """(backend name, backend, chunks, indptr, ids) per size and backend; the CPU only up to `cpu_max`."""
    for n in sizes:
        for position, name in enumerate(BACKENDS):
            if position == 1 and n > cpu_max:
                continue
            be = get_backend(name)
            yield (name, be, n, *zipf_token_csr(be.xp, n, SYNTH_VOCAB, SYNTH_MEAN_LENGTH, seed=0))


def csr_digests(be: Backend, matrix: Any) -> dict[str, str]:
    """sha256 (16 hex digits) of a CSR matrix's indptr, indices (both as int64) and data, on the host."""
    parts = {"indptr": be.to_host(matrix.indptr).astype(np.int64), "indices": be.to_host(matrix.indices).astype(np.int64),
             "data": be.to_host(matrix.data)}
    return {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16] for k, v in parts.items()}


def bench_indexing(sizes: list[int], cpu_max: int) -> dict[str, Any]:
    """Graph + BM25 build time per corpus and backend; "identical": whether the arrays' digests agree
    between the backends at each size both ran (ok only if they do)."""
    from gpu_tigrag.index.bm25 import bm25_matrix
    from gpu_tigrag.index.graph import cooccurrence_graph

    rows = []
    for name, be, n, indptr, ids in synthetic_corpora(sizes, cpu_max):

        def build():
            graph = cooccurrence_graph(be, indptr, ids, SYNTH_VOCAB, 4)
            bm25 = bm25_matrix(be, indptr, ids, SYNTH_VOCAB, BM25Config())
            return graph, bm25

        seconds, (graph, bm25) = timed(be, build)
        rows.append({"backend": name, "chunks": n, "tokens": int(indptr[-1]), "seconds": seconds,
                     "chunks_per_second": n / seconds, "graph_nnz": int(graph.nnz), "bm25_nnz": int(bm25.nnz),
                     "digests": {"graph": csr_digests(be, graph), "bm25": csr_digests(be, bm25)}})
        print(f"indexing {name} {n:,} chunks: {seconds:.2f} s", file=sys.stderr, flush=True)
        del graph, bm25
        be.release_cached_memory()
    identical = {}
    for n in sizes:
        digests = [row["digests"] for row in rows if row["chunks"] == n]
        if len(digests) == 2:
            identical[str(n)] = digests[0] == digests[1]
    return {"ok": all(identical.values()), "identical": identical, "rows": rows}


def bench_pair_count(sizes: list[int], cpu_max: int) -> dict[str, Any]:
    """bench/studies/pair_count.py's comparison on the indexing section's corpora (all their keys).

    "ok" is false when the two methods disagree, which fails the section but keeps the figures.
    """
    from bench.studies.pair_count import compare

    from gpu_tigrag.index.graph import window_pair_keys

    rows = []
    for name, be, n, indptr, ids in synthetic_corpora(sizes, cpu_max):
        keys = window_pair_keys(be, indptr, ids, SYNTH_VOCAB, 4)
        rows.append({**compare(be, keys, repeat=1), "chunks": n})
        print(f"pair_count {name} {n:,} chunks: hash/sort {rows[-1]['hash_over_sort']:.2f}", file=sys.stderr,
              flush=True)
        del indptr, ids, keys
        be.release_cached_memory()
    return {"ok": all(row["equal"] for row in rows), "rows": rows}


def bench_dense_search(sizes: list[int], batches: list[int], cpu_max: int, dim: int = 384) -> dict[str, Any]:
    """FlatSearch's screened search against its plain scan per backend (module doc); "ok" is false when an
    answer differs from the scan's (ids or cosine bits) on its backend."""
    from gpu_tigrag.retrieve.first_stage import FlatSearch

    rng = np.random.default_rng(0)
    queries = rng.standard_normal((max(batches), dim)).astype(np.float32)
    rows_out, ok = [], True
    for n in sizes:
        rows = rng.standard_normal((n, dim)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        for position, name in enumerate(BACKENDS):
            if position == 1 and n > cpu_max:
                continue
            be = get_backend(name)
            flat = FlatSearch(be, be.asarray(rows))
            for b in batches:
                vectors = be.asarray(queries[:b])
                screened_s, (ids, vals) = timed(be, lambda: flat.search(vectors, 10), repeat=3)
                scan_s, (scan_ids, scan_vals) = timed(be, lambda: flat.scan(vectors, 10), repeat=1)
                same = bool(np.array_equal(be.to_host(ids), be.to_host(scan_ids))
                            and np.array_equal(be.to_host(vals), be.to_host(scan_vals)))
                ok = ok and same
                rows_out.append({"backend": name, "chunks": n, "batch": b, "screened_seconds": screened_s,
                                 "scan_seconds": scan_s, "screened_queries_per_second": b / screened_s,
                                 "scan_over_screened": scan_s / screened_s, "identical": same})
                print(f"dense_search {name} n={n} B={b}: screened {b / screened_s:,.0f} q/s, scan {b / scan_s:,.0f} "
                      f"q/s, identical {same}", file=sys.stderr, flush=True)
    return {"ok": ok, "rows": rows_out}


def bench_ppr(index: Any, seeds: list[np.ndarray], batches: list[int], cpu_max: int) -> dict[str, Any]:
    """Batched PPR + top-γ queries/s per backend and batch, and the bytes/s one sweep must move."""
    from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma

    config = PPRConfig()
    rows = []
    for position, name in enumerate(BACKENDS):
        be = get_backend(name)
        transition = TransitionMatrix.from_adjacency(be, index.graph)
        nnz, n = transition.matrix.nnz, index.n_vocab
        for b in batches:
            if position == 1 and b > cpu_max:
                continue
            block = [seeds[i % len(seeds)] for i in range(b)]

            def run():
                scores, sweeps = personalized_pagerank(be, transition, seed_matrix(be, block, n), config)
                top_gamma(be, scores, config.top_gamma)
                return sweeps

            seconds, sweeps = timed(be, run, repeat=3)
            # bytes one sweep must move at least: CSR once, x gathered per nonzero, v read, out written
            sweep_bytes = nnz * 8 + (n + 1) * 4 + nnz * b * 4 + 3 * n * b * 4
            rows.append({"backend": name, "batch": b, "seconds": seconds, "sweeps": int(sweeps),
                         "queries_per_second": b / seconds,
                         "bytes_per_second": sweep_bytes * sweeps / seconds,
                         "fraction_of_copy_bandwidth": sweep_bytes * sweeps / seconds / COPY_BANDWIDTH_H200})
            print(f"ppr {name} B={b}: {b / seconds:,.0f} q/s", file=sys.stderr, flush=True)
    return {"rows": rows, "push": bench_push_ppr(index, seeds, batches, cpu_max)}


def bench_push_ppr(index: Any, seeds: list[np.ndarray], batches: list[int], cpu_max: int) -> list[dict[str, Any]]:
    """The sparse PPR (`tigrag.ppr.algorithm=push`, issue 24) per backend and batch: queries/s, its
    speed over the exact iterate's in the same run, and the overlap of its top-γ sets with the exact
    iterate's on the same block (the recall-relevant agreement)."""
    from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma
    from gpu_tigrag.ops.push_ppr import PushGraph, push_pagerank

    exact_config, push_config = PPRConfig(), PPRConfig(algorithm="push")
    rows = []
    for position, name in enumerate(BACKENDS):
        be = get_backend(name)
        graph, transition = PushGraph.from_adjacency(be, index.graph), TransitionMatrix.from_adjacency(be, index.graph)
        for b in batches:
            if position == 1 and b > cpu_max:
                continue
            block = [seeds[i % len(seeds)] for i in range(b)]
            seconds, sparse = timed(be, lambda: push_pagerank(be, graph, block, push_config), repeat=3)
            exact_seconds, exact = timed(be, lambda: personalized_pagerank(
                be, transition, seed_matrix(be, block, index.n_vocab), exact_config)[0], repeat=3)
            push_ids, push_w = (be.to_host(a) for a in sparse.top_gamma(be, push_config.top_gamma))
            exact_ids, exact_w = (be.to_host(a) for a in top_gamma(be, exact, exact_config.top_gamma))
            overlap = [len(set(push_ids[push_w[:, q] > 0, q]) & set(exact_ids[exact_w[:, q] > 0, q]))
                       / max(int((exact_w[:, q] > 0).sum()), 1) for q in range(b)]
            rows.append({"backend": name, "batch": b, "seconds": seconds, "queries_per_second": b / seconds,
                         "push_over_exact": exact_seconds / seconds, "top_gamma_overlap": float(np.mean(overlap))})
            print(f"ppr push {name} B={b}: {b / seconds:,.0f} q/s ({exact_seconds / seconds:.2f}x exact), "
                  f"top-γ overlap {np.mean(overlap):.3f}", file=sys.stderr, flush=True)
    return rows


def bench_engine(index: Any, queries: list[str], encoder: Any, batches: list[int], cpu_max: int,
                 presets: tuple[str, ...] = ("paper", "best", "paper sparse", "best sparse")) -> dict[str, Any]:
    """2-hop retrieval queries/s without the encoder per preset, backend and batch ("sparse": the
    preset with tigrag.blocks=sparse and tigrag.ppr.algorithm=push, issue 24's mode for large corpora);
    "same_top5_as_cpu": the fraction of queries whose top-5 chunk ids equal the CPU's for the same
    preset (same batch, else the CPU's largest); ok when it is at least 99.5% for every row."""
    import dataclasses

    from gpu_tigrag.config import replace_path
    from gpu_tigrag.presets import preset
    from gpu_tigrag.methods.tigrag.retriever import Retriever

    def preset_with_config(config: Any, overrides: dict[str, Any]) -> Any:
        for path, value in overrides.items():
            config = replace_path(config, path, value)
        return config

    rows, top5 = [], {}
    for preset_name in presets:
        for position, name in enumerate(BACKENDS):
            for b in batches:
                if position == 1 and b > cpu_max:
                    continue
                workload = [queries[i % len(queries)] for i in range(max(b, len(queries)))]
                name_of_preset, _, mode = preset_name.partition(" ")
                config = dataclasses.replace(preset(name_of_preset), batch_size=b, memory_budget_mb=64_000)
                if mode == "sparse":
                    config = preset_with_config(config, {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"})
                retriever = Retriever(index, config, encoder=encoder, backend=name)
                retriever.retrieve(workload[:b])  # warm-up
                retriever.timer.seconds.clear()
                start = time.perf_counter()
                results = retriever.retrieve(workload)
                synchronize(retriever.be)
                elapsed = time.perf_counter() - start
                encode = retriever.timer.seconds.get("encode", 0.0)
                rows.append({"preset": preset_name, "backend": name, "batch": b,
                             "effective_batch": retriever.batch_size(), "queries": len(workload), "seconds": elapsed,
                             "encoder_lookup_seconds": encode,
                             "queries_per_second_without_encoder": len(workload) / (elapsed - encode),
                             "step_seconds": dict(retriever.timer.seconds)})
                top5[preset_name, position, b] = [r.chunk_ids[:5] for r in results[: len(queries)]]
                print(f"engine {preset_name} {name} B={b}: {len(workload) / (elapsed - encode):,.0f} q/s",
                      file=sys.stderr, flush=True)
    for row, (preset_name, position, b) in zip(rows, top5):
        cpu_batches = [cb for p, pos, cb in top5 if p == preset_name and pos == 1]
        reference = top5[preset_name, 1, b if b in cpu_batches else max(cpu_batches)]
        row["same_top5_as_cpu"] = sum(x == y for x, y in zip(top5[preset_name, position, b], reference)) / len(reference)
    worst = min(row["same_top5_as_cpu"] for row in rows)
    return {"ok": worst >= 0.995, "same_top5_as_cpu": worst, "rows": rows}


def encoder_folder(inputs: Path, scratch: Path, force_random: bool = False) -> tuple[str, str]:
    """(model for EncoderConfig, "real" or "random") : the default encoder's model where it is installed
    (unless `force_random`), else its architecture (inputs/encoder_architecture: config and tokenizer files,
    no weights) saved with random weights into `scratch`."""
    import gpu_tigrag.encoders as encoders
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.errors import ModelError

    model = EncoderConfig().model
    if not force_random:
        try:
            encoders.resolve_model(model)
            return model, "real"
        except ModelError:
            pass
    import shutil

    import torch
    from transformers import AutoConfig, AutoModel

    source = inputs / "encoder_architecture"
    if not (source / "config.json").is_file():
        raise RuntimeError(f"{source}: no encoder architecture (run bench/checks/prepare_gpu_check.py)")
    target = scratch / "encoder_random_weights"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    torch.manual_seed(0)
    AutoModel.from_config(AutoConfig.from_pretrained(source)).save_pretrained(target)
    return str(target), "random"


def random_weights_check(scratch: Path) -> dict[str, Any]:
    """The smoke run's check of the path the GPU machine takes (the default encoder's weights are not carried):
    the architecture copied without weights as bench/checks/prepare_gpu_check.py copies it, given random weights by
    `encoder_folder`, then loaded and run on two texts. Scratch files are removed afterwards."""
    import shutil

    from bench.checks.prepare_gpu_check import copy_encoder_architecture

    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders.sentence import SentenceTransformerEncoder

    inputs = scratch / "random_weights_inputs"
    try:
        copy_encoder_architecture(inputs / "encoder_architecture")
        carried = sorted(p.name for p in (inputs / "encoder_architecture").glob("*.safetensors"))
        model, weights = encoder_folder(inputs, scratch, force_random=True)
        has_weights = (Path(model) / "model.safetensors").is_file()
        vectors = SentenceTransformerEncoder(EncoderConfig(model=model, device="cpu")).encode(["a passage", "another"])
    finally:
        shutil.rmtree(inputs, ignore_errors=True)
        shutil.rmtree(scratch / "encoder_random_weights", ignore_errors=True)
    return {"weights": weights, "carried_weight_files": carried, "saved_random_weights": has_weights,
            "shape": list(vectors.shape), "ok": weights == "random" and not carried and has_weights
            and vectors.shape[0] == 2 and bool(np.isfinite(vectors).all())}


PLURAL = {"passage": "passages", "query": "queries"}


def bench_encoder(index: Any, queries: list[str], model: str, weights: str, cpu_passages: int,
                  engine_batch: int, gpu: bool) -> dict[str, Any]:
    """Passages/s and queries/s of the torch runtime (fp16 on CUDA) against the CPU (fp32, a prefix of
    `cpu_passages` chunks), the cosine of fp16 to fp32 vectors on the device, and the engine's end-to-end
    queries/s with this encoder live (best preset, batch `engine_batch`)."""
    import dataclasses

    import torch

    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders.sentence import SentenceTransformerEncoder
    from gpu_tigrag.presets import preset
    from gpu_tigrag.methods.tigrag.retriever import Retriever

    texts = index.chunk_texts
    out: dict[str, Any] = {"model": model, "weights": weights, "passages": len(texts), "queries": len(queries)}
    devices = ["cuda", "cpu"] if gpu else ["cpu"]
    vectors = {}
    for device in devices:
        encoder = SentenceTransformerEncoder(EncoderConfig(model=model, device=device))
        sample = texts if device == "cuda" else texts[:cpu_passages]
        encoder.encode(sample[:64])  # warm-up
        for kind, items in (("passage", sample), ("query", queries)):
            start = time.perf_counter()
            result = encoder.encode(items, kind=kind)
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            out[f"{device}_{PLURAL[kind]}_per_second"] = len(items) / seconds
            print(f"encoder {device} {kind}s: {len(items) / seconds:,.0f}/s (batch {encoder.batch_size})",
                  file=sys.stderr, flush=True)
            if kind == "passage":
                vectors[device] = result[:cpu_passages]
        out[f"{device}_batch"] = encoder.batch_size
    if gpu:
        fp32 = SentenceTransformerEncoder(EncoderConfig(model=model, device="cuda"))
        fp32.model.float()
        reference = fp32.encode(texts[:cpu_passages])
        cosines = np.sum(reference * vectors["cuda"], axis=1)
        out.update(fp16_vs_fp32_mean_cosine=float(cosines.mean()), fp16_vs_fp32_min_cosine=float(cosines.min()),
                   passage_speedup_vs_cpu=out["cuda_passages_per_second"] / out["cpu_passages_per_second"])
        out["fixed_batches"] = fixed_batch_rates(model, texts, queries)
        live = SentenceTransformerEncoder(EncoderConfig(model=model, device="cuda"))
        # the query vectors handed to CuPy through DLPack are the host path's, bit for bit
        handed = live.encode(queries[:64], kind="query", device_output=True)
        host = live.encode(queries[:64], kind="query")
        out["dlpack_handover_on_device"] = type(handed).__module__.startswith("cupy")
        out["dlpack_handover_identical"] = bool(np.array_equal(get_backend("cupy").to_host(handed), host))
        config = dataclasses.replace(preset("best"), batch_size=engine_batch, memory_budget_mb=64_000)
        retriever = Retriever(index, config, encoder=live, backend=BACKENDS[0], allow_mixed_encoder=weights != "real")
        retriever.retrieve(queries[:engine_batch])  # warm-up
        start = time.perf_counter()
        retriever.retrieve(queries)
        synchronize(retriever.be)
        seconds = time.perf_counter() - start
        out["engine_queries_per_second_with_encoder"] = len(queries) / seconds
        out["engine_encoder_seconds"] = retriever.timer.seconds.get("encode", 0.0)
        out["engine_encoder_share"] = out["engine_encoder_seconds"] / seconds
        out["engine_encoder_texts_per_query"] = retriever.timer.encoded_texts / len(queries)
        print(f"engine best with live encoder: {len(queries) / seconds:,.0f} q/s", file=sys.stderr, flush=True)
    out["ok"] = all(np.isfinite(v) for k, v in out.items() if k.endswith("per_second"))
    if gpu:
        out["ok"] = (out["ok"] and out["fp16_vs_fp32_min_cosine"] > 0.99 and out["dlpack_handover_on_device"]
                     and out["dlpack_handover_identical"])
    return out


#: the encoder batches the GPU check times besides the one chosen from free memory
ENCODER_BATCHES = (256, 1024)


def fixed_batch_rates(model: str, passages: list[str], queries: list[str], device: str = "cuda",
                      batches: tuple[int, ...] = ENCODER_BATCHES) -> list[dict[str, Any]]:
    """Passage and query texts/s of the torch encoder (fp16 on CUDA) at each batch of `batches` (one
    warm-up batch first; sentence-transformers sorts each call's texts by length, as the CPU runtime does)."""
    import torch

    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders.sentence import SentenceTransformerEncoder

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    encoder = SentenceTransformerEncoder(EncoderConfig(model=model, device=device))
    rows = []
    for batch in batches:
        encoder.batch_size = batch
        encoder.encode(passages[:batch])  # warm-up at this shape
        row: dict[str, Any] = {"batch": batch}
        for kind, items in (("passage", passages), ("query", queries)):
            sync()
            start = time.perf_counter()
            encoder.encode(items, kind=kind)
            sync()
            row[f"{PLURAL[kind]}_per_second"] = len(items) / (time.perf_counter() - start)
        print(f"encoder {device} batch {batch}: {row['passages_per_second']:,.0f} passages/s, "
              f"{row['queries_per_second']:,.0f} query texts/s", file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def bench_scale(sizes: list[int], queries: int, batch: int, deadline: "Deadline", scratch: Path,
                cpu_queries: int) -> dict[str, Any]:
    """The `scale` section (module doc): per size, the streamed build's seconds, then TIGRAG paper and best
    with their default modes through `gpu_tigrag.benchmark` (a fresh process each) on the device backend
    and on numpy (its first `cpu_queries` queries)."""
    from bench.query_scale import synthetic_queries
    from bench.scale import STAND_INS, synth

    from gpu_tigrag.benchmark import BenchSpec, run_child
    from gpu_tigrag.config import config_to_dict
    from gpu_tigrag.presets import preset

    rows: list[dict[str, Any]] = []
    last_build = None  # seconds of the previous size's build, to skip a size that cannot finish in time
    for n in sizes:
        left = deadline.left(10 ** 6)
        if last_build is not None and last_build * n / rows[-1]["passages"] > left:
            rows.append({"passages": n, "skipped": f"its build would need ~{last_build * n / rows[-1]['passages']:.0f} s, "
                                                   f"{left:.0f} s were left"})
            continue
        index = scratch / f"scale_{n}"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "-q", "index", str(synth(n)), "-o", str(index),
                        "--stream", "--workers", str(max(1, (os.cpu_count() or 2) - 1)), "--backend", BACKENDS[0],
                        *STAND_INS], check=True, timeout=deadline.left(3600))
        last_build = time.perf_counter() - start
        texts = synthetic_queries(n, queries)
        row: dict[str, Any] = {"passages": n, "build_seconds": last_build, "systems": []}
        for name in ("paper", "best"):
            for backend, items in ((BACKENDS[0], texts), ("numpy", texts[:cpu_queries])):
                spec = BenchSpec(index=str(index), queries=items, system=f"TIGRAG {name}",
                                 config=config_to_dict(preset(name)), threads=None, batch_sizes=(min(batch, len(items)),),
                                 backend=backend, k=10, spawned=0.0)
                result = run_child(spec, timeout=deadline.left(900))
                timing = result["batches"][0]
                row["systems"].append({"system": f"TIGRAG {name}", "backend": result["backend"],
                                       "modes": result.get("modes", {}), "queries": len(items),
                                       "queries_per_second": timing["queries_per_second"],
                                       "peak_rss_mib": result["peak_rss_mib"]})
                print(f"scale {n:,} TIGRAG {name} on {result['backend']}: {timing['queries_per_second']:,.1f} q/s "
                      f"({result.get('modes', {})})", file=sys.stderr, flush=True)
        rows.append(row)
    built = [r for r in rows if "systems" in r]
    return {"ok": bool(built) and all(positive_rate(s["queries_per_second"]) for r in built for s in r["systems"]),
            "sizes": rows}


def positive_rate(value: Any) -> bool:
    return isinstance(value, (int, float)) and np.isfinite(value) and value > 0


REPORT_FILE = "gpu_check.json"


def section(report: dict[str, Any], name: str, fn: Callable[[], Any], out: Path) -> None:
    """Run one section and record its result, its seconds and its status in `report["status"]`:
    "ok", "failed" (it ran, but its result says "ok": false) or "error" (it raised). The report is
    rewritten after each section, so a run stopped by its time limit keeps what it had measured."""
    start = time.perf_counter()
    try:
        report[name] = fn()
        failed = isinstance(report[name], dict) and report[name].get("ok") is False
        report.setdefault("status", {})[name] = "failed" if failed else "ok"
    except Exception as exc:  # recorded, never hidden: the exit status says a section failed
        report[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        report.setdefault("status", {})[name] = "error"
        print(f"section {name} FAILED: {exc}", file=sys.stderr, flush=True)
    report.setdefault("section_seconds", {})[name] = time.perf_counter() - start
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, default=str) + "\n")


def smoke_inputs(folder: Path) -> tuple[Path, Path]:
    """A tiny index of examples/corpus.json (stand-in encoder `hashing:256` and NER `capitalized`)
    and its questions' recorded vectors, in `folder`: the smoke run's stand-in for the 2Wiki inputs."""
    from bench.checks.prepare_gpu_check import write_query_inputs

    from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import save_index

    config = IndexConfig(encoder=EncoderConfig(model="hashing:256"), entities=EntityConfig(model="capitalized"))
    index = build_index(load_corpus(ROOT / "examples" / "corpus.json"), config)
    save_index(index, folder / "index")
    questions = json.loads((ROOT / "examples" / "questions.json").read_text())
    write_query_inputs(index, [q["question"] for q in questions], folder / "inputs")
    return folder / "index", folder / "inputs"


def run_workers(out: Path, smoke: bool, timeout: float) -> dict[str, Any]:
    """bench/gpu_workers.py in a subprocess (its own Dask clusters); its report, read back even
    when it fails or times out, with "ok" false then."""
    folder = out / "workers"
    command = [sys.executable, str(ROOT / "bench" / "gpu_workers.py"), "--out", str(folder)]
    if smoke:
        command += ["--smoke", "--passages", "300", "--queries", "60", "--cpu-workers", "1",
                    "--work", str(folder / "work")]
    try:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        returncode, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:  # its captured output is bytes even with text=True
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        returncode, log = None, f"timed out after {timeout:.0f} s\n{stderr}"
    (out / "gpu_workers.log").write_text(log)
    path = folder / "gpu_workers.json"
    report = json.loads(path.read_text()) if path.is_file() else {}
    return {**report, "returncode": returncode, "ok": returncode == 0 and report.get("ok") is True}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu")
    parser.add_argument("--index", type=Path, help="default .cache/bench/index_2wikimultihopqa (smoke: a tiny one)")
    parser.add_argument("--inputs", type=Path, help="default .cache/bench/gpu_inputs (smoke: the tiny index's)")
    parser.add_argument("--sizes", type=int, nargs="+", help="synthetic corpora, chunks (default 100000 1000000)")
    parser.add_argument("--batches", type=int, nargs="+", help="PPR and engine batches (default 256 1024 4096)")
    parser.add_argument("--cpu-max-chunks", type=int, default=100_000, help="largest synthetic corpus also run on CPU")
    parser.add_argument("--cpu-max-batch", type=int, default=1024, help="largest batch also run on CPU")
    parser.add_argument("--deadline-s", type=float, default=330, help="time budget of the whole run, seconds")
    parser.add_argument("--no-workers", action="store_true", help="skip the workers section")
    parser.add_argument("--scale-passages", type=int, nargs="*",
                        help="synthetic passages of the scale section (default 100000 1000000; none: skip it)")
    parser.add_argument("--smoke", action="store_true", help="CPU-only dry run of this script (numpy for both)")
    args = parser.parse_args()
    deadline = Deadline(args.deadline_s)
    if args.smoke:
        BACKENDS[0] = "numpy"
    args.sizes = args.sizes or ([2_000] if args.smoke else [100_000, 1_000_000])
    args.batches = args.batches or ([4, 16] if args.smoke else [256, 1024, 4096])
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "smoke": args.smoke,
                              "backends": list(BACKENDS)}
    if not args.smoke:
        section(report, "device", device_info, args.out)
    section(report, "parity", lambda: run_parity(args.out, PARITY_MARKER, deadline.left(600), need_passed=not args.smoke),
            args.out)
    section(report, "indexing", lambda: bench_indexing(args.sizes, args.cpu_max_chunks), args.out)
    section(report, "pair_count", lambda: bench_pair_count(args.sizes, args.cpu_max_chunks), args.out)
    section(report, "dense_search", lambda: bench_dense_search([3_000] if args.smoke else [131_072, 1_048_576],
                                                               [1, 16] if args.smoke else [1, 256],
                                                               args.cpu_max_chunks if args.smoke else 131_072),
            args.out)

    loaded: dict[str, Any] = {}

    def need(key: str) -> Any:
        if key not in loaded:
            raise RuntimeError("section load_index failed")
        return loaded[key]

    def load() -> dict[str, Any]:
        from gpu_tigrag.encoders import PrecomputedEncoder
        from gpu_tigrag.index.store import load_index

        if args.smoke and args.index is None:
            args.index, args.inputs = smoke_inputs(args.out / "smoke_inputs")
        index_path = args.index or ROOT / ".cache" / "bench" / "index_2wikimultihopqa"
        inputs = args.inputs or ROOT / ".cache" / "bench" / "gpu_inputs"
        loaded["index"] = load_index(index_path)
        loaded["queries"] = json.loads((inputs / "queries.json").read_text())
        loaded["encoder"] = PrecomputedEncoder.load(inputs / "vectors.npz")
        return {"ok": True, "index": str(index_path), "chunks": loaded["index"].n_chunks,
                "vocab": loaded["index"].n_vocab, "queries": len(loaded["queries"])}

    def ppr() -> dict[str, Any]:
        from gpu_tigrag.methods.tigrag.retriever import Retriever

        index, queries = need("index"), need("queries")
        seeds = Retriever(index, RetrievalConfig(), encoder=need("encoder"), backend="numpy").query_seeds(queries)
        return bench_ppr(index, [s for s in seeds if len(s)], args.batches, args.cpu_max_batch)

    section(report, "load_index", load, args.out)
    section(report, "ppr", ppr, args.out)
    section(report, "engine", lambda: bench_engine(need("index"), need("queries"), need("encoder"),
                                                   args.batches, args.cpu_max_batch), args.out)

    def encoder() -> dict[str, Any]:
        inputs = args.inputs or ROOT / ".cache" / "bench" / "gpu_inputs"
        model, weights = encoder_folder(inputs, args.out)
        result = bench_encoder(need("index"), need("queries"), model, weights, 16 if args.smoke else 1000,
                               args.batches[0], gpu=not args.smoke)
        if args.smoke:  # the random-weights path and the fixed batches of the GPU machine, exercised here too
            result["fixed_batches"] = fixed_batch_rates(model, need("index").chunk_texts[:8], need("queries")[:8],
                                                        device="cpu", batches=(2, 4))
            result["random_weights"] = random_weights_check(args.out)
            result["ok"] = result["ok"] and result["random_weights"]["ok"]
        return result

    section(report, "encoder", encoder, args.out)
    if not args.no_workers:
        section(report, "workers", lambda: run_workers(args.out, args.smoke, deadline.left(600)), args.out)
    scale = args.scale_passages if args.scale_passages is not None else ([300] if args.smoke else [100_000, 1_000_000])
    if scale:
        section(report, "scale", lambda: bench_scale(scale, 64 if args.smoke else 1000, 16 if args.smoke else 1024,
                                                     deadline, args.out / "scale_indexes", 16 if args.smoke else 256),
                args.out)
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (args.out / REPORT_FILE).write_text(json.dumps(report, indent=2, default=str) + "\n")
    failed = [name for name, status in report["status"].items() if status != "ok"]
    print(json.dumps({k: v for k, v in report.items() if k != "section_seconds"}, indent=1, default=str)[:6000])
    print(f"wrote {args.out / REPORT_FILE}; failed sections: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
