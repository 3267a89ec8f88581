"""The reliability report (issues 11, 23 and 30): bad values, bad files, hostile inputs and failing
disks tried through the CLI and the Python API as a user would, plus the reliability test suite,
written to bench/results/reliability.md/.json.

    python bench/checks/reliability.py            # ~6 min on 2 cores

Each probe runs `tigrag ...` (or a shell pipe, or Python code against the API) in a fresh process
in a scratch folder (tiny corpora, the fast stand-ins `hashing:64` and `capitalized`; spaCy where
the probe is about it) and is classified as the issues count: a clear error (exit 2-4, one
`tigrag: error:` line, nothing left behind), a correct result (exit 0, with the warning named where
there is one), a traceback or a confusing exit, a silent wrong result (the probe's check of what the
command left fails, or a mistake goes through), or data loss. A probe passes when its class is the
one expected. The issue-23 probes and their checks are in bench/checks/reliability_probes.py. Concurrent
writers and readers, kills, resumes and planted links need process choreography: the tests in the
reliability suite (`pytest -m reliability`: tests/test_reliability_*.py and the other tests marked
`reliability`) do those, and the report names the ones that check issue 23's cases.
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
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import ROOT, write_results
from bench.checks.reliability_issue30 import CHECKED_BY_TESTS as ISSUE30_TESTS
from bench.checks.reliability_issue30 import ISSUE30_BEFORE
from bench.checks.reliability_issue30 import probes as issue30_probes
from bench.checks.reliability_issue30 import scratch_files as issue30_scratch
from bench.checks.reliability_probes import CHECKED_BY_TESTS as ISSUE23_TESTS
from bench.checks.reliability_probes import CLASSES, PROBED_CODE, Probe, probed_code
from bench.checks.reliability_probes import probes as issue23_probes
from bench.checks.reliability_probes import scratch_files as issue23_scratch

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
CORPUS = [{"title": "Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
          {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
          {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."}]
#: the reliability suite: the tests marked `reliability` (pyproject.toml; tests/test_reliability_*.py and the
#: checks of configuration types, input records and encoder identity)
SUITE_MARKER = "reliability"
#: the filing session's counts over its own 130 probes (issue 23's text), before this round's changes
ISSUE23_BEFORE = {"clear error": 44, "correct": 40, "traceback or confusing": 32, "silent wrong": 11, "data loss": 3,
                  "security": 0}
#: every case checked by tests rather than scripted probes, with its tests
CHECKED_BY_TESTS = {**ISSUE23_TESTS, **ISSUE30_TESTS}


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
                   check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(probed_code())})


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


def _mount(prefix: str, options: str) -> Path | None:
    """A tmpfs mounted with `options` (None where this machine does not let us mount one)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                                           capture_output=True).returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return folder


def read_only_cache(scratch: Path) -> Path | None:
    """A tmpfs holding a vector cache filled by one query, remounted read-only (root writes
    anywhere else: only a read-only mount refuses it)."""
    folder = _mount("tigrag-ro-", "size=8m")
    if folder is None:
        return None
    subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "query", "idx", "film", "-k", "1", "-q", "--vector-cache",
                    str(folder / "vc")], cwd=scratch, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    return folder


def unmount(folder: Path | None) -> None:
    if folder is not None:
        subprocess.run(["umount", "-l", str(folder)], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def full_disk() -> Path | None:
    """A filled 1 MiB tmpfs (None where this machine does not let us mount one)."""
    folder = _mount("tigrag-full-", "size=1m")
    if folder is None:
        return None
    with open(folder / "filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    return folder


def _pytest(args: list[str]) -> tuple[dict[str, dict[str, int]], dict[str, str], float]:
    """(counts per test file, outcome per test id, seconds) of one pytest run."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                        f"--junitxml={report}", *args], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        files: dict[str, dict[str, int]] = {}
        outcomes: dict[str, str] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            name = case.get("classname", "").split(".")[-1] + ".py"
            outcome = ("failed" if case.find("failure") is not None or case.find("error") is not None
                       else "skipped" if case.find("skipped") is not None else "passed")
            files.setdefault(name, {"passed": 0, "failed": 0, "skipped": 0})[outcome] += 1
            outcomes[f"tests/{name}::{case.get('name')}"] = outcome
    return files, outcomes, seconds


def run_suite() -> dict:
    """The reliability suite (`pytest -m reliability`), then the tests named in CHECKED_BY_TESTS."""
    files, _, seconds = _pytest(["-m", SUITE_MARKER, "tests"])
    named = sorted({test for tests in CHECKED_BY_TESTS.values() for test in tests if (ROOT / test.split("::")[0]).exists()})
    _, outcomes, _ = _pytest(named) if named else ({}, {}, 0.0)
    checked = {}
    for case, tests in CHECKED_BY_TESTS.items():
        rows = []
        for test in tests:
            found = [o for nodeid, o in outcomes.items() if nodeid == test or nodeid.startswith(test.rstrip(":") + "[")
                     or (test.endswith(".py") and nodeid.startswith(test + "::"))]
            rows.append({"test": test, "outcome": ("passed" if found and all(o == "passed" for o in found)
                                                   else "failed" if "failed" in found else "missing" if not found
                                                   else "skipped")})
        checked[case] = rows
    return {"seconds": seconds, "files": files, "checked_by_tests": checked}


def counts(results: list[dict]) -> dict[str, int]:
    return {name: sum(r["class"] == name for r in results) for name in CLASSES}


def markdown(results: list[dict], suite: dict, disk: bool, read_only: bool) -> str:
    new = [r for r in results if r["issue"] == 23]
    latest = [r for r in results if r["issue"] == 30]
    before = _before()
    after, after30 = counts(new), counts(latest)
    lines = [
        "# Reliability: what a user can get wrong, and what the engine does (issues 11, 23 and 30)", "",
        "Reproduce: `.venv/bin/python bench/checks/reliability.py` (probes in fresh processes on tiny corpora, then the "
        "reliability tests).", "",
        "## Figures", "",
        f"- **{len(results)} probes, {sum(r['passed'] for r in results)} as expected** "
        f"({len(results) - len(new) - len(latest)} of issue 11, {len(new)} of issue 23, {len(latest)} of issue 30; "
        "CLI, shell pipes and the Python API).",
        "- **By class, all probes:** " + ", ".join(f"{n} {c}" for n, c in counts(results).items()) + ".",
        f"- **Tracebacks: {sum(r['traceback'] for r in results)}.** "
        f"**Outputs left by a failed command: {sum(r['left_output'] for r in results)}.**",
        f"- Full-disk probes ran on a real filled tmpfs: {'yes' if disk else 'no (mounting needs root here)'}; "
        f"read-only vector cache probes on a read-only tmpfs: {'yes' if read_only else 'no'}.",
        "", "### Issue 23: before and after", "",
        "| class | before: the filing session's 130 probes | after: this run's "
        f"{len(new)} issue-23 probes |", "|---|---|---|",
        *[f"| {name} | {ISSUE23_BEFORE[name]} | {after[name]} |" for name in CLASSES],
        "", "The *before* column is the filing session's count over its own 130 probes (270 calls), copied from "
        "issue 23's text; its probes were not kept, so the *after* column counts this script's probes, one or more "
        "per case the issue lists. What could not be scripted alone is checked by the tests below.", "",
        "### Issue 30: before and after", "",
        "| class | before: the filing session's 204 probes | before: these probes on "
        f"{(before or {}).get('code', '(not run: --code)')} | after: this run's {len(latest)} issue-30 probes |",
        "|---|---|---|---|",
        *[f"| {name} | {ISSUE30_BEFORE[name]} | {(before or {}).get('counts', {}).get(name, '–')} | {after30[name]} |"
          for name in CLASSES],
        "", "As for issue 23, the first *before* column is copied from the issue's text (its probes were not kept); "
        f"the second runs this script's probes on the code before the issue ([{BEFORE_STEM}.md]({BEFORE_STEM}.md)); "
        "the *after* column counts this script's issue-30 probes (bench/checks/reliability_issue30.py), one or more per case "
        "the issue lists and more of each class: every writer tried on a user's file, its own input, an index's "
        "files, a FIFO and a device node; every loader tried on arrays edited with a matching checksum, crafted "
        "headers, pointers and file names.", "",
        "### Cases checked by tests", "", "| case | test | outcome |", "|---|---|---|",
        *[f"| {case} | `{row['test']}` | {row['outcome']} |" for case, rows in suite["checked_by_tests"].items()
          for row in rows],
        "", f"### Reliability tests: {sum(f['passed'] for f in suite['files'].values())} passed, "
        f"{sum(f['failed'] for f in suite['files'].values())} failed, "
        f"{sum(f['skipped'] for f in suite['files'].values())} skipped in {suite['seconds']:.0f} s", "",
        "| test file | passed | failed | skipped |", "|---|---|---|---|",
        *[f"| {name} | {c['passed']} | {c['failed']} | {c['skipped']} |" for name, c in sorted(suite["files"].items())],
        "", "## Probes", "",
        "| issue | probe | command | expected | exit | class | as expected | first stderr line, or the check's finding |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        said = (r["verdict"] or r["stderr"]).replace("|", "\\|").replace("\n", " ")
        command = r["command"] if len(r["command"]) < 160 else r["command"][:157] + "..."
        lines.append(f"| {r['issue']} | {r['probe'].replace('|', chr(92) + '|')} | "
                     f"`{command.replace('|', chr(92) + '|')}` | {r['expect']} | "
                     f"{r['exit']} | {r['class']} | {'yes' if r['passed'] else '**NO**'} | {said} |")
    return "\n".join(lines) + "\n"


#: the issue-30 probes run on the code before issue 30 (`--code DIR`), read by the report when present
BEFORE_STEM = "reliability_issue30_before"


def probes_on(code: Path) -> int:
    """Run the issue-30 probes, the same ones, with the package of the checkout `code` (e.g. a worktree of the
    commit before the issue's changes) and write bench/results/reliability_issue30_before.json/.md."""
    os.environ[PROBED_CODE] = str(code.resolve())
    version = subprocess.run(["git", "-C", str(code), "describe", "--always", "--dirty"], capture_output=True,
                             text=True).stdout.strip() or "unknown"
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        scratch_files(folder)
        issue23_scratch(folder)
        issue30_scratch(folder)
        results = [probe.run(folder) for probe in issue30_probes()]
    found = counts(results)
    lines = [f"# Issue 30's probes on the code before it ({version})", "",
             f"Reproduce: `git worktree add /tmp/before {version} && .venv/bin/python bench/checks/reliability.py --code "
             "/tmp/before` (the probes of bench/checks/reliability_issue30.py, this checkout's, run with that checkout's "
             "gpu_tigrag).", "", "**By class:** " + ", ".join(f"{n} {c}" for n, c in found.items()) + ".", "",
             "| probe | exit | class | first stderr line, or the check's finding |", "|---|---|---|---|",
             *[f"| {r['probe']} | {r['exit']} | {r['class']} | "
               f"{(r['verdict'] or r['stderr']).replace('|', chr(92) + '|')[:160]} |" for r in results]]
    write_results(BEFORE_STEM, {"code": version, "probes": results, "counts": found}, "\n".join(lines))
    return 0


def _before() -> dict | None:
    """The issue-30 probes' counts on the code before it, if `--code` has recorded them."""
    from bench.common import RESULTS

    try:
        return json.loads((RESULTS / f"{BEFORE_STEM}.json").read_text())
    except (OSError, ValueError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--code", type=Path, help="run only issue 30's probes, with the gpu_tigrag of this checkout "
                                                  "(the code before a change), into reliability_issue30_before.*")
    args = parser.parse_args()
    if args.code is not None:
        return probes_on(args.code)
    disk = full_disk()
    read_only = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            scratch_files(folder)
            issue23_scratch(folder)
            issue30_scratch(folder)
            read_only = read_only_cache(folder)
            results = []
            for probe in probes(disk) + issue23_probes(disk, read_only) + issue30_probes():
                results.append(probe.run(folder))
                print(f"{probe.name}: {results[-1]['class']}{'' if results[-1]['passed'] else ' (UNEXPECTED)'}",
                      file=sys.stderr)
    finally:
        unmount(disk)
        unmount(read_only)
    suite = run_suite()
    write_results("reliability", {"probes": results, "suite": suite, "full_disk": disk is not None,
                                  "read_only": read_only is not None, "issue23_before": ISSUE23_BEFORE,
                                  "issue23_after": counts([r for r in results if r["issue"] == 23]),
                                  "issue30_before": ISSUE30_BEFORE,
                                  "issue30_after": counts([r for r in results if r["issue"] == 30])},
                  markdown(results, suite, disk is not None, read_only is not None))
    return 0 if all(r["passed"] for r in results) and not any(f["failed"] for f in suite["files"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
