"""Chunk vectors of a streamed build computed on its workers (index/stream_embed.py): the same index as
an in-memory build, on local worker processes and on Dask workers; where `auto` embeds; what the console
says."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import EXAMPLES, string_entities
from gpu_tigrag.cli import main
from gpu_tigrag.config import EncoderConfig, IndexConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import read_manifest
from gpu_tigrag.index.stream import build_index_streaming
from gpu_tigrag.index.stream_embed import resolve_embed_on

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"))


def in_memory():
    return build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, entity_extractor=string_entities)


def test_workers_embed_their_partitions_into_the_same_index(tmp_path):
    full = in_memory()
    streamed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, partition_size=7, workers=2,
                                     entity_extractor=string_entities, embed_on="workers", threads=2)
    np.testing.assert_array_equal(streamed.embeddings, full.embeddings)
    assert streamed.chunk_texts == full.chunk_texts
    np.testing.assert_array_equal(streamed.entities.chunk_ids, full.entities.chunk_ids)
    assert streamed.timings["embed"] > 0 and streamed.timings["embed_wait"] >= 0
    here = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "here", CONFIG, partition_size=7, workers=2,
                                 entity_extractor=string_entities, embed_on="here")
    assert "embed_wait" not in here.timings
    assert read_manifest(tmp_path / "idx")["files"] == read_manifest(tmp_path / "here")["files"]


def test_the_build_process_loads_no_model_when_the_workers_embed(tmp_path):
    """The index records the workers' encoder (name, fingerprint, runtime, dimension) without this process
    loading it: the model the workers use is never loaded here."""
    from gpu_tigrag.encoders import _ENCODERS, load_encoder

    config = IndexConfig(encoder=EncoderConfig(model="hashing:48"))
    _ENCODERS.pop(config.encoder, None)
    index = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", config, partition_size=7, workers=2,
                                  entity_extractor=string_entities, embed_on="workers")
    assert config.encoder not in _ENCODERS
    loaded = load_encoder(config.encoder)
    assert index.encoder_identity == (loaded.name, loaded.fingerprint, loaded.backend)
    assert index.embeddings.shape[1] == loaded.dim == 48
    np.testing.assert_array_equal(index.embeddings, loaded.encode(index.chunk_texts))


def test_dask_workers_embed_by_default(tmp_path):
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        spread = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "dask", CONFIG, partition_size=4,
                                       scheduler=cluster.scheduler_address, entity_extractor=string_entities)
    assert "embed_wait" in spread.timings
    np.testing.assert_array_equal(spread.embeddings, in_memory().embeddings)


def test_where_auto_embeds():
    assert resolve_embed_on("auto", 1, None, False) == "here"
    assert resolve_embed_on("auto", 4, "tcp://scheduler:8786", False) == "workers"
    assert resolve_embed_on("workers", 2, None, False) == "workers"
    assert resolve_embed_on("auto", 2, "tcp://scheduler:8786", True) == "here"  # an encoder object stays here
    with pytest.raises(TigragError, match="cannot be used with an encoder object"):
        resolve_embed_on("workers", 2, None, True)
    with pytest.raises(TigragError, match="embed_on must be one of"):
        resolve_embed_on("gpu", 2, None, False)


def test_the_console_says_where_the_vectors_were_computed(tmp_path, capsys):
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(tmp_path / "idx"), "--stream", "--workers", "2",
                 "--embed-on", "workers", "--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized",
                 "-q"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("build seconds"))
    assert "(on the workers, added up; waited" in line
