"""The reliability report (issue 11): bad values, bad files and failing disks tried through the CLI
as a user would, plus the reliability test suite, written to bench/results/reliability.md/.json.

    python bench/reliability.py            # ~3 min on 2 cores

Each probe runs `tigrag ...` in a fresh process in a scratch folder (tiny corpus, the fast
stand-ins `hashing:64` and `capitalized`) and records its exit code, whether stderr holds a
traceback, its first stderr line, and whether it left an output behind. A probe passes when it
gives what its row expects: exit 2 with one clear line and nothing written, or exit 0 with the
warning named. Concurrent writers, kills and resumes need process choreography: the tests in
the reliability suite (`pytest -m reliability`: tests/test_reliability_*.py and the other tests marked
`reliability`) does those, and its counts per file are in the report too.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import ROOT, write_results

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
CORPUS = [{"title": "Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
          {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
          {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."}]
#: the reliability suite: the tests marked `reliability` (pyproject.toml; tests/test_reliability_*.py and the
#: checks of configuration types, input records and encoder identity)
SUITE_MARKER = "reliability"


@dataclass
class Probe:
    name: str
    args: list[str]
    expect: str  # "error": exit 2, one line, no output; "warn:TEXT": exit 0 and TEXT on stderr; "ok": exit 0
    output: str = ""  # a path the command must not leave behind when it fails

    def run(self, folder: Path) -> dict:
        done = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *self.args], cwd=folder, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
        lines = [line for line in done.stderr.splitlines() if line.strip() and "%|" not in line]
        traceback = "Traceback (most recent call last)" in done.stderr
        left = bool(self.output) and (folder / self.output).exists()
        if self.expect == "error":
            passed = done.returncode == 2 and not traceback and not left and any(
                line.startswith("tigrag: error:") for line in lines)
        elif self.expect.startswith("warn:"):
            passed = done.returncode == 0 and self.expect[5:] in done.stderr and not traceback
        else:
            passed = done.returncode == 0 and not traceback
        error = next((line for line in lines if line.startswith("tigrag: error:")), lines[0] if lines else "")
        return {"probe": self.name, "command": "tigrag " + " ".join(self.args), "expect": self.expect,
                "exit": done.returncode, "traceback": traceback, "stderr": error[:240], "left_output": left,
                "passed": passed}


def scratch_files(folder: Path) -> None:
    (folder / "c.json").write_text(json.dumps(CORPUS))
    (folder / "gold.json").write_text(json.dumps([{"question": "Where was Mirela Vantz born?",
                                                   "gold_titles": ["Mirela Vantz", "Korvath"]}]))
    (folder / "partly.json").write_text(json.dumps([{"question": "Where was Mirela Vantz born?",
                                                     "gold_titles": ["Mirela Vantz", "Atlantis"]}]))
    (folder / "foreign.json").write_text(json.dumps([{"question": "Where was Mirela Vantz born?",
                                                      "gold_titles": ["Atlantis"]}]))
    (folder / "null.json").write_text(json.dumps([{"title": None, "text": "abc def"}]))
    (folder / "empty.jsonl").write_text('{"id": "a", "question": "film"}\n{"id": "b", "question": "  "}\n')
    (folder / "q.jsonl").write_text('{"question": "film"}\n')
    (folder / "q.parquet").write_text("not parquet")
    (folder / "q.txt").write_text("film\n")
    (folder / "afile").write_text("")
    (folder / "badcache").mkdir()
    (folder / "badcache" / "vectors.sqlite3").write_bytes(b"not a database" * 50)
    subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "index", "c.json", "-o", "idx", "-q", *FAST], cwd=folder,
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def probes(small_disk: Path | None) -> list[Probe]:
    rows = [
        Probe("k0", ["run", "idx", "q.jsonl", "-o", "out.jsonl", "-k", "0"], "error", "out.jsonl"),
        Probe("k-1", ["run", "idx", "q.jsonl", "-o", "out.jsonl", "-k", "-1"], "error", "out.jsonl"),
        Probe("empty query in a file", ["run", "idx", "empty.jsonl", "-o", "out.jsonl"], "error", "out.jsonl"),
        Probe("not Parquet", ["run", "idx", "q.parquet", "-o", "out.jsonl"], "error", "out.jsonl"),
        Probe("unknown query format", ["run", "idx", "q.txt", "-o", "out.jsonl"], "error", "out.jsonl"),
        Probe("empty question", ["query", "idx", ""], "error"),
        Probe("k0 query", ["query", "idx", "film", "-k", "0"], "error"),
        Probe("negative limit", ["eval", "idx", "gold.json", "--limit", "-3"], "error"),
        Probe("some gold missing", ["eval", "idx", "partly.json", "-q"], "warn:1 of 2 gold"),
        Probe("no gold present", ["eval", "idx", "foreign.json", "-q"], "error"),
        Probe("bad sweep value", ["eval", "idx", "gold.json", "--systems", "TIGRAG", "--sweep", "th=abc", "-q"],
              "error"),
        Probe("--out under a file", ["eval", "idx", "gold.json", "--systems", "TIGRAG", "--out", "afile/run", "-q"],
              "error"),
        Probe("--out in /proc", ["eval", "idx", "gold.json", "--systems", "TIGRAG", "--out", "/proc/run", "-q"],
              "error"),
        Probe("null title", ["index", "null.json", "-o", "nidx", *FAST], "error", "nidx"),
        Probe("corpus given twice", ["index", "c.json", "c.json", "-o", "dupidx", *FAST], "warn:3 of 6 passages repeat"),
        Probe("twice, dropped", ["index", "c.json", "c.json", "-o", "dupidx2", "--drop-duplicates", *FAST],
              "warn:dropped 3 duplicate"),
        Probe("twice, streamed", ["index", "c.json", "c.json", "-o", "dupidx3", "--stream", "--workers", "1", *FAST],
              "warn:3 of 6 passages repeat"),
        Probe("bm25.k1=-1", ["index", "c.json", "-o", "i1", "--set", "bm25.k1=-1"], "error", "i1"),
        Probe("bm25.b=1.5", ["index", "c.json", "-o", "i1", "--set", "bm25.b=1.5"], "error", "i1"),
        Probe("min_length=100", ["index", "c.json", "-o", "i1", "--set", "tokens.min_length=100"], "error", "i1"),
        Probe("unknown field", ["index", "c.json", "-o", "i1", "--set", "chunk.stride=3"], "error", "i1"),
        Probe("encoder backend", ["index", "c.json", "-o", "i1", "--set", "encoder.backend=tensorrt"], "error", "i1"),
        Probe("index into /proc", ["index", "c.json", "-o", "/proc/idx"], "error"),
        Probe("ppr.max_iter=0", ["query", "idx", "film", "--set", "ppr.max_iter=0"], "error"),
        Probe("ppr.tol=0", ["query", "idx", "film", "--set", "ppr.tol=0"], "error"),
        Probe("rerank=maybe", ["query", "idx", "film", "--set", "rerank=maybe"], "error"),
        Probe("rerank=flase", ["query", "idx", "film", "--set", "rerank=flase"], "error"),
        Probe("replace a sub-config", ["query", "idx", "film", "--set", "ppr=3"], "error"),
        Probe("index setting at query time", ["query", "idx", "film", "--set", "w=5"], "error"),
        Probe("typed list", ["query", "idx", "film", "--set", "entity_labels=PERSON,ORG", "-k", "1"], "ok"),
        Probe("paper symbol", ["query", "idx", "film", "--set", "th=0.5", "-k", "1"], "ok"),
        Probe("damaged vector cache", ["query", "idx", "film", "--vector-cache", "badcache", "-k", "1"],
              "warn:vector cache is damaged"),
        Probe("vector cache bound", ["query", "idx", "film", "--vector-cache", "vc", "--vector-cache-mib", "0"],
              "error"),
    ]
    if small_disk is not None:
        rows += [
            Probe("index onto a full disk", ["index", "c.json", "-o", str(small_disk / "idx"), *FAST], "error"),
            Probe("run onto a full disk", ["run", "idx", "q.jsonl", "-o", str(small_disk / "out.jsonl")], "error"),
            Probe("eval --out onto a full disk",
                  ["eval", "idx", "gold.json", "--systems", "TIGRAG", "--out", str(small_disk / "run"), "-q"], "error"),
        ]
    return rows


def full_disk() -> Path | None:
    """A filled 1 MiB tmpfs (None where this machine does not let us mount one)."""
    folder = Path(tempfile.mkdtemp(prefix="tigrag-full-"))
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        return None
    with open(folder / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    return folder


def run_suite() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                        "-m", SUITE_MARKER, "tests"], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        files: dict[str, dict[str, int]] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("classname", "").split(".")[-1] + ".py"
            outcome = ("failed" if case.find("failure") is not None or case.find("error") is not None
                       else "skipped" if case.find("skipped") is not None else "passed")
            files.setdefault(name, {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
    return {"seconds": seconds, "files": files}


def markdown(results: list[dict], suite: dict, disk: bool) -> str:
    passed = sum(r["passed"] for r in results)
    errors = [r for r in results if r["expect"] == "error"]
    lines = [
        "# Reliability: what a user can get wrong, and what the engine does (issue 11)", "",
        "Reproduce: `.venv/bin/python bench/reliability.py` (CLI probes in fresh processes on a tiny corpus, "
        "then the reliability tests).", "",
        "## Figures", "",
        f"- **{len(results)} CLI probes, {passed} as expected.** {len(errors)} should fail: "
        f"{sum(r['passed'] for r in errors)} gave exit 2 with one `tigrag: error:` line and left no output behind. "
        f"{len(results) - len(errors)} should succeed, with the warning named where there is one.",
        f"- **Tracebacks: {sum(r['traceback'] for r in results)}.** "
        f"**Outputs left by a failed command: {sum(r['left_output'] for r in results)}.**",
        f"- Full-disk probes ran on a real filled tmpfs: {'yes' if disk else 'no (mounting needs root here)'}.",
        f"- **Reliability tests:** {sum(f['passed'] for f in suite['files'].values())} passed, "
        f"{sum(f['failed'] for f in suite['files'].values())} failed, "
        f"{sum(f['skipped'] for f in suite['files'].values())} skipped in {suite['seconds']:.0f} s "
        "(concurrent writers, kills, foreign or damaged resumes, edited corpora, full disks, bad values).", "",
        "| test file | passed | failed | skipped |", "|---|---|---|---|",
        *[f"| {name} | {c['passed']} | {c['failed']} | {c['skipped']} |" for name, c in sorted(suite["files"].items())],
        "", "## Probes", "", "| probe | command | expected | exit | as expected | first stderr line |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        stderr = r["stderr"].replace("|", "\\|")
        lines.append(f"| {r['probe']} | `{r['command']}` | {r['expect']} | {r['exit']} | "
                     f"{'yes' if r['passed'] else '**NO**'} | {stderr} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    disk = full_disk()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            scratch_files(folder)
            results = []
            for probe in probes(disk):
                results.append(probe.run(folder))
                print(f"{probe.name}: {'ok' if results[-1]['passed'] else 'UNEXPECTED'}", file=sys.stderr)
    finally:
        if disk is not None:
            subprocess.run(["umount", "-l", str(disk)], check=False)
            shutil.rmtree(disk, ignore_errors=True)
    suite = run_suite()
    write_results("reliability", {"probes": results, "suite": suite, "full_disk": disk is not None},
                  markdown(results, suite, disk is not None))
    return 0 if all(r["passed"] for r in results) and not any(f["failed"] for f in suite["files"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
