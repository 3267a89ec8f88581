"""SpectRAG's query stage: each batched stage against a plain per-query version, and the whole
retriever against a straightforward reference written with loops, dicts, scipy and networkx."""

import dataclasses
import os
import subprocess
import sys
import textwrap

import networkx as nx
import numpy as np
import pytest
import scipy.sparse

from gpu_tigrag.backend import cuda_available, get_backend
from gpu_tigrag.config import ChunkConfig, EncoderConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.methods.spectrag.config import SpectragQueryConfig
from gpu_tigrag.corpus import Passage
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import TigragError
from gpu_tigrag.ops.subgraph_ppr import CandidatePairs, subgraph_pagerank
from gpu_tigrag.index.build import build_index
from gpu_tigrag.methods.spectrag.chunk_graph import ChunkGraph
from gpu_tigrag.methods.spectrag.candidates import expand_pairs
from gpu_tigrag.methods.spectrag.retriever import SpectragRetriever, spectral_proximity
from gpu_tigrag.ops.rows import unit_rows
from gpu_tigrag.methods.spectrag.token_budget import select_contexts

from block_reference import block_fused_seeds as fused_seeds
from block_reference import block_relevance as relevance


def random_weights(n, seed, density=0.15, isolated=()):
    rng = np.random.default_rng(seed)
    w = rng.random((n, n)) * (rng.random((n, n)) < density)
    w = np.triu(w, 1)
    w = w + w.T
    for i in isolated:
        w[i, :] = w[:, i] = 0
    return w.astype(np.float32)


def direct_subgraph_ppr(w, members, seeds, d):
    """Solve x = d (P x + v · dangling mass) + (1 - d) v on the subgraph induced by `members`."""
    members = list(members)
    sub = w[np.ix_(members, members)].astype(np.float64)
    deg = sub.sum(axis=0)
    p = np.where(deg > 0, sub / np.where(deg > 0, deg, 1), 0.0)
    v = np.array([1.0 if m in set(seeds) else 0.0 for m in members])
    v /= v.sum()
    a = np.eye(len(members)) - d * (p + np.outer(v, (deg == 0).astype(float)))
    return dict(zip(members, np.linalg.solve(a, (1 - d) * v)))


def pairs_and_seeds(be, n, masks, seeds):
    mask = np.zeros((n, len(masks)), dtype=bool)
    for b, members in enumerate(masks):
        mask[list(members), b] = True
    return CandidatePairs.from_mask(be, be.asarray(mask)), be.asarray(np.array(seeds, dtype=np.int64).T)


# -- subgraph PPR ---------------------------------------------------------------------------
def test_subgraph_ppr_equals_a_direct_solve_per_query(backend):
    n = 40
    w = random_weights(n, seed=3, isolated=(7,))
    rng = np.random.default_rng(4)
    masks, seeds = [], []
    for b in range(5):
        members = set(rng.choice(n, size=int(rng.integers(6, 25)), replace=False).tolist())
        s = sorted(members)[:2]
        members |= {7} if b == 1 else set()  # an isolated chunk: dangling inside its subgraph
        masks.append(sorted(members))
        seeds.append(s if b != 2 else [s[0], s[0]])  # a repeated seed counts once
    masks.append([5, 6])  # two candidates, no edge between them (unless the draw made one)
    w[5, 6] = w[6, 5] = 0
    seeds.append([5, 5])
    pairs, dev_seeds = pairs_and_seeds(backend, n, masks, seeds)
    weights = backend.csr(scipy.sparse.csr_matrix(w))
    # a tolerance below float32's resolution: 300 sweeps, converged as far as float32 goes
    pi, has_edges, _ = subgraph_pagerank(backend, weights, pairs, dev_seeds, 0.85, 1e-9, 300)
    pi, has_edges = backend.to_host(pi), backend.to_host(has_edges)
    rows, cols = backend.to_host(pairs.rows), backend.to_host(pairs.cols)
    for b, members in enumerate(masks):
        expected = direct_subgraph_ppr(w, members, seeds[b], 0.85)
        got = dict(zip(rows[cols == b].tolist(), pi[cols == b].tolist()))
        assert sorted(got) == sorted(members)
        np.testing.assert_allclose([got[m] for m in members], [expected[m] for m in members], atol=2e-6)
        assert abs(sum(got.values()) - 1) < 1e-5
    assert has_edges.tolist() == [True] * 5 + [False]
    assert got == pytest.approx({5: 1.0, 6: 0.0}, abs=1e-6)  # no edge: all mass stays on the seed


def test_subgraph_ppr_follows_networkx_pagerank_with_its_tolerance():
    """networkx's start (uniform) and stopping rule (L1 change < tol · |M|): the same iterate."""
    be = get_backend("numpy")
    n = 60
    w = random_weights(n, seed=11, density=0.1)
    members = list(range(0, 60, 2))
    seeds = [members[0], members[3]]
    pairs, dev_seeds = pairs_and_seeds(be, n, [members], [seeds])
    pi, _, _ = subgraph_pagerank(be, be.csr(scipy.sparse.csr_matrix(w)), pairs, dev_seeds, 0.85, 1e-6, 200)
    graph = nx.Graph()
    graph.add_nodes_from(members)
    graph.add_weighted_edges_from((i, j, float(w[i, j])) for i in members for j in members if i < j and w[i, j] > 0)
    expected = nx.pagerank(graph, alpha=0.85, personalization={s: 0.5 for s in seeds}, weight="weight",
                           max_iter=200, tol=1e-6)
    np.testing.assert_allclose(pi, [expected[m] for m in members], atol=2e-6)


SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    import scipy.sparse
    from numba import cuda
    from gpu_tigrag.kernels.subgraph_ppr import subgraph_ppr_sweep_cpu, subgraph_ppr_sweep_cuda, subgraph_ppr_sweep_serial
    rng = np.random.default_rng(1)
    sizes = [4, 6, 9]  # pairs per query; query 1 is inactive (converged)
    col_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    blocks = [scipy.sparse.random(m, m, density=0.4, random_state=b, dtype=np.float32) for b, m in enumerate(sizes)]
    sub = scipy.sparse.block_diag([blk + blk.T for blk in blocks], format="csr", dtype=np.float32)
    indptr, indices, prob = sub.indptr.astype(np.int64), sub.indices.astype(np.int64), sub.data
    n_pairs = col_start[-1]
    dangling = (np.diff(indptr) == 0).astype(np.uint8)
    dangling[[1, 12]] = 1  # a flag the kernel reads, whatever the row holds
    x = rng.random(n_pairs).astype(np.float32)
    v = (rng.random(n_pairs) < 0.4).astype(np.float32)
    coef = np.array([0.5, 0.7, 0.9], np.float32)
    active = np.array([1, 0, 1], np.uint8)
    args = (indptr, indices, prob, col_start, dangling, x, v, coef, active, np.float32(0.6))
    out_cpu, delta_cpu, mass_cpu = np.zeros_like(x), np.zeros(3, np.float32), np.zeros(3, np.float32)
    subgraph_ppr_sweep_cpu(*args, out_cpu, delta_cpu, mass_cpu)
    full = 0.6 * (sub @ x) + v * np.repeat(coef, sizes)
    expected = np.where(np.repeat(active, sizes) == 1, full, x)
    assert np.allclose(out_cpu, expected, atol=1e-6)
    for b in range(3):
        part = slice(col_start[b], col_start[b + 1])
        assert abs(delta_cpu[b] - np.abs(expected[part] - x[part]).sum()) < 1e-5
        assert abs(mass_cpu[b] - (expected[part] * dangling[part]).sum()) < 1e-5
    out_one, delta_one, mass_one = np.zeros_like(x), np.zeros(3, np.float32), np.zeros(3, np.float32)
    subgraph_ppr_sweep_serial(*args, out_one, delta_one, mass_one)
    assert (out_one == out_cpu).all() and (delta_one == delta_cpu).all() and (mass_one == mass_cpu).all()
    out_gpu = cuda.to_device(np.zeros_like(x))
    delta_gpu, mass_gpu = cuda.to_device(np.full(3, 9, np.float32)), cuda.to_device(np.full(3, 9, np.float32))
    subgraph_ppr_sweep_cuda(*[cuda.to_device(a) for a in args[:-1]], 0.6, out_gpu, delta_gpu, mass_gpu)
    assert np.allclose(out_gpu.copy_to_host(), out_cpu, atol=1e-6)
    assert np.allclose(delta_gpu.copy_to_host(), delta_cpu, atol=1e-5)
    assert np.allclose(mass_gpu.copy_to_host(), mass_cpu, atol=1e-5)
    print("SIM-OK")
""")


def test_cuda_sweep_matches_njit_twin_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]


def test_cuda_sweep_compiles_to_ptx_for_sm90():
    try:
        import numba_cuda  # noqa: F401
    except ImportError:
        pytest.skip("numba-cuda[cu13] is not installed: PTX compilation not checked")
    script = textwrap.dedent("""
        from numba import cuda
        from gpu_tigrag.kernels.subgraph_ppr import ptx_signatures
        for kernel, signature in ptx_signatures():
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
            assert ".target sm_90" in ptx
            print("PTX-OK")
    """)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.count("PTX-OK") == 1, proc.stderr[-3000:]


# -- seeds, relevance, expansion, spectral ---------------------------------------------------
def test_rrf_seeds_fuse_both_lists_with_first_seen_tie_order(backend):
    xp = backend.xp
    # query 0: dense ranks 0>1>2>3>4..., BM25 ranks 5>1>6 (others 0); query 1: no BM25 match
    dense = np.array([[9, 5], [8, 5], [7, 5], [6, 5], [5, 1], [1, 1], [0, 1], [-1, 1]], dtype=np.float32)
    bm25 = np.zeros_like(dense)
    bm25[[5, 1, 6], 0] = [3.0, 2.0, 1.0]
    seeds = backend.to_host(fused_seeds(backend, xp.asarray(dense), xp.asarray(bm25), 4, 60))
    # fused: 1 -> 1/62 + 1/62 (best); 0 and 5 tie at 1/61 -> dense first (0), then BM25 (5);
    # 2 and 6 tie at 1/63 -> dense first: 2
    assert seeds[:, 0].tolist() == [1, 0, 5, 2]
    # query 1: the dense list alone, equal cosines in chunk-id order
    assert seeds[:, 1].tolist() == [0, 1, 2, 3]


def test_relevance_blends_normalised_cosine_and_bm25_or_falls_back_to_raw_cosine(backend):
    xp = backend.xp
    dense = np.array([[0.5, 0.2, -0.4], [0.25, 0.4, -0.2], [-0.5, 0.1, -0.8]], dtype=np.float32)
    bm25 = np.array([[2.0, 0, 0], [0.0, 0, 1.0], [1.0, 0, 0]], dtype=np.float32)
    rel, matched = relevance(backend, xp.asarray(dense), xp.asarray(bm25), 0.7)
    rel, matched = backend.to_host(rel), backend.to_host(matched)
    assert matched.tolist() == [True, False, True]
    np.testing.assert_allclose(rel[:, 0], 0.7 * dense[:, 0] / 0.5 + 0.3 * bm25[:, 0] / 2.0, rtol=1e-6)
    np.testing.assert_allclose(rel[:, 1], dense[:, 1])  # no BM25 match: raw cosine
    # max cosine <= 0: the cosine is not divided (the code's guard)
    np.testing.assert_allclose(rel[:, 2], 0.7 * dense[:, 2] + 0.3 * bm25[:, 2], rtol=1e-6)


def test_the_spread_scale_puts_every_encoders_cosines_on_one_scale(backend):
    """relevance_scale "spread": (c - mean c) / (max c - mean c) per query, best chunk 1, mean 0, so a
    compressed cosine range (e5's) and a wide one (MiniLM's) give the same relevance; also where BM25 matches
    nothing; the column mean has the same bits alone and in a batch."""
    xp = backend.xp
    wide = np.array([0.1, 0.7, 0.4, 0.2], dtype=np.float32)
    compressed = np.float32(0.8) + wide / np.float32(4)  # e5-like: the same order in a narrow band
    dense = np.stack([wide, compressed, compressed], axis=1)
    bm25 = np.array([[0, 0, 1.0], [0, 0, 0], [0, 0, 2.0], [0, 0, 0]], dtype=np.float32)
    rel, matched = relevance(backend, xp.asarray(dense), xp.asarray(bm25), 0.7, "spread")
    rel, matched = backend.to_host(rel), backend.to_host(matched)
    assert matched.tolist() == [False, False, True]
    expected = (wide - wide.mean()) / (wide.max() - wide.mean())
    np.testing.assert_allclose(rel[:, 0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rel[:, 1], expected, rtol=1e-4, atol=1e-5)  # the encoder's range is gone
    np.testing.assert_allclose(rel[:, 2], 0.7 * expected + 0.3 * bm25[:, 2] / 2.0, rtol=1e-4, atol=1e-5)
    code, _ = relevance(backend, xp.asarray(dense), xp.asarray(bm25), 0.7)  # "max": e5's chunks all near 1
    assert backend.to_host(code)[:, 1].min() > 0.8
    alone, _ = relevance(backend, xp.asarray(np.ascontiguousarray(dense[:, 1:2])), xp.asarray(bm25[:, 1:2]), 0.7,
                         "spread")
    assert backend.to_host(alone)[:, 0].tobytes() == rel[:, 1].tobytes()
    with pytest.raises(TigragError, match="spectrag.relevance_scale must be 'auto', 'max' or 'spread'"):
        RetrievalConfig.of("spectrag", relevance_scale="z")


def expand(be, adjacency, seeds, rel, hops, cap):
    """`expand_pairs` with relevance read off a chunks × B matrix, as a mask (the block reference's form)."""
    xp = be.xp
    n, width = rel.shape
    found = expand_pairs(be, adjacency, seeds, n, lambda rows, cols: rel[rows, cols], hops, cap)
    mask = xp.zeros((n, width), dtype=bool)
    mask[found.keys % n, found.keys // n] = True
    return mask, found.sizes


def test_expansion_is_breadth_first_and_an_overflowing_hop_keeps_the_most_relevant(backend):
    xp = backend.xp
    # a star around 0 (neighbours 1..6), and 1 -- 7 -- 8 a path out of the star
    edges = [(0, i) for i in range(1, 7)] + [(1, 7), (7, 8)]
    a = np.zeros((9, 9), dtype=np.float32)
    for i, j in edges:
        a[i, j] = a[j, i] = 1
    adjacency = backend.csr(scipy.sparse.csr_matrix(a))
    rel = np.array([[1, 0.2, 0.5, 0.5, 0.9, 0.1, 0.5, 0.3, 0.0]] * 3, dtype=np.float32).T.copy()
    seeds = xp.asarray(np.array([[0, 0, 8]]))
    mask, sizes = expand(backend, adjacency, seeds, xp.asarray(rel), 2, 4)
    mask = backend.to_host(mask)
    # query 0: hop 1 finds 1..6, room for 3: 4 (0.9), then 2 and 3 (0.5, lower ids before 6)
    assert np.nonzero(mask[:, 0])[0].tolist() == [0, 2, 3, 4]
    assert sizes[:, 0].tolist() == [4, 4]
    # query 2 from 8: 7, then 1 (two hops), within the cap
    assert np.nonzero(mask[:, 2])[0].tolist() == [1, 7, 8] and sizes[:, 2].tolist() == [2, 3]
    again = backend.to_host(expand(backend, adjacency, seeds, xp.asarray(rel), 2, 4)[0])
    assert (again == mask).all()
    # no cap reached: two full hops
    full, _ = expand(backend, adjacency, seeds, xp.asarray(rel), 2, 100)
    assert np.nonzero(backend.to_host(full)[:, 0])[0].tolist() == list(range(8))


def test_expansion_over_pairs_equals_the_block_masks(backend):
    """Random directed graphs (reach = the transpose's rows), caps that cut most hops, ties in relevance:
    the same candidates and sizes as the chunks × B masks of the block reference."""
    from block_reference import expand as block_expand

    xp = backend.xp
    rng = np.random.default_rng(11)
    for trial in range(6):
        n, width = int(rng.integers(5, 60)), int(rng.integers(1, 9))
        a = (rng.random((n, n)) < rng.uniform(0.02, 0.3)).astype(np.float32)
        a[rng.random((n, n)) < 0.05] = 0
        adjacency = scipy.sparse.csr_matrix(a)
        reach = adjacency.T.tocsr()
        reach.eliminate_zeros()
        rel = rng.integers(0, 4, size=(n, width)).astype(np.float32) / 4  # many equal relevances
        seeds = np.stack([rng.choice(n, size=min(3, n), replace=False) for _ in range(width)], axis=1)
        for hops, cap in ((1, 4), (2, 6), (3, n), (2, 1)):
            mask, sizes = block_expand(backend, backend.csr(adjacency), xp.asarray(seeds), xp.asarray(rel), hops, cap)
            pair_mask, pair_sizes = expand(backend, backend.csr(reach), xp.asarray(seeds), xp.asarray(rel), hops, cap)
            assert (backend.to_host(mask) == backend.to_host(pair_mask)).all(), (trial, hops, cap)
            assert (sizes == pair_sizes).all()


def test_spectral_proximity_equals_a_per_query_loop(backend):
    xp = backend.xp
    rng = np.random.default_rng(8)
    coords = rng.normal(size=(30, 5)).astype(np.float32)
    coords[4] = 0  # a zero row stays 0
    masks = [sorted(rng.choice(30, size=int(rng.integers(5, 15)), replace=False).tolist() + [4]) for _ in range(4)]
    masks = [sorted(set(m)) for m in masks]
    seeds = [m[:3] for m in masks]
    pairs, dev_seeds = pairs_and_seeds(backend, 30, masks, seeds)
    spec = backend.to_host(spectral_proximity(backend, xp.asarray(unit_rows(coords)), pairs, dev_seeds))
    rows, cols = backend.to_host(pairs.rows), backend.to_host(pairs.cols)
    unit = coords / np.maximum(np.linalg.norm(coords, axis=1, keepdims=True), 1e-30)
    for b, members in enumerate(masks):
        expected = [max(float(unit[x] @ unit[s]) for s in seeds[b]) for x in members]
        np.testing.assert_allclose(spec[cols == b], expected, atol=1e-6)
        assert rows[cols == b].tolist() == members


# -- selection ----------------------------------------------------------------------------------
def select(scores, tokens, passages, budget, core_size=2, core_floor=0.3, tail_floor=0.55, tie_band=0.98):
    scores = np.array([scores], dtype=np.float64)
    out, count = select_contexts(scores, np.array([tokens]), np.array([passages]), np.array([scores.shape[1]]),
                                 budget, core_size, core_floor, tail_floor, tie_band)
    return out[0, :count[0]].tolist()


def test_selection_core_floor_tail_floor_and_backfill():
    scores = [1.0, 0.9, 0.5, 0.45, 0.35, 0.2]
    # core (2) needs >= .3: 0, 1; then the tail floor .55 gates 2, 3, 4 (and 5); backfill takes
    # the gated ones >= .3 in score order while the budget holds
    assert select(scores, [10] * 6, [0, 1, 2, 3, 4, 5], budget=100) == [0, 1, 2, 3, 4]
    assert select(scores, [10] * 6, [0, 1, 2, 3, 4, 5], budget=40) == [0, 1, 2, 3]  # backfill stops at the budget
    # a large core: the core floor alone applies to the first 4 selected
    assert select(scores, [10] * 6, [0, 1, 2, 3, 4, 5], budget=100, core_size=4) == [0, 1, 2, 3, 4]


def test_selection_stops_when_the_budget_is_full_and_skips_backfill():
    # coverage order 0, 2, 1 (2 is of a new passage and within the band of 1); 2 falls under the
    # tail floor (gated), 1 overflows the budget: full, so 2 is not backfilled though it fits
    scores, passages = [1.0, 0.56, 0.549], [0, 0, 1]
    assert select(scores, [50, 60, 5], passages, budget=100, core_size=1) == [0]
    assert select(scores, [50, 60, 5], passages, budget=200, core_size=1) == [0, 1, 2]  # room: backfilled
    # the first chunk is taken even when it alone exceeds the budget
    assert select([1.0, 0.9, 0.8], [500, 40, 30], [0, 1, 2], budget=100, core_size=5) == [0]


def test_selection_prefers_uncovered_passages_within_the_tie_band():
    scores = [1.0, 0.99, 0.985, 0.5]
    # 1 shares passage 7 with 0 and sits in the band (>= .98 of 0.99): 2 (passage 8) goes first
    assert select(scores, [1] * 4, [7, 7, 8, 9], budget=100, core_size=5) == [0, 2, 1, 3]
    # outside the band, score order wins
    assert select(scores, [1] * 4, [7, 7, 8, 9], budget=100, core_size=5, tie_band=0.999) == [0, 1, 2, 3]
    # tie_band 1: plain ranking
    assert select(scores, [1] * 4, [7, 7, 8, 9], budget=100, core_size=5, tie_band=1.0) == [0, 1, 2, 3]


# -- the whole retriever against a plain reference -------------------------------------------------
WORDS = ("film director born harbour town lighthouse fishing fleet mountain village drama thriller river castle "
         "king queen painter museum river bridge station railway poet novel").split()


def make_passages(count=24, seed=0):
    rng = np.random.default_rng(seed)
    return [Passage(f"Title {i}", " ".join(" ".join(rng.choice(WORDS, 7)).capitalize() + "."
                                          for _ in range(int(rng.integers(2, 6)))), str(i)) for i in range(count)]


QUERIES = ["film director harbour", "castle king queen river", "?? !!", "railway station bridge poet",
           "painter museum lighthouse"]


@pytest.fixture(scope="module")
def index():
    config = IndexConfig(encoder=EncoderConfig(model="hashing:64"), chunk=ChunkConfig(sentences_per_chunk=2, overlap=0))
    index = build_index(make_passages(), config, encoder=load_encoder(config.encoder),
                        entity_extractor=lambda texts: [[] for _ in texts])
    n = index.n_chunks
    rng = np.random.default_rng(5)
    coords = rng.normal(size=(n, 6)).astype(np.float32)
    coords[2] = 0
    index.stages["spectrag"] = ChunkGraph(scipy.sparse.csr_matrix(random_weights(n, seed=6, density=0.08, isolated=(1,))),
                                coords, np.zeros(7), rng.integers(20, 80, n).astype(np.int32))
    return index


def okapi_reference(texts, query):
    """rank_bm25's BM25Okapi (k1 1.5, b .75, ε .25) over [a-z0-9]+ words, written with dicts and loops."""
    import math
    import re

    docs = [re.findall(r"[a-z0-9]+", t.lower()) for t in texts]
    avgdl = sum(len(d) for d in docs) / len(docs)
    df = {}
    for d in docs:
        for w in set(d):
            df[w] = df.get(w, 0) + 1
    idf = {w: math.log(len(docs) - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
    eps = 0.25 * sum(idf.values()) / len(idf)
    idf = {w: (eps if v < 0 else v) for w, v in idf.items()}
    scores = []
    for d in docs:
        total = 0.0
        for w in re.findall(r"[a-z0-9]+", query.lower()):
            tf = d.count(w)
            total += idf.get(w, 0.0) * tf * 2.5 / (tf + 1.5 * (1 - 0.75 + 0.75 * len(d) / avgdl))
        scores.append(total)
    return np.array(scores)


def reference(index, cfg, query, vector, tokens):
    """SpectRAG for one query, written plainly after the public code (dicts, loops, networkx)."""
    assert cfg.relevance_scale == "max", "the reference scores with the code's cos / max cos"
    n = index.n_chunks
    c = (index.embeddings @ vector).astype(np.float32).astype(np.float64)
    if cfg.bm25 == "okapi":
        bm = okapi_reference(index.chunk_texts, query)
    else:
        counts = np.bincount(tokens, minlength=index.n_vocab).astype(np.float32)
        bm = (index.bm25 @ counts).astype(np.float64)
    s = min(cfg.seeds, n)
    dense_list = sorted(range(n), key=lambda i: (-c[i], i))[:s]
    bm_list = [i for i in sorted(range(n), key=lambda i: (-bm[i], i))[:s] if bm[i] > 0]
    fused = {}
    for lst in (dense_list, bm_list):
        for rank, i in enumerate(lst):
            fused[i] = fused.get(i, 0.0) + 1.0 / (cfg.rrf_k + rank + 1)
    seeds = [i for i, _ in sorted(fused.items(), key=lambda kv: kv[1], reverse=True)][:s]
    dmax = c.max()
    dense_n = c / dmax if dmax > 0 else c
    bpos = np.clip(bm, 0, None)
    rel = cfg.dense_share * dense_n + (1 - cfg.dense_share) * bpos / bpos.max() if bpos.max() > 0 else c
    w = index.spectrag.weights.tocsr()
    visited, frontier = set(seeds), set(seeds)
    for _ in range(cfg.hops):
        new = {int(j) for i in frontier for j in w.indices[w.indptr[i]:w.indptr[i + 1]]} - visited
        room = max(cfg.max_candidates - len(visited), 0)
        new = set(sorted(new, key=lambda j: (-rel[j], j))[:room])
        visited |= new
        frontier = new
    cands = sorted(visited)
    graph = nx.Graph()
    graph.add_nodes_from(cands)
    graph.add_weighted_edges_from((i, int(j), float(w[i, j])) for i in cands for j in w.indices[w.indptr[i]:w.indptr[i + 1]]
                                  if j in visited)
    ppr = None
    if graph.number_of_edges() and cfg.ppr_norm != "off":
        pr = nx.pagerank(graph, alpha=cfg.damping, personalization={x: 1.0 / len(seeds) for x in seeds},
                         weight="weight", max_iter=2000, tol=1e-12)
        top = max(pr.values())
        if cfg.ppr_norm == "rank":  # the share of the other candidates with a smaller π (float32 ties equal)
            ppr = {x: sum(pr[y] < pr[x] * (1 - 1e-5) for y in cands) / max(len(cands) - 1, 1) for x in cands}
        else:
            ppr = {x: pr[x] / top for x in cands}
    z = index.spectrag.coords.astype(np.float64)
    z = z / np.where(np.linalg.norm(z, axis=1, keepdims=True) > 0, np.linalg.norm(z, axis=1, keepdims=True), 1)
    spec = {x: max(float(z[x] @ z[t]) for t in seeds) for x in cands}
    score = {}
    for x in cands:
        prox = cfg.spectral_share * spec[x] + (1 - cfg.spectral_share) * ppr[x] if ppr else spec[x]
        score[x] = (1 - cfg.alpha) * rel[x] + cfg.alpha * prox
        if cfg.proximity_floor > 0 and rel[x] < cfg.proximity_floor * max(rel[y] for y in cands):  # no proximity
            score[x] = (1 - cfg.alpha) * rel[x]
    # selection, as `_token_budget_select` with its coverage order
    ranked = sorted(cands, key=lambda x: (-score[x], x))
    top = score[ranked[0]]
    remaining, covered, order = list(ranked), set(), []
    while remaining:
        best = score[remaining[0]]
        band = [x for x in remaining if score[x] >= best - (1 - cfg.tie_band) * abs(best)]
        band.sort(key=lambda x: (int(index.chunk_passage[x]) in covered, -score[x]))
        order.append(band[0])
        covered.add(int(index.chunk_passage[band[0]]))
        remaining.remove(band[0])
    tokens_of = index.spectrag.chunk_tokens
    budget = cfg.token_budget or round(10 * float(tokens_of.mean()))
    selected, used, gated, full = [], 0, [], False
    for x in order:
        floor = cfg.core_floor * top if len(selected) < cfg.core_size else cfg.tail_floor * top
        if score[x] < floor:
            gated.append(x)
            continue
        if selected and used + tokens_of[x] > budget:
            full = True
            break
        selected.append(x)
        used += tokens_of[x]
    if not full:
        for x in sorted(gated, key=lambda g: score[g], reverse=True):
            if score[x] < cfg.core_floor * top or (selected and used + tokens_of[x] > budget):
                break
            selected.append(x)
            used += tokens_of[x]
    rest = [x for x in ranked if x not in selected]
    outside = sorted((x for x in range(n) if x not in visited), key=lambda x: (-rel[x], x))
    ids = selected + rest + outside
    scores = [score[x] for x in selected + rest] + [(1 - cfg.alpha) * rel[x] for x in outside]
    return ids, scores, len(selected), not bpos.max() > 0


CONFIGS = [
    SpectragQueryConfig(seeds=5, max_candidates=14, hops=2, token_budget=250, core_size=3, ppr_tol=1e-9,
                   ppr_max_iter=300, relevance_scale="max"),
    SpectragQueryConfig(seeds=3, max_candidates=40, hops=1, token_budget=0, core_size=2, tie_band=0.9, alpha=0.7,
                   spectral_share=0.3, ppr_tol=1e-9, ppr_max_iter=300, relevance_scale="max"),
    SpectragQueryConfig(seeds=5, max_candidates=14, hops=2, token_budget=250, core_size=3, ppr_tol=1e-9,
                        ppr_max_iter=300, bm25="index", relevance_scale="max"),
    SpectragQueryConfig(seeds=5, max_candidates=14, hops=2, token_budget=250, core_size=3, ppr_tol=1e-9,
                        ppr_max_iter=300, ppr_norm="rank", proximity_floor=0.8, alpha=0.2, relevance_scale="max"),
    SpectragQueryConfig(seeds=3, max_candidates=40, hops=1, token_budget=0, core_size=2, alpha=0.7,
                        spectral_share=0.3, ppr_tol=1e-9, ppr_max_iter=300, proximity_floor=0.5, relevance_scale="max"),
]


def test_ppr_ranks_share_of_smaller_pi_with_equal_ranks_for_ties(backend):
    from gpu_tigrag.methods.spectrag.retriever import max_normalised, ppr_ranks
    pairs, _ = pairs_and_seeds(backend, 10, [[0, 2, 4, 6, 8], [1, 3], [5]], [[0], [1], [5]])
    pi = backend.asarray(np.array([0.1, 0.4, 0.1, 0.3, 0.1, 0.2, 0.8, 1.0], dtype=np.float32))
    ranks = backend.to_host(ppr_ranks(backend, pairs, pi))
    # query 0: π 0.1 0.4 0.1 0.3 0.1 -> ties at the lowest place; query 1: 0.2 0.8; query 2 alone: 0
    np.testing.assert_allclose(ranks, [0, 1, 0, 0.75, 0, 0, 1, 0])
    np.testing.assert_allclose(backend.to_host(max_normalised(backend, pairs, pi)),
                               [0.25, 1, 0.25, 0.75, 0.25, 0.25, 1, 1])


def test_ppr_norm_off_is_the_spectral_term_alone(index):
    def run(**changes):
        cfg = SpectragQueryConfig(seeds=3, max_candidates=40, hops=1, alpha=0.4, **changes)
        return SpectragRetriever(index, RetrievalConfig(sections={"spectrag": cfg}, method="spectrag"),
                                 backend="numpy").retrieve(QUERIES, k=20)
    off, spectral = run(ppr_norm="off"), run(spectral_share=1.0)
    assert [r.chunk_ids for r in off] == [r.chunk_ids for r in spectral]
    assert [r.scores for r in off] == [r.scores for r in spectral]
    assert [r.context for r in off] == [r.context for r in spectral]


def test_new_settings_are_checked_and_default_to_the_paper():
    cfg = SpectragQueryConfig()
    assert cfg.ppr_norm == "max" and cfg.proximity_floor == 0.0
    with pytest.raises(TigragError):
        SpectragQueryConfig(ppr_norm="component")
    with pytest.raises(TigragError):
        SpectragQueryConfig(proximity_floor=1.5)


def test_auto_scale_is_the_code_s_on_its_encoder_and_spread_on_any_other(index):
    """relevance_scale "auto" (the default): "max" for an index embedded by all-MiniLM-L6-v2, the public
    code's encoder, "spread" for any other; the retriever says what it chose and ranks as that setting does."""
    from gpu_tigrag.methods.spectrag.config import resolve_relevance_scale

    assert SpectragQueryConfig().relevance_scale == "auto"
    assert resolve_relevance_scale(SpectragQueryConfig(), "all-MiniLM-L6-v2")[0].relevance_scale == "max"
    assert resolve_relevance_scale(SpectragQueryConfig(), "multilingual-e5-small")[0].relevance_scale == "spread"
    assert resolve_relevance_scale(SpectragQueryConfig(relevance_scale="max"), "multilingual-e5-small")[1] == {}
    auto = SpectragRetriever(index, RetrievalConfig(method="spectrag"), backend="numpy")
    assert index.config.encoder.model != "all-MiniLM-L6-v2"  # the test index's stand-in encoder
    assert auto.chosen_modes == {"spectrag.relevance_scale": "spread"}
    assert auto.config.spectrag.relevance_scale == "spread"
    spread = SpectragRetriever(index, RetrievalConfig.of("spectrag", relevance_scale="spread"), backend="numpy")
    highest = SpectragRetriever(index, RetrievalConfig.of("spectrag", relevance_scale="max"), backend="numpy")
    got, want, other = (r.retrieve(QUERIES, k=10) for r in (auto, spread, highest))
    assert [r.chunk_ids for r in got] == [r.chunk_ids for r in want]
    assert [r.scores for r in got] != [r.scores for r in other]


def test_spectrag_best_and_its_ablations_are_registered():
    from gpu_tigrag.methods.registry import systems
    from gpu_tigrag.methods.spectrag import BEST, BEST_ABLATIONS
    table = systems()
    assert table["SpectRAG best"].overrides == BEST
    for name, removed in BEST_ABLATIONS.items():
        assert table[name].ablation_of == "SpectRAG best"
        assert table[name].overrides == {**BEST, **removed} and table[name].overrides != BEST


@pytest.mark.parametrize("cfg", CONFIGS, ids=["capped", "wide", "index-bm25", "rank-floor", "max-floor"])
def test_retriever_equals_the_plain_reference(index, backend, cfg):
    retriever = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": cfg}, method="spectrag"), backend=backend)
    k = 20
    results = retriever.retrieve(QUERIES, k=k)
    vectors = retriever.encoder.encode(QUERIES, kind="query")
    for query, vector, tokens, result in zip(QUERIES, vectors, retriever.query_seeds(QUERIES), results):
        ids, scores, context, fallback = reference(index, cfg, query, vector, tokens)
        depth = k
        assert result.context == min(context, k)
        assert result.chunk_ids == ids[:depth], query
        np.testing.assert_allclose(result.scores, scores[:depth], atol=2e-5)
        assert result.dense_fallback == fallback
        assert result.passage_ids == [int(index.chunk_passage[c]) for c in ids[:depth]]
        assert result.titles == [index.passage_titles[p] for p in result.passage_ids]
        assert len(result.hops) == cfg.hops and result.hops[-1].pool_size <= max(cfg.max_candidates, cfg.seeds)
    assert results[2].dense_fallback and not results[0].dense_fallback
    assert {"seed", "expand", "ppr", "spectral", "select", "encode"} <= set(retriever.timer.seconds)


def test_k_is_honoured_and_none_returns_the_context(index):
    """Issue 22: `-k 3` returns 3 chunks, not the whole context; no k returns the context."""
    cfg = SpectragQueryConfig(seeds=5, max_candidates=14, token_budget=10_000, core_size=20)
    retriever = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": cfg}), backend="numpy")
    only_context = retriever.retrieve(QUERIES, k=None)
    deep = retriever.retrieve(QUERIES, k=index.n_chunks + 5)
    short = retriever.retrieve(QUERIES, k=1)
    three = retriever.retrieve(QUERIES, k=3)
    for a, b, c, d in zip(only_context, deep, short, three):
        assert len(a.chunk_ids) == a.context > 3
        assert len(b.chunk_ids) == index.n_chunks and sorted(b.chunk_ids) == list(range(index.n_chunks))
        assert b.context == a.context
        assert c.chunk_ids == a.chunk_ids[:1] and c.context == 1
        assert d.chunk_ids == a.chunk_ids[:3] and d.context == 3 and d.scores == a.scores[:3]
        assert a.chunk_ids == b.chunk_ids[:a.context]
    with pytest.raises(TigragError, match="k"):
        retriever.retrieve(QUERIES, k=0)


def test_a_block_split_on_out_of_memory_gives_the_same_results(index, monkeypatch):
    retriever = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": CONFIGS[0]}), backend="numpy")
    whole = retriever.retrieve(QUERIES, k=8)
    real = SpectragRetriever._retrieve_batch

    def fail_on_big(self, batch, k):
        if len(batch) > 1:
            raise MemoryError
        return real(self, batch, k)

    monkeypatch.setattr(SpectragRetriever, "_retrieve_batch", fail_on_big)
    split = retriever.run_prepared(retriever.prepare(QUERIES), k=8)
    assert [r.chunk_ids for r in split] == [r.chunk_ids for r in whole]
    assert [r.context for r in split] == [r.context for r in whole]


def test_batch_size_follows_the_memory_budget(index):
    small = SpectragRetriever(index, RetrievalConfig(memory_budget_mb=0), backend="numpy")
    assert small.batch_size() == 1
    assert SpectragRetriever(index, RetrievalConfig(batch_size=7), backend="numpy").batch_size() == 7


def test_an_index_without_the_stage_is_a_clear_error(index):

    bare = index.with_stage("spectrag", None)
    with pytest.raises(TigragError, match="tigrag extend INDEX --methods spectrag"):
        SpectragRetriever(bare, backend="numpy")


def test_cupy_results_equal_numpy(index, backend):
    if not backend.is_gpu:
        pytest.skip("compares the CuPy backend with NumPy: needs a CUDA device")
    assert cuda_available()
    cfg = RetrievalConfig(sections={"spectrag": CONFIGS[0]})
    cpu = SpectragRetriever(index, cfg, backend="numpy").retrieve(QUERIES, k=15)
    gpu = SpectragRetriever(index, cfg, backend=backend).retrieve(QUERIES, k=15)
    for a, b in zip(cpu, gpu):
        assert a.chunk_ids == b.chunk_ids and a.context == b.context
        np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)


def test_without_edges_or_coordinates_the_score_is_relevance_and_tiny_indexes_work(index):

    n = index.n_chunks
    bare = index.with_stage("spectrag", ChunkGraph(scipy.sparse.csr_matrix((n, n), dtype=np.float32),
                                                          np.zeros((n, 0), np.float32), np.zeros(1),
                                                          index.spectrag.chunk_tokens))
    retriever = SpectragRetriever(bare, RetrievalConfig(sections={"spectrag": SpectragQueryConfig(seeds=4, relevance_scale="max")}), backend="numpy")
    be = retriever.be
    results = retriever.retrieve(QUERIES, k=n)
    from gpu_tigrag.ops.fusion import bm25_scores

    dense = index.embeddings @ retriever.encoder.encode(QUERIES, kind="query").T
    rel, _ = relevance(be, dense, bm25_scores(be, retriever.bm25, retriever.query_seeds(QUERIES), retriever.n_terms), 0.7)
    for q, result in enumerate(results):
        assert [h.pool_size for h in result.hops] == [4, 4]  # no edge: the seeds alone
        np.testing.assert_allclose(result.scores, rel[result.chunk_ids, q], atol=1e-6)
    # more seeds than chunks, a cap below the seeds: every chunk is a seed and a candidate
    many = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": SpectragQueryConfig(seeds=10 * n, max_candidates=3, relevance_scale="max")}),
                             backend="numpy").retrieve(QUERIES[:2], k=5)
    assert all(r.hops[-1].pool_size == n and r.context >= 1 for r in many)
    one = retriever.retrieve("one query")  # one string: one question, a list of one result
    assert len(one) == 1 and one[0].chunk_ids == retriever.retrieve(["one query"])[0].chunk_ids


def test_okapi_bm25_equals_the_public_codes_formula(index):
    from gpu_tigrag.methods.spectrag.lexical import build_okapi, okapi_words

    okapi = build_okapi(index.chunk_texts)
    assert okapi_words("The Film-Director's 2nd  harbour!") == ["the", "film", "director", "s", "2nd", "harbour"]
    for query in QUERIES + ["the the film", "nothing matches zzz"]:
        counts = np.zeros(okapi.n_words)
        np.add.at(counts, okapi.query_ids(query), 1)
        np.testing.assert_allclose(okapi.matrix @ counts, okapi_reference(index.chunk_texts, query), rtol=1e-6,
                                   atol=1e-6)


def test_the_trace_says_what_spectrag_did(index):
    retriever = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": CONFIGS[0]}), backend="numpy")
    first, _, fallback = retriever.retrieve([QUERIES[0], QUERIES[1], QUERIES[2]], k=4)
    lines = retriever.trace_lines(first)
    assert lines[0].startswith("SpectRAG: 5 seed chunks S0") and "hop 2:" in lines[0] and "cap 14" in lines[0]
    assert lines[1].startswith("context: the first 4 chunks") and "250-token budget" in lines[1]
    assert retriever.trace_lines(fallback)[0].startswith("BM25 matched no chunk")
    assert not any("seed tokens" in line for line in lines) and not any("lift" in line for line in lines)
    lifted = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": dataclasses.replace(
        CONFIGS[0], link_seeds=1, link_lift=0.5)}), backend="numpy")
    lines = lifted.trace_lines(lifted.retrieve([QUERIES[0]], k=4)[0])
    assert "title-link lift: the most relevant seed and every passage named by title there score +0.5" in lines


def test_cli_query_honours_k_and_prints_spectrags_trace(tmp_path, capsys):
    """`tigrag query --method spectrag -k 3` prints 3 chunks and SpectRAG's own trace, not TIGRAG's hop lines."""
    from helpers import EXAMPLES
    from gpu_tigrag.cli import main

    out = tmp_path / "idx"
    fast = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(out), "--methods", "tigrag,spectrag", *fast]) == 0
    capsys.readouterr()
    question = "Who founded the harbour museum?"
    assert main(["query", str(out), question, "--method", "spectrag", "-k", "3"]) == 0
    text = capsys.readouterr().out
    ranks = [line for line in text.splitlines() if line[:1].isdigit() and ". [" in line]
    assert [r.split(".")[0] for r in ranks] == ["1", "2", "3"]
    assert "SpectRAG:" in text and "seed chunks S0" in text and "seed tokens" not in text
    assert main(["query", str(out), question, "--method", "spectrag"]) == 0
    context = capsys.readouterr().out
    ranks = [line for line in context.splitlines() if line[:1].isdigit() and ". [" in line]
    assert f"context: the first {len(ranks)} chunks" in context


def _titled_index():
    """Five one-chunk-or-two passages whose texts name each other's titles, with a random stage graph."""
    texts = ["Korvath film director harbour castle.", "Castle king queen river.", "Mirela Vantz painter museum.",
             "Railway station bridge poet.", "Teodor Brill lighthouse harbour."]
    passages = [Passage(title, body, str(i)) for i, (title, body) in
                enumerate(zip(["Mirela Vantz", "Korvath", "Teodor Brill", "Osric Lane", "Elna Dorr"], texts))]
    config = IndexConfig(encoder=EncoderConfig(model="hashing:64"), chunk=ChunkConfig(sentences_per_chunk=2, overlap=0))
    index = build_index(passages, config, encoder=load_encoder(config.encoder),
                        entity_extractor=lambda texts: [[] for _ in texts])
    n = index.n_chunks
    index.stages["spectrag"] = ChunkGraph(scipy.sparse.csr_matrix(random_weights(n, seed=2, density=0.1)),
                                          np.zeros((n, 0), dtype=np.float32), np.zeros(1),
                                          np.full(n, 30, dtype=np.int32))
    return index


def test_title_links_add_the_link_pairs_to_the_chunk_graph():
    """spectrag.title_links = w: the retriever's W is the stage's plus w × the title-link pairs (link_signal), their
    pattern joins the expansion's, and candidates only grow; an index whose stage holds the links refuses it."""
    import copy
    import dataclasses

    from gpu_tigrag.methods.spectrag.chunk_signals import link_signal

    linked = _titled_index()
    pairs = link_signal(linked.chunk_texts, linked.chunk_passage, linked.passage_titles,
                        linked.config.chunk.title_in_chunk)
    assert pairs.nnz >= 4  # Mirela Vantz <-> Korvath, Teodor Brill <-> Mirela Vantz
    plain = SpectragRetriever(linked, RetrievalConfig.of("spectrag", relevance_scale="max"), backend="numpy")
    with_links = SpectragRetriever(linked, RetrievalConfig.of("spectrag", relevance_scale="max", title_links=0.28),
                                   backend="numpy")
    added = (with_links.weights - plain.weights - np.float32(0.28) * pairs).toarray()
    assert np.abs(added).max() < 1e-6
    rows, cols = pairs.nonzero()
    assert (np.asarray(with_links.reach[cols, rows]).ravel() != 0).all()  # a hop from each end reaches the other
    queries = ["Korvath harbour", "painter museum", "railway poet"]
    for before, after in zip(plain.explain(queries)["candidates"], with_links.explain(queries)["candidates"]):
        assert set(before) <= set(after)
    assert with_links.retrieve(queries, k=3)[0].chunk_ids
    staged = copy.copy(linked)
    staged.config = linked.config.with_section("spectrag", dataclasses.replace(linked.config.spectrag,
                                                                               question_signal="links"))
    with pytest.raises(TigragError, match="already holds"):
        SpectragRetriever(staged, RetrievalConfig.of("spectrag", title_links=0.28), backend="numpy")
    SpectragRetriever(staged, RetrievalConfig.of("spectrag"), backend="numpy")  # without the setting: fine


@pytest.mark.parametrize("bm25, scale", [("okapi", "max"), ("index", "max"), ("okapi", "spread")])
def test_pairs_get_the_block_relevance_bit_for_bit(index, backend, bm25, scale):
    """The candidate pairs' seeds, relevance and expansion against the chunks × B blocks of the reference: the
    seeds identical, each pair's cosine, BM25 and relevance the block's bits, every chunk's relevance
    (`BlockRelevance.block`, the rest's) the block's too."""
    from block_reference import expand as block_expand
    from gpu_tigrag.ops.dense_dot import query_dot
    from gpu_tigrag.ops.fusion import bm25_scores

    cfg = SpectragQueryConfig(relevance_scale=scale, bm25=bm25, seeds=6, max_candidates=9)
    retriever = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": cfg}, method="spectrag"),
                                  backend=backend)
    xp, be = backend.xp, retriever.be
    batch = retriever.prepare(QUERIES)
    seeds, pair_rel, pairs, sizes, _ = retriever._candidates(batch)
    dense = query_dot(be, retriever.embeddings, batch.vectors)
    lexical = bm25_scores(be, retriever.bm25, batch.seeds, retriever.n_terms)
    np.testing.assert_array_equal(backend.to_host(seeds), backend.to_host(fused_seeds(be, dense, lexical, 6, cfg.rrf_k)))
    rel, matched = relevance(be, dense, lexical, cfg.dense_share, scale, mean=pair_rel.mean)
    np.testing.assert_array_equal(backend.to_host(pair_rel.matched), backend.to_host(matched))
    rows, cols = pairs.rows, pairs.cols
    assert backend.to_host(pair_rel.pairs(rows, cols)).tobytes() == backend.to_host(rel[rows, cols]).tobytes()
    all_rows = xp.repeat(xp.arange(index.n_chunks), len(QUERIES))
    all_cols = xp.tile(xp.arange(len(QUERIES)), index.n_chunks)
    from gpu_tigrag.ops.fusion import bm25_of_pairs
    from gpu_tigrag.ops.sparse_scores import gather_dot
    assert (backend.to_host(gather_dot(be, retriever.embeddings, batch.vectors, all_rows, all_cols)).tobytes()
            == backend.to_host(dense.reshape(-1)).tobytes())
    assert (backend.to_host(bm25_of_pairs(be, retriever.bm25, pair_rel.term_rows, all_rows, all_cols)).tobytes()
            == backend.to_host(lexical.reshape(-1)).tobytes())
    cols_host = np.array([2, 0])
    assert backend.to_host(pair_rel.block(cols_host)).tobytes() == backend.to_host(rel[:, xp.asarray(cols_host)]).tobytes()
    adjacency = retriever.weights.copy()
    adjacency.data = (adjacency.data != 0).astype(np.float32)
    mask, block_sizes = block_expand(be, adjacency, seeds, rel, cfg.hops, cfg.max_candidates)
    pair_mask = xp.zeros_like(mask)
    pair_mask[rows, cols] = True
    assert (backend.to_host(mask) == backend.to_host(pair_mask)).all() and (block_sizes == sizes).all()


def test_the_spread_mean_is_the_mean_chunk_vector_dotted_with_the_query(index):
    """"spread"'s mean cosine, (mean chunk vector)·q in k order: within float32 rounding of the chunks' mean
    cosine, and the same bits alone and in a batch."""
    retriever = SpectragRetriever(index, RetrievalConfig(sections={"spectrag": SpectragQueryConfig(
        relevance_scale="spread")}, method="spectrag"), backend="numpy")
    batch = retriever.prepare(QUERIES)
    mean = retriever._candidates(batch)[1].mean
    np.testing.assert_allclose(mean, (index.embeddings.astype(np.float64) @ batch.vectors.T.astype(np.float64)).mean(0),
                               atol=1e-6)
    alone = retriever._candidates(retriever.prepare(QUERIES[1:2]))[1].mean
    assert alone.tobytes() == mean[1:2].tobytes()


@pytest.mark.parametrize("count", [1, 2])
def test_link_lift_raises_the_most_relevant_seeds_and_the_passages_they_name(backend, count):
    """spectrag.link_seeds = r: the r seeds of highest relevance (equal: S0 order) and every chunk their directed
    title links name join the candidates and score link_lift more; with a lift of 10 they are exactly the context
    (nothing else reaches 0.55 × the top score)."""
    from gpu_tigrag.text.titles import forward_title_links

    index = _titled_index()
    forward = forward_title_links(index.chunk_texts, index.chunk_passage, index.passage_titles,
                                  index.config.chunk.title_in_chunk)
    assert forward.nnz >= 3
    queries = ["lighthouse harbour", "painter museum Mirela", "Korvath director harbour"]
    base = dict(relevance_scale="spread", alpha=0.05, ppr_norm="rank")
    plain = SpectragRetriever(index, RetrievalConfig.of("spectrag", **base), backend=backend)
    batch = plain.prepare(queries)
    seeds, relevance, _, _, lifted = plain._candidates(batch)
    assert lifted is None
    seeds = plain.be.to_host(seeds)
    cols = np.broadcast_to(np.arange(len(queries))[None, :], seeds.shape)
    rel = plain.be.to_host(relevance.pairs(plain.be.asarray(seeds.reshape(-1).astype(np.int64)),
                                           plain.be.asarray(cols.reshape(-1).astype(np.int64)))).reshape(seeds.shape)
    lifted_runs = SpectragRetriever(index, RetrievalConfig.of("spectrag", **base, link_seeds=count, link_lift=10.0),
                                    backend=backend).retrieve(queries, k=index.n_chunks)
    unlifted = plain.retrieve(queries, k=index.n_chunks)
    assert [r.chunk_ids for r in unlifted] != [r.chunk_ids for r in lifted_runs]
    for q in range(len(queries)):
        order = sorted(range(seeds.shape[0]), key=lambda i: (-rel[i, q], i))[:count]
        top = {int(seeds[i, q]) for i in order}
        expected = top | {int(c) for t in top for c in forward[t].indices}
        result = lifted_runs[q]
        assert set(result.chunk_ids[:result.context]) == expected
        assert min(result.scores[:result.context]) > max(result.scores[result.context:]) + 5  # lifted by 10
        assert set(result.chunk_ids) == set(unlifted[q].chunk_ids)  # k = every chunk
    assert any(len({int(c) for c in forward[int(s)].indices}) for s in seeds.reshape(-1))
