"""Readers never see a write (issue 23): readers in loops, through the Python API (`load_index`, a
retrieval, a stage read later) and the command line (`tigrag query`, `tigrag run`), while a writer
runs `add`, `extend` and `--stream` builds on the same index. Every load must succeed and see one of
the committed indexes (identified by its manifest's sha256), never a mixture or an error.

Before generations (issue 23) a load racing a save failed about once per write ("size ... differs
from the manifest's", "checksum mismatch", "no such index directory")."""

import json
import subprocess
import sys
import time

import pytest

from helpers import EXAMPLES, QUESTIONS, ROOT
from gpu_tigrag.index.store import manifest_sha256, read_manifest

pytestmark = [pytest.mark.reliability, pytest.mark.slow]  # ~2 min on 2 shared cores

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
CLI = [sys.executable, "-m", "gpu_tigrag.cli"]

#: a reader process: loads in a loop until `stop` exists; one JSON line per load (or its failure)
API_READER = """
import json, os, sys, time
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.index.store import load_index, origin
from gpu_tigrag.retrieve.factory import make_retriever
path, log, stop, question = sys.argv[1:5]
with open(log, "w") as out:
    n = 0
    while not os.path.exists(stop):
        n += 1
        try:
            index = load_index(path)
            make_retriever(index, RetrievalConfig(), backend="numpy").retrieve([question], k=3)
            time.sleep(0.05)  # a stage read a moment later comes from the same index
            if n % 2 and index.has_stage("spectrag"):
                make_retriever(index, RetrievalConfig(method="spectrag"), backend="numpy").retrieve([question], k=3)
            row = {"sha": origin(index).manifest_sha256, "passages": len(index.passage_titles)}
        except Exception as exc:
            row = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(row) + "\\n")
        out.flush()
        time.sleep(0.1)  # leave the writer some of the machine
"""


def corpus_file(path, extra):
    passages = json.loads((EXAMPLES / "corpus.json").read_text())
    passages += [{"title": t, "text": f"{t} is a new pier near Korvath, built by Marta Quell."} for t in extra]
    path.write_text(json.dumps(passages))
    return path


def wait_for_first_loads(logs, readers, limit_s: float = 300.0) -> None:
    """Block until every reader has logged one load: a cold reader (imports, kernels compiled on first use)
    can take longer than all the writes together, and then it never races them."""
    deadline = time.monotonic() + limit_s
    while not all(log.exists() and log.read_text().strip() for log in logs):
        assert all(proc.poll() is None for proc in readers), "a reader process exited before its first load"
        assert time.monotonic() < deadline, f"the readers did not load the index within {limit_s:.0f} s"
        time.sleep(0.2)


def test_readers_in_loops_never_see_a_write(tmp_path):
    index = tmp_path / "index"
    subprocess.run([*CLI, "index", str(EXAMPLES / "corpus.json"), "-o", str(index), "-q", *FAST,
                    "--methods", "tigrag,spectrag"], check=True, cwd=ROOT, timeout=300, capture_output=True)
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"id": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS[:4])))
    writes = [
        ["add", str(index), str(corpus_file(tmp_path / "a.json", ["Zebrine Quay"])), "-q"],
        ["extend", str(index), "--methods", "spectrag", "-q"],
        ["index", str(corpus_file(tmp_path / "b.json", ["Ulmar Dock", "Tessel Wharf"])), "-o", str(index), "-q",
         *FAST, "--stream", "--workers", "1", "--methods", "tigrag,spectrag"],
    ]
    committed = {manifest_sha256(index): read_manifest(index)["counts"]["passages"]}
    stop = tmp_path / "stop"
    api = [subprocess.Popen([sys.executable, "-c", API_READER, str(index), str(tmp_path / f"api{i}.jsonl"), str(stop),
                             QUESTIONS[i]], cwd=ROOT) for i in range(2)]
    cli_failures, cli_seen, cli_runs = [], [], 0
    try:
        wait_for_first_loads([tmp_path / f"api{i}.jsonl" for i in range(2)], api)
        for command in writes:
            writer = subprocess.Popen([*CLI, *command], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True)
            while writer.poll() is None:  # the command line reads while the write runs
                cli_runs += 1
                out = tmp_path / f"run{cli_runs}.jsonl"
                reader = (["query", str(index), QUESTIONS[cli_runs % len(QUESTIONS)], "-k", "2", "--json"]
                          if cli_runs % 2 else ["run", str(index), str(queries), "-o", str(out), "-k", "2", "-q"])
                done = subprocess.run([*CLI, *reader, "--backend", "numpy"], cwd=ROOT, capture_output=True, text=True,
                                      timeout=300)
                if done.returncode != 0:
                    cli_failures.append(done.stderr.strip().splitlines()[-1:])
                elif reader[0] == "run":
                    cli_seen.append(json.loads(out.with_name(out.name + ".meta.json").read_text())["index"])
            assert writer.wait() == 0, (command, writer.stderr.read())
            committed[manifest_sha256(index)] = read_manifest(index)["counts"]["passages"]
    finally:
        stop.touch()
        for proc in api:
            proc.wait(timeout=120)
    rows = [json.loads(line) for i in range(2) for line in (tmp_path / f"api{i}.jsonl").read_text().splitlines()]
    failures = [row["error"] for row in rows if "error" in row]
    strays = [row for row in rows if "error" not in row and committed.get(row["sha"]) != row["passages"]]
    print(f"\n{len(rows)} API loads ({len(failures)} failed), {cli_runs} CLI reads ({len(cli_failures)} failed) "
          f"during {len(writes)} writes; {len(committed)} committed indexes")
    assert failures == [] and cli_failures == [], (failures[:5], cli_failures[:5])
    assert strays == [] and all(s.removeprefix("manifest:") in committed for s in cli_seen)
    assert len(rows) >= 20 and cli_runs >= len(writes)  # the readers did race the writes
    assert len({row["sha"] for row in rows}) >= 3  # and saw several of the committed indexes
