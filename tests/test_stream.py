"""Streaming, partitioned index build: equals the in-memory build; resumes after a kill."""

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import EXAMPLES, ROOT
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.embed import load_encoder
from gpu_tigrag.index.stream import build_index_streaming
from test_evaluate import string_entities

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"))


def test_streaming_build_equals_in_memory_build(tmp_path):
    encoder = load_encoder(CONFIG.encoder)
    full = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=encoder, entity_extractor=string_entities)
    streamed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, partition_size=7, workers=2,
                                     encoder=encoder, entity_extractor=string_entities)
    assert streamed.vocab.tokens == full.vocab.tokens and streamed.chunk_texts == full.chunk_texts
    np.testing.assert_array_equal(streamed.token_ids, full.token_ids)
    np.testing.assert_array_equal(streamed.chunk_passage, full.chunk_passage)
    assert (streamed.graph != full.graph).nnz == 0
    np.testing.assert_array_equal(streamed.bm25.toarray(), full.bm25.toarray())
    np.testing.assert_array_equal(streamed.embeddings, full.embeddings)
    np.testing.assert_array_equal(streamed.entities.chunk_ids, full.entities.chunk_ids)
    assert streamed.stats == full.stats
    assert (tmp_path / "idx" / "manifest.json").is_file() and not (tmp_path / "idx.work").exists()


def files_of(index_dir):
    return json.loads((index_dir / "manifest.json").read_text())["files"]


def test_resume_after_kill_gives_an_identical_index(tmp_path):
    corpus = tmp_path / "synth.jsonl"
    subprocess.run([sys.executable, str(ROOT / "bench" / "synth.py"), "3000", "-o", str(corpus)], check=True)
    command = [sys.executable, "-m", "gpu_tigrag.cli", "index", str(corpus), "--stream", "--partition-passages", "100",
               "--set", "encoder.model=hashing:32", "--set", "entities.model=capitalized", "-q"]
    subprocess.run(command + ["-o", str(tmp_path / "clean")], check=True, timeout=600, capture_output=True)
    proc = subprocess.Popen(command + ["-o", str(tmp_path / "killed")], stdout=subprocess.DEVNULL)
    work = tmp_path / "killed.work"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(work.glob("*.npz")) if work.exists() else []) < 12:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert work.exists() and not (tmp_path / "killed" / "manifest.json").exists()
    with pytest.raises(TigragError, match="pass --resume"):
        build_index_streaming([corpus], tmp_path / "killed", CONFIG)
    subprocess.run(command + ["-o", str(tmp_path / "killed"), "--resume"], check=True, timeout=600, capture_output=True)
    assert files_of(tmp_path / "killed") == files_of(tmp_path / "clean")
