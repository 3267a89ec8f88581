"""Streaming batch runs: input order, ids, resume after a torn write, after a kill and after a
failed write (disk full)."""

import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import gpu_tigrag.batch_run
from helpers import QUESTIONS
from gpu_tigrag.batch_run import run_queries
from gpu_tigrag.cli import main
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.errors import OutputError, TigragError
from gpu_tigrag.methods.tigrag.retriever import Retriever


@pytest.fixture(scope="module")
def index_path(example_index):
    """The shared example index (read only: every run writes to its own output under tmp_path)."""
    return example_index.path, example_index.index


def write_queries(path, n):
    with open(path, "w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"q{i}", "question": QUESTIONS[i % len(QUESTIONS)] + f" ({i})"}) + "\n")
    return path


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_results_stream_in_input_order_with_ids(index_path, tmp_path):
    _, index = index_path
    queries = write_queries(tmp_path / "q.jsonl", 37)
    retriever = Retriever(index, RetrievalConfig(batch_size=8), backend="numpy")
    stats = run_queries(retriever, queries, tmp_path / "out.jsonl", k=3)
    out = lines(tmp_path / "out.jsonl")
    assert stats["written"] == 37 and [r["index"] for r in out] == list(range(37))
    assert [r["id"] for r in out] == [f"q{i}" for i in range(37)]
    direct = retriever.retrieve([r["query"] for r in out], k=3)
    assert [r["chunk_ids"] for r in out] == [d.chunk_ids for d in direct]
    with pytest.raises(TigragError, match="exists; pass --resume"):
        run_queries(retriever, queries, tmp_path / "out.jsonl")


def test_resume_after_a_torn_write(index_path, tmp_path):
    _, index = index_path
    queries = write_queries(tmp_path / "q.jsonl", 20)
    retriever = Retriever(index, RetrievalConfig(batch_size=4), backend="numpy")
    run_queries(retriever, queries, tmp_path / "full.jsonl", k=3)
    full = (tmp_path / "full.jsonl").read_text().splitlines(keepends=True)
    partial = tmp_path / "partial.jsonl"
    partial.write_text("".join(full[:9]) + full[9][:25])  # killed in the middle of line 10
    (tmp_path / "partial.jsonl.meta.json").write_text((tmp_path / "full.jsonl.meta.json").read_text())  # same run
    stats = run_queries(retriever, queries, partial, k=3, resume=True)
    assert stats["skipped_done"] == 9 and stats["written"] == 11
    assert partial.read_text() == "".join(full)


@pytest.mark.slow  # 68 s in the profile on 2 shared cores (600 queries through the CLI, killed, resumed)
def test_kill_and_restart_loses_and_repeats_nothing(index_path, tmp_path):
    path, _ = index_path
    queries = write_queries(tmp_path / "q.jsonl", 600)
    command = [sys.executable, "-m", "gpu_tigrag.cli", "run", str(path), str(queries), "-k", "3", "-q",
               "--backend", "numpy", "--set", "batch_size=2", "--set", "hops=1"]
    reference = tmp_path / "reference.jsonl"
    subprocess.run(command + ["-o", str(reference)], check=True, timeout=600)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(command + ["-o", str(out)])
    deadline = time.time() + 300
    while time.time() < deadline and (not out.exists() or out.read_text().count("\n") < 40):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = out.read_text().count("\n")
    assert 0 < done < 600, "the kill should land mid-run"
    subprocess.run(command + ["-o", str(out), "--resume"], check=True, timeout=600)
    assert out.read_text() == reference.read_text()


def test_two_dask_workers_give_exactly_the_local_results(index_path, tmp_path):
    pytest.importorskip("distributed")
    from gpu_tigrag.dask_run import run_distributed

    path, index = index_path
    queries = write_queries(tmp_path / "q.jsonl", 90)
    config = RetrievalConfig(batch_size=7)
    local = tmp_path / "local.jsonl"
    run_queries(Retriever(index, config, backend="numpy"), queries, local, k=3)
    spread = tmp_path / "spread.jsonl"
    stats = run_distributed(path, config, queries, spread, k=3, workers=2, backend="numpy")
    assert stats["workers"] == 2 and stats["written"] == 90
    assert spread.read_text() == local.read_text()


@pytest.mark.slow  # 53 s in the profile on 2 shared cores (a Dask cluster, one worker killed)
def test_the_shards_of_a_killed_worker_are_rerun(index_path, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster
    from gpu_tigrag.dask_run import run_distributed

    path, index = index_path
    queries = write_queries(tmp_path / "q.jsonl", 400)
    config = RetrievalConfig.of("tigrag", batch_size=2, hops=1)
    local = tmp_path / "local.jsonl"
    run_queries(Retriever(index, config, backend="numpy"), queries, local, k=3)
    spread = tmp_path / "spread.jsonl"
    killed_at: list[int] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        victim = sorted(client.run(os.getpid).values())[0]

        def kill_when_under_way() -> None:
            deadline = time.time() + 120
            while time.time() < deadline and (not spread.exists() or spread.read_text().count("\n") < 30):
                time.sleep(0.005)
            killed_at.append(spread.read_text().count("\n"))
            os.kill(victim, signal.SIGKILL)

        killer = threading.Thread(target=kill_when_under_way)
        killer.start()
        stats = run_distributed(path, config, queries, spread, k=3, scheduler=cluster.scheduler_address,
                                backend="numpy")
        killer.join()
        survivors = set(client.run(os.getpid).values())
    assert 30 <= killed_at[0] < 400, "the kill should land mid-run"
    assert victim not in survivors
    assert stats["written"] == 400 and spread.read_text() == local.read_text()


def test_parquet_output_in_parts_resumes(index_path, tmp_path):
    import pyarrow.parquet as pq

    _, index = index_path
    queries = write_queries(tmp_path / "q.jsonl", 23)
    retriever = Retriever(index, RetrievalConfig(batch_size=5), backend="numpy")
    run_queries(retriever, queries, tmp_path / "all.jsonl", k=3)
    out = tmp_path / "out.parquet"
    run_queries(retriever, queries, out, k=3)
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) == 5
    parts[-1].unlink()
    parts[-2].unlink()  # as if killed after three batches
    stats = run_queries(retriever, queries, out, k=3, resume=True)
    assert stats["skipped_done"] == 15 and stats["written"] == 8
    rows = pq.read_table(out).to_pylist()
    assert rows == lines(tmp_path / "all.jsonl")


class FullDisk:
    """A file handle whose `fail_at`-th write puts half of its bytes on disk, then fails as a full
    disk does (ENOSPC)."""

    def __init__(self, handle, fail_at: int):
        self.handle, self.fail_at, self.writes = handle, fail_at, 0

    def write(self, data):
        self.writes += 1
        if self.writes == self.fail_at:
            self.handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)


def test_a_full_disk_is_one_line_that_keeps_the_complete_rows_and_resume_finishes(index_path, tmp_path, monkeypatch,
                                                                                   capsys):
    path, _ = index_path
    queries = write_queries(tmp_path / "q.jsonl", 20)
    command = ["run", str(path), str(queries), "-k", "3", "-q", "--backend", "numpy", "--set", "batch_size=4",
               "--set", "hops=1"]
    reference = tmp_path / "reference.jsonl"
    assert main(command + ["-o", str(reference)]) == 0
    real_open = open

    def open_on_a_full_disk(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        return FullDisk(handle, fail_at=3) if "a" in mode else handle

    monkeypatch.setattr(gpu_tigrag.batch_run, "open", open_on_a_full_disk, raising=False)
    out = tmp_path / "out.jsonl"
    capsys.readouterr()
    assert main(command + ["-o", str(out)]) == 4  # out of resources (errors.EXIT_RESOURCES)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tigrag: error: "), err
    assert f"{out}: cannot write (no space left on device); its 8 complete rows are kept" in err[0]
    assert "--resume continues with the next query" in err[0]
    rows = reference.read_text().splitlines(keepends=True)
    assert out.read_text() == "".join(rows[:8])  # the half-written third batch was cut off again
    monkeypatch.undo()
    assert main(command + ["-o", str(out), "--resume"]) == 0
    assert out.read_text() == reference.read_text()


def test_a_failed_parquet_part_keeps_the_earlier_parts(index_path, tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    _, index = index_path
    queries = write_queries(tmp_path / "q.jsonl", 13)
    retriever = Retriever(index, RetrievalConfig(batch_size=5), backend="numpy")
    run_queries(retriever, queries, tmp_path / "all.jsonl", k=3)
    real_write, calls = pq.write_table, []

    def write_table(table, where, *args, **kwargs):
        calls.append(where)
        if len(calls) == 2:
            real_write(table.slice(0, 1), where, *args, **kwargs)  # a partial file, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", write_table)
    out = tmp_path / "out.parquet"
    with pytest.raises(OutputError) as err:
        run_queries(retriever, queries, out, k=3)
    message = str(err.value)
    assert "\n" not in message and "part-000001.parquet: cannot write (no space left on device)" in message
    assert "the 5 rows of the parts before it are kept" in message and "--resume" in message
    assert sorted(p.name for p in out.iterdir()) == ["part-000000.parquet"]  # no temporary left
    monkeypatch.undo()
    stats = run_queries(retriever, queries, out, k=3, resume=True)
    assert stats["skipped_done"] == 5 and stats["written"] == 8
    assert pq.read_table(out).to_pylist() == lines(tmp_path / "all.jsonl")
