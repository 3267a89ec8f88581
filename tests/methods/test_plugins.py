"""Methods as plug-ins: a fourth method registered from this file alone (no core file names it) goes
through build, storage, `add`, `--set`, the CLI and the evaluation like the built-in ones; and one
device-resident index serves every system of an evaluation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from helpers import EXAMPLES, QUESTIONS, string_entities
from gpu_tigrag.config import CheckedConfig, IndexConfig, RetrievalConfig, config_from_dict, config_to_dict, \
    replace_path, require
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.index.stage_arrays import check_arrays
from gpu_tigrag.methods.registry import IndexStage, Method, System, get_method, register, unregister
from gpu_tigrag.retrieve.factory import make_retriever
from gpu_tigrag.retrieve.base import BaseRetriever, PreparedBatch
from gpu_tigrag.retrieve.device import DeviceIndex


@dataclass(frozen=True)
class LengthIndexConfig(CheckedConfig):
    """The toy stage: each chunk's number of valid tokens, capped."""

    cap: int = 1000

    def _check(self) -> None:
        require(self.cap >= 1, f"lengthy.cap must be >= 1, got {self.cap}")


@dataclass(frozen=True)
class LengthQueryConfig(CheckedConfig):
    """The toy ranking: BM25 of the query tokens plus `bonus` × the chunk's share of the longest length."""

    bonus: float = 0.0


@dataclass
class LengthStage:
    lengths: np.ndarray
    stats: dict[str, Any] = field(default_factory=dict)


def build_lengths(index, config, backend=None, encoder=None, show_progress=False):
    lengths = np.minimum(np.diff(index.token_indptr), config.cap).astype(np.int32)
    return LengthStage(lengths, {"chunks": int(lengths.size)})


def lengths_from_arrays(arrays, strings, index, config, stats, folder):
    check_arrays(folder, arrays, {"lengthy_lengths": ((index.n_chunks,), "i")}, f"{index.n_chunks} chunks")
    return LengthStage(arrays["lengthy_lengths"], stats)


class LengthRetriever(BaseRetriever):
    method = "lengthy"

    def bytes_per_query(self) -> int:
        return 8 * self.index.n_chunks

    def _retrieve_batch(self, batch: PreparedBatch, k: int):
        from gpu_tigrag.ops.fusion import bm25_scores

        stage = self.index.stage("lengthy")
        share = self.device.get("lengthy.share", lambda: self.be.asarray(
            stage.lengths / max(int(stage.lengths.max()), 1)).astype(np.float32)[:, None], source=stage)
        scores = bm25_scores(self.be, self.device.bm25, batch.seeds, self.index.n_vocab) \
            + np.float32(self.config.lengthy.bonus) * share
        ids, vals = self.top_k(scores, k)
        return [self.result(q, ids[i], vals[i]) for i, q in enumerate(batch.queries)]


LENGTHY = Method(
    name="lengthy", label="Lengthy", description="BM25 plus a bonus for long chunks (a test plug-in)",
    retriever=LengthRetriever, query_config=LengthQueryConfig,
    stage=IndexStage(config=LengthIndexConfig, build=build_lengths,
                     to_arrays=lambda stage: ({"lengthy_lengths": stage.lengths}, {}),
                     from_arrays=lengths_from_arrays, arrays=("lengthy_lengths",),
                     summary=lambda index, stage: f"Lengthy stage: {stage.stats['chunks']} chunks"),
    systems=(System("Lengthy", "lengthy"), System("Lengthy with bonus", "lengthy", {"lengthy.bonus": 5.0})),
)


@pytest.fixture
def lengthy():
    register(LENGTHY)
    yield LENGTHY
    unregister("lengthy")


@pytest.fixture(scope="module")
def passages():
    return load_corpus(EXAMPLES / "corpus.json")


def _build(passages, methods=("tigrag",)):
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.index.build import build_index

    config = IndexConfig(encoder=EncoderConfig(model="hashing:64"))
    return build_index(passages, config, encoder=load_encoder(config.encoder), entity_extractor=string_entities,
                       methods=methods)


def test_a_registered_method_has_settings_stage_and_systems(lengthy, passages, tmp_path):
    from gpu_tigrag.evaluate.experiment import all_systems
    from gpu_tigrag.index.store import generation_folder, load_index, read_manifest, save_index

    assert get_method("lengthy") is lengthy and {"Lengthy", "Lengthy with bonus"} <= set(all_systems())
    config = replace_path(RetrievalConfig(method="lengthy"), "lengthy.bonus", "2.5")
    assert config.lengthy.bonus == 2.5 and config_from_dict(RetrievalConfig, config_to_dict(config)) == config
    with pytest.raises(TigragError, match="lengthy.cap must be >= 1"):
        replace_path(IndexConfig(), "lengthy.cap", "0")
    index = _build(passages, ("tigrag", "lengthy"))
    assert index.stage("lengthy").lengths.tolist() == np.diff(index.token_indptr).tolist()
    path = save_index(index, tmp_path / "idx")
    manifest = read_manifest(path)
    assert manifest["methods"]["lengthy"]["files"] == ["lengthy_lengths.npy"]
    loaded = load_index(path)
    assert loaded.has_stage("lengthy") and type(loaded.stages["lengthy"]).__name__ == "StageLoader"  # not read yet
    np.testing.assert_array_equal(loaded.stage("lengthy").lengths, index.stage("lengthy").lengths)
    plain, rich = (make_retriever(loaded, replace_path(RetrievalConfig(method="lengthy"), "lengthy.bonus", b),
                                  backend="numpy").retrieve(QUESTIONS, k=5) for b in ("0", "50"))
    assert [r.chunk_ids for r in plain] != [r.chunk_ids for r in rich]
    # a damaged stage fails its own method only
    np.save(generation_folder(path) / "lengthy_lengths.npy", np.zeros(3, dtype=np.int32))
    damaged = load_index(path, verify_checksums=False)
    assert make_retriever(damaged, RetrievalConfig(method="tigrag"), backend="numpy").retrieve(QUESTIONS[:2], k=3)
    with pytest.raises(IndexFormatError, match="lengthy_lengths.npy"):
        make_retriever(damaged, RetrievalConfig(method="lengthy"), backend="numpy").retrieve(QUESTIONS[:1], k=3)


def test_a_registered_method_through_add_and_the_cli(lengthy, passages, tmp_path, capsys):
    from gpu_tigrag.cli import main
    from gpu_tigrag.index.add import add_passages
    from gpu_tigrag.index.store import load_index

    grown = add_passages(_build(passages[:10], ("tigrag", "lengthy")), passages[10:], entity_extractor=string_entities)
    assert grown.stage("lengthy").lengths.size == grown.n_chunks  # rebuilt over all chunks
    fast = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
    out = tmp_path / "idx"
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(out), *fast]) == 0
    assert main(["extend", str(out), "--methods", "lengthy", "--set", "lengthy.cap=7", "-q"]) == 0
    assert "Lengthy stage:" in capsys.readouterr().out
    assert load_index(out).stage("lengthy").lengths.max() <= 7
    assert main(["eval", str(out), str(EXAMPLES / "questions.json"), "--systems", "Lengthy", "Lengthy with bonus",
                 "BM25", "--json", "-q", "--backend", "numpy"]) == 0
    systems = json.loads(capsys.readouterr().out)["results"]["systems"]
    assert set(systems) == {"Lengthy", "Lengthy with bonus", "BM25"}
    assert systems["Lengthy"]["metrics"] == systems["BM25"]["metrics"]  # bonus 0: BM25 itself
    assert main(["query", str(out), "Who directed The Glass Orchard?", "--method", "lengthy", "--backend", "numpy",
                 "--set", "lengthy.bonus=1", "-q"]) == 0


def test_every_system_of_an_evaluation_shares_one_device_index(passages):
    """`eval --systems all`: the base index's arrays and each method's device arrays are prepared
    once for the whole run, however many systems use them."""
    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.evaluate.experiment import all_systems, available_systems, run_experiment

    index = _build(passages, ("tigrag", "spectrag"))
    dataset = load_dataset(EXAMPLES / "questions.json")
    names, missing = available_systems(index, all_systems())
    from gpu_tigrag.methods.registry import systems

    assert missing == {name: "litesemrag" for name, system in systems().items() if system.method == "litesemrag"}
    assert {"LiteSemRAG", "LiteSemRAG best"} <= set(missing)
    results = run_experiment(index, dataset, names, backend="numpy")

    expected = [name for name, system in systems().items() if system.method != "litesemrag"]
    assert set(results["systems"]) == set(names) == set(expected) and len(names) >= 23
    prepared = DeviceIndex.of(index, get_backend("numpy")).prepared
    assert {"bm25", "embeddings", "transition", "spectrag.chunk_graph"} <= set(prepared)
    assert set(prepared.values()) == {1}, prepared


def test_make_retriever_refuses_an_option_no_method_takes(passages):
    index = _build(passages[:5])
    with pytest.raises(TigragError, match="unknown retriever option.*encodr"):
        make_retriever(index, RetrievalConfig(method="bm25"), backend="numpy", encodr=None)
    # an option of another method (TIGRAG's entity extractor) is dropped for BM25
    assert make_retriever(index, RetrievalConfig(method="bm25"), backend="numpy",
                          entity_extractor=string_entities).retrieve(QUESTIONS[:1], k=2)


def test_a_retriever_must_write_the_two_abstract_methods(passages):
    """BaseRetriever is an abstract base: a method's retriever without `_retrieve_batch` (or
    `bytes_per_query`) cannot be made, and the error names what is missing."""

    class Unfinished(BaseRetriever):
        method = "bm25"

        def bytes_per_query(self) -> int:
            return 8

    assert BaseRetriever.__abstractmethods__ == {"_retrieve_batch", "bytes_per_query"}
    with pytest.raises(TypeError, match="_retrieve_batch"):
        Unfinished(_build(passages[:5]), RetrievalConfig(method="bm25"), backend="numpy")


def test_a_stage_of_a_method_not_installed_is_kept_not_dropped(lengthy, passages, tmp_path):
    from gpu_tigrag.index.store import load_index, read_manifest, save_index

    path = save_index(_build(passages[:5], ("tigrag", "lengthy")), tmp_path / "idx")
    unregister("lengthy")  # the plug-in is not installed where the index is read next
    try:
        index = load_index(path)
        assert make_retriever(index, RetrievalConfig(method="bm25"), backend="numpy").retrieve(QUESTIONS[:1], k=2)
        with pytest.raises(TigragError, match="'lengthy', which is not installed"):
            index.stage("lengthy")
        with pytest.raises(TigragError, match="stage of lengthy, a method not installed here.*nothing was written"):
            save_index(index, path)
        assert "lengthy" in read_manifest(path)["methods"]
    finally:
        register(LENGTHY, replace=True)
