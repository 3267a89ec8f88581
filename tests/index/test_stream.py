"""Streaming, partitioned index build: equals the in-memory build; resumes after a kill."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from helpers import EXAMPLES, logged_messages, string_entities
from gpu_tigrag.config import EncoderConfig, IndexConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import read_manifest
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.index.stream import build_index_streaming
from gpu_tigrag.synth import passages, write_corpus

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"))


def test_streaming_build_equals_in_memory_build(tmp_path, backend):
    encoder = load_encoder(CONFIG.encoder)
    full = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=encoder, entity_extractor=string_entities)
    streamed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, partition_size=7, workers=2,
                                     encoder=encoder, entity_extractor=string_entities, backend=backend.name)
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
    return read_manifest(index_dir)["files"]


@pytest.mark.slow  # 51 s in the profile on 2 shared cores (3,000-passage streaming builds, one killed)
def test_resume_after_kill_gives_an_identical_index(tmp_path):
    corpus = tmp_path / "synth.jsonl"
    write_corpus(corpus, passages(3000))
    command = [sys.executable, "-m", "gpu_tigrag.cli", "index", str(corpus), "--stream", "--partition-passages", "100",
               "--set", "encoder.model=hashing:32", "--set", "entities.model=capitalized", "-q"]
    subprocess.run(command + ["-o", str(tmp_path / "clean")], check=True, timeout=600, capture_output=True)
    proc = subprocess.Popen(command + ["-o", str(tmp_path / "killed")], stdout=subprocess.DEVNULL)
    work = tmp_path / "killed.work"
    deadline = time.time() + 300
    while time.time() < deadline and len(list(work.glob("*.npz")) if work.exists() else []) < 12:
        time.sleep(0.02)
    psutil = pytest.importorskip("psutil")
    workers = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert work.exists() and not (tmp_path / "killed" / "manifest.json").exists()
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert workers and not alive, "worker processes outlived the killed build"
    with pytest.raises(TigragError, match="pass --resume"):
        build_index_streaming([corpus], tmp_path / "killed", CONFIG)
    subprocess.run(command + ["-o", str(tmp_path / "killed"), "--resume"], check=True, timeout=600, capture_output=True)
    assert files_of(tmp_path / "killed") == files_of(tmp_path / "clean")


def assert_same_index(a, b):
    assert a.vocab.tokens == b.vocab.tokens and a.chunk_texts == b.chunk_texts
    np.testing.assert_array_equal(a.token_ids, b.token_ids)
    assert (a.graph != b.graph).nnz == 0
    np.testing.assert_array_equal(a.bm25.toarray(), b.bm25.toarray())


def test_partitions_on_dask_workers_give_the_same_index(tmp_path):
    pytest.importorskip("distributed")
    from distributed import LocalCluster

    encoder = load_encoder(CONFIG.encoder)
    local = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "local", CONFIG, partition_size=4, workers=1,
                                  encoder=encoder, entity_extractor=string_entities)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        spread = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "dask", CONFIG, partition_size=4,
                                       scheduler=cluster.scheduler_address, encoder=encoder,
                                       entity_extractor=string_entities)
    assert_same_index(spread, local)
    assert files_of(tmp_path / "dask") == files_of(tmp_path / "local")


def test_a_resumed_build_keeps_its_partition_size(tmp_path):
    encoder = load_encoder(CONFIG.encoder)

    def crashing_ner(texts):
        raise RuntimeError("NER crashed")

    with pytest.raises(RuntimeError, match="NER crashed"):  # interrupted after tokenise, count and embed
        build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, partition_size=5, workers=1,
                              encoder=encoder, entity_extractor=crashing_ner)
    with pytest.raises(TigragError, match="partitions of 5 passages, not 9"):
        build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, partition_size=9, resume=True,
                              encoder=encoder, entity_extractor=string_entities)
    with logged_messages() as messages:
        resumed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, memory_budget_mb=4096,
                                        workers=1, resume=True, encoder=encoder, entity_extractor=string_entities)
    assert "6 partition(s) of up to 5 passages tokenised" in messages
    full = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=encoder, entity_extractor=string_entities)
    assert_same_index(resumed, full)


def anonymous_mib(pid: int) -> float:
    """Private heap of one process (the Anonymous: lines of /proc/PID/smaps_rollup), in MiB; 0 once it has gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            return sum(int(line.split()[1]) for line in rollup if line.startswith("Anonymous:")) / 1024
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return 0.0


def peak_anonymous_mib(command: list[str]) -> tuple[float, float]:
    """Peak anonymous memory of a command's own process and, apart, of its child processes together.

    Not PSS: a shared library's pages are split between every process mapping them, so the same build measured
    while another test process runs (CI uses -n 2) reads tens of MiB lower. Anonymous pages belong to the process
    alone. Apart, because the two phases of a streaming build live in different processes: the partitions are
    tokenised and counted in worker processes (what `--memory-budget` sizes), the merge and the assembly of the
    whole index in the build process (what the index's own size sets). Their sum mixes a worker's runtime present
    in one build's peak with an assembly present in the other's."""
    psutil = pytest.importorskip("psutil")
    if not os.path.exists(f"/proc/{os.getpid()}/smaps_rollup"):
        pytest.skip("needs /proc/PID/smaps_rollup (Linux 4.14 or later)")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    root, own, children = psutil.Process(proc.pid), 0.0, 0.0
    while proc.poll() is None:
        try:
            members = root.children(recursive=True)
        except psutil.Error:
            members = []
        own = max(own, anonymous_mib(proc.pid))
        children = max(children, sum(anonymous_mib(member.pid) for member in members))
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
    return own, children


def folder_mib(folder) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20


@pytest.mark.slow  # 85 s in the profile on 2 shared cores (10,000-passage streaming builds, memory measured)
def test_the_memory_budget_bounds_the_working_memory(tmp_path):
    corpus = tmp_path / "synth.jsonl"
    write_corpus(corpus, passages(10000))
    budget = 48
    command = [sys.executable, "-m", "gpu_tigrag.cli", "index", "--stream", "--workers", "1", "-q",
               "--memory-budget", str(budget), "--set", "encoder.model=hashing:32", "--set", "entities.model=capitalized"]
    tiny_build, tiny_workers = peak_anonymous_mib(command + [str(EXAMPLES / "corpus.json"), "-o", str(tmp_path / "tiny")])
    build, workers = peak_anonymous_mib(command + [str(corpus), "-o", str(tmp_path / "bounded")])
    _, one_partition_workers = peak_anonymous_mib(command + [str(corpus), "-o", str(tmp_path / "whole"),
                                                             "--partition-passages", "10000"])
    # the partition work stays within the budget; the partitioning is what keeps it there
    assert workers - tiny_workers <= budget, (tiny_workers, workers)
    assert one_partition_workers - tiny_workers > budget, (tiny_workers, one_partition_workers)
    # the merge and the assembly need memory in proportion to the index, not to the corpus stream
    index_mib = folder_mib(tmp_path / "bounded")
    assert build - tiny_build <= budget + 8 * index_mib, (tiny_build, build, index_mib)


def test_a_build_that_did_nothing_needs_no_resume(tmp_path):
    (tmp_path / "idx.work").mkdir()
    # a description and nothing else, e.g. the Dask scheduler was unreachable (a folder without one is not a build's)
    (tmp_path / "idx.work" / "build.json").write_text(json.dumps({"checkpoints": 2, "config": {}, "inputs": []}))
    encoder = load_encoder(CONFIG.encoder)
    index = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", CONFIG, workers=1, encoder=encoder,
                                  entity_extractor=string_entities)
    assert index.n_chunks > 0 and not (tmp_path / "idx.work").exists()


def test_a_corpus_streamed_twice_is_counted_and_can_be_dropped(tmp_path):
    encoder = load_encoder(CONFIG.encoder)
    copy = tmp_path / "again.json"
    copy.write_bytes((EXAMPLES / "corpus.json").read_bytes())
    once = load_corpus(EXAMPLES / "corpus.json")
    with logged_messages() as messages:
        twice = build_index_streaming([EXAMPLES / "corpus.json", copy], tmp_path / "twice", CONFIG, partition_size=7,
                                      workers=1, encoder=encoder, entity_extractor=string_entities)
    assert len(twice.passage_titles) == 2 * len(once)
    assert any(m.startswith(f"{len(once)} of {2 * len(once)} passages repeat") for m in messages), messages
    with logged_messages() as messages:
        dropped = build_index_streaming([EXAMPLES / "corpus.json", copy], tmp_path / "dropped", CONFIG,
                                        partition_size=7, workers=1, encoder=encoder, entity_extractor=string_entities,
                                        drop_duplicates=True)
    assert f"dropped {len(once)} duplicate passage(s)" in messages
    assert_same_index(dropped, build_index(once, CONFIG, encoder=encoder, entity_extractor=string_entities))
