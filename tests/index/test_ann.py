"""The dense first stage: exact FlatSearch against a full sort, NaiveRAG's rankings through it, the FAISS ANN
(stored with the index, checksummed, rebuilt by add and --stream, added by `extend --ann`), its errors and
settings."""

import dataclasses
import json
import sys

import numpy as np
import pytest

from helpers import EXAMPLES, QUESTIONS, string_entities
from gpu_tigrag.backend import get_backend
from gpu_tigrag.config import (AnnConfig, DenseSearchConfig, EncoderConfig, IndexConfig, RetrievalConfig,
                               replace_path)
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.ann import ANN_FILE, build_ann
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import generation_folder, load_index, read_manifest, save_index
from gpu_tigrag.methods.baselines.retriever import NaiveragRetriever
from gpu_tigrag.ops.topk import ranked_top_k
from gpu_tigrag.retrieve import first_stage as fs
from gpu_tigrag.retrieve.device import DeviceIndex

faiss = pytest.importorskip("faiss")
NUMPY = get_backend("numpy")


def full_sort(embeddings, queries, k):
    """(ids, cosines) B × k of every chunk sorted by cosine, ties by chunk id (the reference)."""
    scores = embeddings @ queries.T
    ids = np.stack([np.lexsort((np.arange(len(col)), -col))[:k] for col in scores.T])
    return ids, np.take_along_axis(scores.T, ids, axis=1)


def unit(rows):
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def tied_vectors(n=600, dim=16, seed=0):
    """Unit vectors with many exact duplicates (equal cosines to any query)."""
    rng = np.random.default_rng(seed)
    base = unit(rng.standard_normal((n // 4, dim)))
    return base[rng.integers(0, len(base), size=n)]


def test_flat_search_equals_a_full_sort_across_blocks_with_ties(monkeypatch):
    # small integers: every product is exact whatever the BLAS kernel's order, so the block-wise scores equal
    # the full product's and the check is on the running top-k and its tie rule alone
    rng = np.random.default_rng(0)
    distinct = rng.integers(-3, 4, size=(60, 16)).astype(np.float32)
    embeddings = distinct[rng.integers(0, 60, size=600)]  # many duplicates: equal scores
    queries = np.concatenate([embeddings[:3], rng.integers(-3, 4, size=(5, 16)).astype(np.float32)])
    monkeypatch.setattr(fs, "BLOCK_BYTES", 12 * len(queries) * 50)  # blocks of 50 rows: 12 blocks
    for k in (1, 7, 40, 600):
        ids, vals = fs.FlatSearch(NUMPY, embeddings).search(queries, k)
        want_ids, want_vals = full_sort(embeddings, queries, k)
        np.testing.assert_array_equal(ids.T, want_ids)
        np.testing.assert_array_equal(vals.T, want_vals)


def old_naiverag(index, vectors, k):
    """NaiveRAG before the first stage: one chunks × B cosine block (the engine's product), ranked."""
    from gpu_tigrag.ops.dense_dot import query_dot

    ids, vals = ranked_top_k(NUMPY, query_dot(NUMPY, index.embeddings, vectors), k)
    return ids.T, vals.T


@pytest.mark.parametrize("random_vectors", [False, True])
def test_naiverag_rankings_through_flat_search_are_unchanged(example_index, random_vectors):
    index = example_index.index
    if random_vectors:  # the example's chunks with tied random vectors
        index = dataclasses.replace(index, embeddings=tied_vectors(index.n_chunks, index.embeddings.shape[1], seed=3),
                                    ann=None)
    retriever = NaiveragRetriever(index, RetrievalConfig(method="naiverag"), backend="numpy")
    vectors = retriever.encode(QUESTIONS)
    if random_vectors:  # some queries equal to a chunk's vector: ties at the top
        vectors = np.concatenate([vectors, index.embeddings[:4]])
        retriever.encode = lambda texts: vectors
    for k in (1, 5, index.n_chunks):
        got = retriever._retrieve_batch(fs_batch(retriever, vectors), k)
        ids, vals = old_naiverag(index, vectors, k)
        assert [r.chunk_ids for r in got] == ids.tolist()
        assert [r.scores for r in got] == [[float(v) for v in row] for row in vals]


def fs_batch(retriever, vectors):
    from gpu_tigrag.retrieve.base import PreparedBatch

    return PreparedBatch([f"q{i}" for i in range(len(vectors))], [np.zeros(0, np.int64)] * len(vectors), vectors)


def clustered(n=3000, dim=32, clusters=30, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)) * 3
    return unit(centres[rng.integers(0, clusters, size=n)] + rng.standard_normal((n, dim)))


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_ann_top_k_overlaps_flat_on_clustered_vectors(kind):
    embeddings = clustered()
    queries = unit(embeddings[:200] + 0.3 * np.random.default_rng(2).standard_normal((200, 32)))
    ann = build_ann(embeddings, AnnConfig(kind=kind))
    search = fs.AnnSearch(NUMPY, embeddings, ann, DenseSearchConfig())
    ids, vals = search.search(queries, 10)
    flat_ids, flat_vals = fs.FlatSearch(NUMPY, embeddings).search(queries, 10)
    overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids.T, flat_ids.T)])
    assert overlap >= 0.95, overlap
    assert ids.shape == (10, 200) and ids.dtype == np.int64 and vals.dtype == np.float32
    # the cosines are the exact ones of the returned chunks, best first
    np.testing.assert_allclose(vals, np.einsum("kbd,bd->kb", embeddings[ids], queries), rtol=1e-5, atol=1e-6)
    assert (np.diff(vals, axis=0) <= 0).all()
    # a worse setting finds fewer (the setting reaches FAISS)
    poor = fs.AnnSearch(NUMPY, embeddings, ann, DenseSearchConfig(nprobe=1, ef_search=1)).search(queries, 10)[0]
    assert np.mean([len(set(a) & set(b)) / 10 for a, b in zip(poor.T, flat_ids.T)]) < overlap


CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), ann=AnnConfig(kind="ivf"))


@pytest.fixture(scope="module")
def ann_index(tmp_path_factory):
    """The example corpus indexed with an IVF ANN (forced: it is far below ann.min_chunks), saved."""
    index = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                        entity_extractor=string_entities)
    path = tmp_path_factory.mktemp("ann") / "index"
    save_index(index, path)
    return index, path


def search_ids(index, settings=None, k=5):
    vectors = load_encoder(CONFIG.encoder).encode(QUESTIONS)
    return fs.first_stage(DeviceIndex(index, NUMPY), settings).search(vectors, k)[0].T.tolist()


def test_stored_ann_survives_save_and_load(ann_index):
    index, path = ann_index
    assert index.ann.kind == "ivf" and "ann" in index.timings
    manifest = read_manifest(path)
    assert manifest["ann"]["kind"] == "ivf" and manifest["ann"]["files"] == [ANN_FILE]
    assert manifest["files"][ANN_FILE]["bytes"] == (generation_folder(path) / ANN_FILE).stat().st_size
    loaded = load_index(path)
    assert loaded.ann is not None and loaded.ann._faiss is None  # read on first use
    assert isinstance(fs.first_stage(DeviceIndex(loaded, NUMPY)), fs.AnnSearch)
    assert search_ids(loaded) == search_ids(index)
    exact = fs.first_stage(DeviceIndex(loaded, NUMPY), DenseSearchConfig(search="exact"))
    assert isinstance(exact, fs.FlatSearch)
    # a second save carries the stored file over (linked), unread
    again = load_index(path)
    save_index(again, path)
    assert read_manifest(path)["files"][ANN_FILE] == manifest["files"][ANN_FILE]
    assert search_ids(load_index(path)) == search_ids(index)


def test_damaged_ann_file_is_a_clear_error_naming_it(ann_index, tmp_path):
    import shutil

    path = tmp_path / "index"
    shutil.copytree(ann_index[1], path)
    file = generation_folder(path) / ANN_FILE
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    file.write_bytes(bytes(data))
    loaded = load_index(path)  # the ANN is read on first use: the rest of the index loads
    with pytest.raises(IndexFormatError, match=rf"{ANN_FILE}: checksum mismatch.*tigrag extend .* --ann"):
        fs.first_stage(DeviceIndex(loaded, NUMPY))
    assert isinstance(fs.first_stage(DeviceIndex(loaded, NUMPY), DenseSearchConfig(search="exact")), fs.FlatSearch)


def test_missing_faiss_is_one_line_naming_exact_search(ann_index, monkeypatch):
    loaded = load_index(ann_index[1])
    monkeypatch.setitem(sys.modules, "faiss", None)  # `import faiss` raises ImportError
    with pytest.raises(TigragError, match=r"faiss cannot be imported.*--set dense\.search=exact") as caught:
        fs.first_stage(DeviceIndex(loaded, NUMPY))
    assert "\n" not in str(caught.value)
    assert isinstance(fs.first_stage(DeviceIndex(loaded, NUMPY), DenseSearchConfig(search="exact")), fs.FlatSearch)


def test_add_rebuilds_the_ann_over_every_chunk(ann_index, tmp_path):
    passages = load_corpus(EXAMPLES / "corpus.json")
    encoder = load_encoder(CONFIG.encoder)
    base = build_index(passages[:18], CONFIG, encoder=encoder, entity_extractor=string_entities)
    grown = add_passages(base, passages[18:], encoder=encoder, entity_extractor=string_entities)
    assert grown.ann.n_chunks == grown.n_chunks > base.ann.n_chunks
    assert grown.ann.faiss_index().ntotal == grown.n_chunks
    save_index(grown, tmp_path / "grown")
    assert read_manifest(tmp_path / "grown")["ann"]["chunks"] == grown.n_chunks
    assert search_ids(load_index(tmp_path / "grown")) == search_ids(grown)


def test_stream_build_holds_the_ann(tmp_path):
    from gpu_tigrag.index.stream import build_index_streaming

    config = dataclasses.replace(CONFIG, ann=AnnConfig(kind="hnsw"))
    streamed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", config, partition_size=10,
                                     workers=1, encoder=load_encoder(config.encoder), entity_extractor=string_entities)
    manifest = read_manifest(tmp_path / "idx")
    assert manifest["ann"]["kind"] == "hnsw" and manifest["ann"]["chunks"] == streamed.n_chunks
    assert load_index(tmp_path / "idx").ann.faiss_index().ntotal == streamed.n_chunks


def test_extend_adds_an_ann_without_rebuilding_the_index(example_index, tmp_path, capsys):
    from gpu_tigrag.cli import main

    path = example_index.copy_to(tmp_path / "index")
    vectors = (generation_folder(path) / "embeddings.npy").read_bytes()
    assert load_index(path).ann is None  # below ann.min_chunks: no ANN by default
    assert main(["extend", str(path), "--ann", "--set", "ann.kind=hnsw", "-q"]) == 0
    after = generation_folder(path)
    assert (after / "embeddings.npy").read_bytes() == vectors  # the base arrays are re-used (cloned or written
    # again from memory, never linked: tests/index/test_generation_copies.py), not rebuilt
    manifest = json.loads((after / "manifest.json").read_text())
    assert manifest["ann"]["kind"] == "hnsw" and manifest["config"]["ann"]["kind"] == "hnsw"
    assert isinstance(fs.first_stage(DeviceIndex(load_index(path), NUMPY)), fs.AnnSearch)
    assert main(["extend", str(path), "--ann", "--set", "ann.kind=none", "-q"]) == 0
    assert load_index(path).ann is None and "ann" not in read_manifest(path)
    assert main(["extend", str(path), "--methods", "spectrag", "--set", "ann.kind=ivf", "-q"]) == 2  # needs --ann
    assert "ann.*" in capsys.readouterr().err


def test_settings_are_validated():
    assert IndexConfig().ann.kind_for(1000) == "none"
    assert IndexConfig().ann.kind_for(IndexConfig().ann.min_chunks) == "ivf"
    assert AnnConfig(kind="hnsw").kind_for(10) == "hnsw"
    for bad in ({"kind": "flat"}, {"min_chunks": 0}, {"hnsw_m": 1}, {"nlist": -1}):
        with pytest.raises(TigragError, match="ann\\."):
            AnnConfig(**bad)
    for bad in ({"search": "ann"}, {"nprobe": 0}, {"ef_search": 0}):
        with pytest.raises(TigragError, match="dense\\."):
            DenseSearchConfig(**bad)
    assert replace_path(RetrievalConfig(), "dense.search", "exact").dense.search == "exact"
    with pytest.raises(TigragError, match="dense.nprobe"):
        replace_path(RetrievalConfig(), "dense.nprobe", "many")


def test_gpu_backend_searches_exactly_and_leaves_the_ann_unread(ann_index):
    import scipy.sparse

    from gpu_tigrag.backend import Backend

    loaded = load_index(ann_index[1])
    gpu_like = Backend("cupy", np, scipy.sparse)  # is_gpu, with NumPy's arrays (no device needed)
    assert isinstance(fs.first_stage(DeviceIndex(loaded, gpu_like)), fs.FlatSearch)
    assert loaded.ann._faiss is None


def test_ann_rescoring_in_slices_and_short_lists_are_exact(monkeypatch):
    embeddings = clustered(n=500, dim=16, clusters=5)
    queries = embeddings[:40]
    ann = build_ann(embeddings, AnnConfig(kind="ivf", nlist=50))
    monkeypatch.setattr(fs, "BLOCK_BYTES", 4 * 30 * 16 * 3)  # re-scored 3 queries at a time
    search = fs.AnnSearch(NUMPY, embeddings, ann, DenseSearchConfig(nprobe=1))
    ids, vals = search.search(queries, 30)  # one list of ~10 vectors cannot hold 30: those queries go exact
    assert search.exact_fills > 0 and (ids >= 0).all()
    np.testing.assert_allclose(vals, np.einsum("kbd,bd->kb", embeddings[ids], queries), rtol=1e-5, atol=1e-6)
    flat_ids = fs.FlatSearch(NUMPY, embeddings).search(queries, 30)[0]
    short = [q for q in range(40) if set(ids[:, q]) == set(flat_ids[:, q])]
    assert len(short) >= search.exact_fills
