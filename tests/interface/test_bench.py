"""The benchmark runner and its scripts, run as a user runs them: `python -m bench ...` and `python bench/X.py`
in a subprocess (this module imports nothing of bench/). The registry names every script, every study is a
decision record whose result file exists, every script compiles and starts (`--help`), and the smoke run of
every registered benchmark that has one passes: here for those that need no ../shared/data, as `data` and
`slow` tests for those that do. The GPU check's smoke run (which includes gpu_workers') has its own module,
tests/interface/test_gpu_check_smoke.py."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import ROOT, SHARED_DATA

BENCH = ROOT / "bench"
#: helper modules of the runner, not benchmarks (paths under bench/)
NOT_SCRIPTS = {"__init__.py", "__main__.py", "common.py", "studies/__init__.py", "studies/agreement.py", "studies/lift_study.py",
               "checks/__init__.py", "checks/reliability_probes.py", "checks/reliability_issue30.py"}
#: shell wrappers that run a registered script on a GPU machine (they install wheels first)
DEVICE_WRAPPERS = {"checks/gpu_check.sh": "checks/gpu_check.py", "gpu_workers.sh": "gpu_workers.py"}
#: where each kind's scripts live: the recurring ones at bench/, the frozen studies and the checks in their folders
KIND_FOLDERS = {"study": "studies", "check": "checks"}


def bench_files(pattern: str) -> list:
    """bench/'s scripts and those of its kind folders, as paths."""
    return sorted([*BENCH.glob(pattern), *BENCH.glob(f"studies/{pattern}"), *BENCH.glob(f"checks/{pattern}")])
#: smoke runs checked in detail elsewhere
SMOKED_ELSEWHERE = {"gpu_check": "tests/interface/test_gpu_check_smoke.py",
                    "gpu_workers": "tests/interface/test_gpu_check_smoke.py (the GPU check's workers section)"}


def bench_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def _registry() -> list[dict]:
    proc = bench_cli("list", "--json")
    return json.loads(proc.stdout) if proc.returncode == 0 else []


REGISTRY = _registry()
SMOKE_RUNS = [pytest.param(b["name"], id=b["name"], marks=[pytest.mark.data, pytest.mark.slow] if b["data"] else [])
              for b in REGISTRY if b["smoke"] is not None and b["name"] not in SMOKED_ELSEWHERE]


def test_the_registry_lists_every_script_once_with_a_kind():
    assert REGISTRY, f"`python -m bench list --json` failed:\n{bench_cli('list', '--json').stderr[-3000:]}"
    kinds = {"benchmark", "quality", "check", "study", "tool"}
    assert all(b["kind"] in kinds and b["description"] and "\n" not in b["description"] for b in REGISTRY)
    names = [b["name"] for b in REGISTRY]
    assert len(names) == len(set(names))
    registered = {b["script"].removeprefix("bench/") for b in REGISTRY}
    scripts = {p.relative_to(BENCH).as_posix() for p in bench_files("*.py") + bench_files("*.sh")} - NOT_SCRIPTS
    assert registered <= scripts, f"registered scripts that do not exist: {registered - scripts}"
    assert scripts - registered == set(DEVICE_WRAPPERS), f"scripts missing from the registry: {scripts - registered}"
    listing = bench_cli("list")
    assert listing.returncode == 0 and all(name in listing.stdout for name in names)
    assert "decision:" in listing.stdout
    # bench/ by kind: a check's script in checks/, a study's in studies/ (a study that is a mode of a recurring
    # script, e.g. `spectrag.py --best`, stays with it)
    recurring = {b["script"] for b in REGISTRY if b["kind"] not in KIND_FOLDERS}
    misplaced = [b["name"] for b in REGISTRY if b["kind"] in KIND_FOLDERS and b["script"] not in recurring
                 and not b["script"].startswith(f"bench/{KIND_FOLDERS[b['kind']]}/")]
    assert misplaced == []


def test_studies_are_frozen_decision_records_with_their_result_files():
    studies = [b for b in REGISTRY if b["kind"] == "study"]
    assert {"sweep", "ppr_tolerance", "ner_equivalence", "link_bonus", "litesemrag_sweep"} <= {b["name"] for b in studies}
    for study in studies:
        assert study["decision"] and study["results"], study["name"]
        for result in study["results"]:
            assert (BENCH / "results" / result).exists(), f"{study['name']}: bench/results/{result} is missing"


def test_unknown_names_and_missing_smoke_modes_are_one_line_errors():
    unknown = bench_cli("run", "no_such_benchmark")
    assert unknown.returncode == 2 and "unknown benchmark" in unknown.stderr and "Traceback" not in unknown.stderr
    no_smoke = bench_cli("smoke", "quality")
    assert no_smoke.returncode == 2 and "no smoke mode" in no_smoke.stderr


def test_every_script_compiles():
    for path in bench_files("*.py"):
        compile(path.read_text(), str(path), "exec")  # a SyntaxError names the file
    for path in bench_files("*.sh"):
        proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{path.name}: {proc.stderr}"


def test_every_script_starts():
    """`python bench/X.py --help` imports the script and everything it imports at the top (an import moved by a
    restructuring fails here; as a file it must also find the `bench` package). The runner starts the same
    modules as `python -m bench.X` (the smoke runs here and in test_gpu_check_smoke.py go through it), and
    passes a study's fixed arguments before the user's."""
    commands = [[sys.executable, "-m", "bench", "run", "litesemrag_sweep", "--help"]]
    for script in sorted({b["script"] for b in REGISTRY if b["script"].endswith(".py")}):
        commands.append([sys.executable, script, "--help"])

    def start(command):
        return command, subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)

    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [(" ".join(c[1:]), p.stderr[-1500:]) for c, p in pool.map(start, commands)
                  if p.returncode != 0 or "usage:" not in p.stdout]
    assert not failed, "\n\n".join(f"{command}:\n{stderr}" for command, stderr in failed)


@pytest.mark.parametrize("name", SMOKE_RUNS)
def test_smoke_run(name, tmp_path):
    entry = next(b for b in REGISTRY if b["name"] == name)
    if entry["data"] and not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: {name}'s smoke run reads ../shared/data")
    results = sorted(p.stat().st_mtime_ns for p in (BENCH / "results").rglob("*") if p.is_file())
    proc = bench_cli("smoke", name, "--tmp", str(tmp_path), timeout=1800)
    assert proc.returncode == 0, f"{name}'s smoke run failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert sorted(p.stat().st_mtime_ns for p in (BENCH / "results").rglob("*") if p.is_file()) == results, \
        "a smoke run must not write bench/results"
