"""The probes of issue 23 for bench/checks/reliability.py: every case the issue lists, as a user (or a
Python caller) would try it, each run in a fresh process on scratch files made here.

A probe's `check` looks at what the command left (files, output) and returns "" when that is right,
else "silent wrong: …" or "data loss: …"; `bench/checks/reliability.py` classifies each probe from its exit
code, standard error and this check ("security: …" for a device or file outside replaced or exposed). Readers racing writers and planted symbolic links need process
choreography: they are the tests named in CHECKED_BY_TESTS, which the reliability suite runs.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

#: the classes of a probe's outcome, the issue's
CLASSES = ("clear error", "correct", "traceback or confusing", "silent wrong", "data loss", "security")
#: runs the Python code of an API probe (argv[1]) as a caller would; a TigragError ends it as the CLI's do
API_RUNNER = """import sys
from gpu_tigrag import TigragError
try:
    exec(sys.argv[1])
except TigragError as exc:
    print(f"tigrag: error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)
"""

#: the issue's cases checked by tests rather than scripted probes (concurrency, symbolic links, and what
#: root cannot reproduce here), with the test that checks each
CHECKED_BY_TESTS = {
    "a planted lock link is refused, nothing outside touched": [
        "tests/reliability/test_reliability_writers.py::test_the_cli_refuses_a_planted_lock_link"],
    "nothing follows a link planted at any path the engine writes": ["tests/reliability/test_reliability_links.py"],
    "readers (CLI and API) in loops during add, extend and a stream build: every load old or new": [
        "tests/reliability/test_reliability_readers.py::test_readers_in_loops_never_see_a_write"],
    "readers never see a write (generations)": [
        "tests/index/test_generations.py::test_readers_in_threads_never_see_a_save",
        "tests/index/test_generations.py::test_a_reader_keeps_its_generation_stages_read_later_included"],
    "no generation folder or dangling link is written through": [
        "tests/index/test_generations.py::test_a_generation_folder_or_a_dangling_link_is_never_written"],
    "a damaged stage fails only its method; extend repairs it": [
        "tests/reliability/test_reliability_stages.py::test_a_damaged_stage_fails_only_its_method_and_extend_repairs_it"],
    "two dask workers give exactly the local results": [
        "tests/interface/test_batch_run.py::test_two_dask_workers_give_exactly_the_local_results"],
    "numba gets a private cache where neither install nor home is writable (root writes anywhere)": [
        "tests/unit/test_kernels.py::test_numba_gets_a_private_cache_where_it_could_write_none"],
    "a read-only vector cache is read without adding to it (root writes anywhere)": [
        "tests/unit/test_encoders.py::test_a_cache_that_cannot_be_written_or_opened_never_stops_the_work"],
    "a short write reported by numpy reads as a full disk": ["tests/reliability/test_reliability_disk.py"],
}

#: a checkout whose gpu_tigrag the probes run instead of this one's (`bench/checks/reliability.py --code DIR`: the same
#: probes on the code before a change)
PROBED_CODE = "TIGRAG_PROBED_CODE"


def probed_code() -> Path:
    """The checkout whose package the probes' processes import: $TIGRAG_PROBED_CODE, else this one."""
    from bench.common import ROOT

    return Path(os.environ.get(PROBED_CODE) or ROOT)


@dataclass
class Probe:
    """One try: `tigrag ARGS` (or a bash line `shell` where `tigrag` is this checkout's CLI, or Python
    code `api`), in a fresh process in the scratch folder. `expect`: "error" (one `tigrag: error:`
    line, exit 2-4, nothing left at `output`), "ok", "warn:TEXT" (exit 0 and TEXT on stderr) or
    "exit:N"; `check` inspects what it left ("" when right)."""

    name: str
    args: list[str] = field(default_factory=list)
    expect: str = "ok"
    output: str = ""
    issue: int = 11
    shell: str = ""
    api: str = ""
    check: Callable[[Path, "subprocess.CompletedProcess[str]"], str] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def command(self) -> tuple[list[str], str]:
        """(argv, the command as the report shows it)."""
        if self.api:
            return [sys.executable, "-c", API_RUNNER, API_PRELUDE + self.api], "python: " + self.api.replace("\n", "; ")
        if self.shell:
            cli = f'tigrag() {{ "{sys.executable}" -m gpu_tigrag.cli "$@"; }}; '
            return ["bash", "-c", cli + self.shell], self.shell
        return [sys.executable, "-m", "gpu_tigrag.cli", *self.args], "tigrag " + " ".join(self.args)

    def run(self, folder: Path) -> dict:
        argv, shown = self.command()
        shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")  # a probe's lone surrogate, as \\udcff
        done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(probed_code()), **self.env}, errors="replace")
        lines = [line for line in done.stderr.splitlines() if line.strip() and "%|" not in line]
        left = bool(self.output) and (folder / self.output).exists()
        try:
            verdict = self.check(folder, done) if self.check else ""
        except Exception as exc:  # noqa: BLE001 - what the command left cannot be read: its result is wrong
            verdict = f"silent wrong: its result cannot be read ({type(exc).__name__}: {exc})"
        outcome = classify(self.expect, done, lines, left, verdict)
        expected = "clear error" if self.expect == "error" else "correct"
        error = next((line for line in lines if line.startswith("tigrag: error:")), lines[0] if lines else "")
        return {"probe": self.name, "issue": self.issue, "command": shown[:300], "expect": self.expect,
                "exit": done.returncode, "traceback": "Traceback (most recent call last)" in done.stderr,
                "stderr": error[:240], "left_output": left, "verdict": verdict, "class": outcome,
                "passed": outcome == expected}


def classify(expect: str, done: "subprocess.CompletedProcess[str]", lines: list[str], left: bool, verdict: str) -> str:
    """The class of a probe's outcome (CLASSES): a lost or damaged file first, then a traceback (or
    an exit code that says nothing), then a wrong result the check found, then the expected kind."""
    if verdict.startswith("security"):
        return "security"
    if verdict.startswith("data loss"):
        return "data loss"
    if "Traceback (most recent call last)" in done.stderr or done.returncode == 1:
        return "traceback or confusing"
    if verdict:
        return "silent wrong"
    one_line = any(line.startswith("tigrag: error:") for line in lines)
    if expect == "error":
        if done.returncode == 0:
            return "silent wrong"
        return "clear error" if done.returncode in (2, 3, 4) and one_line and not left else "traceback or confusing"
    if expect.startswith("exit:"):
        return "correct" if done.returncode == int(expect[5:]) and not done.stderr.strip() else "traceback or confusing"
    if done.returncode != 0:
        return "clear error" if one_line else "traceback or confusing"
    if expect.startswith("warn:") and expect[5:] not in done.stderr:
        return "silent wrong"
    return "correct"


FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega").split()
#: Python code every API probe starts with
API_PRELUDE = ("import gpu_tigrag as g\nfrom gpu_tigrag import Passage, RetrievalConfig, Retriever, build_index, "
               "load_index, make_retriever, preset\nidx = load_index('idx')\n")


def _tigrag(folder: Path, *args: str) -> None:
    import sys

    subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *args, "-q"], cwd=folder, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(probed_code())})


def _passages(count: int, sentences: int, seed: int = 0) -> list[dict]:
    """Passages of Greek-letter words: several chunks each, linked within a passage only (a chunk
    graph of several components)."""
    rng = np.random.default_rng(seed)
    return [{"title": f"Doc {seed}-{p}", "text": " ".join(" ".join(rng.choice(WORDS, 8)) + "." for _ in range(sentences))}
            for p in range(count)]


def _generation(index: Path) -> Path:
    from gpu_tigrag.index.store import generation_folder

    return generation_folder(index)


def _replace_file(index: Path, name: str, data: bytes, resign: bool) -> None:
    """Write `data` as file `name` of the current generation (a new file, never through a link that
    another generation shares); with `resign`, its manifest entry is updated to match."""
    from gpu_tigrag.checksums import sha256_file

    folder = _generation(index)
    target = folder / name
    target.unlink()
    target.write_bytes(data)
    if resign:
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["files"][name] = {"sha256": sha256_file(target), "bytes": target.stat().st_size}
        (folder / "manifest.json").write_text(json.dumps(manifest))


def _with_nan(index: Path, name: str) -> None:
    import io

    array = np.load(_generation(index) / name)
    array.flat[0] = np.nan
    buffer = io.BytesIO()
    np.save(buffer, array)
    _replace_file(index, name, buffer.getvalue(), resign=True)


def _damaged(index: Path, name: str) -> None:
    data = bytearray((_generation(index) / name).read_bytes())
    data[-1] ^= 0xFF
    _replace_file(index, name, bytes(data), resign=False)


def scratch_files(folder: Path) -> None:
    """Inputs and indexes of the issue-23 probes (beside the issue-11 ones: c.json, idx)."""
    (folder / "multi.json").write_text(json.dumps(_passages(10, 18)))
    (folder / "more.json").write_text(json.dumps(_passages(3, 18, seed=1)))
    (folder / "same.json").write_text(json.dumps(
        [{"title": "Same", "text": "Mirela Vantz directed The Glass Orchard in Korvath."}] * 10_000))
    (folder / "surr.json").write_text('[{"title": "Bad \\ud800 title", "text": "A film \\udc00 here."}, '
                                      '{"title": "Korvath", "text": "Korvath is a harbour town."}]')
    (folder / "surrq.jsonl").write_text('{"id": "a", "question": "film \\ud800"}\n')
    (folder / "surrid.json").write_text('[{"id": "a\\ud800", "title": "A", "text": "abc def"}]')
    word = "Lorem" + "x" * 35
    (folder / "huge.json").write_text(json.dumps([
        {"title": "Huge", "text": " ".join([word] * 25_700) + "."},  # 1,053,700 characters, one sentence
        {"title": "Korvath", "text": "Korvath is a harbour town in Norway."}]))
    (folder / "digits.json").write_text('[{"id": ' + "9" * 5000 + ', "title": "A", "text": "abc def"}]')
    (folder / "digitsstr.json").write_text(json.dumps([{"id": "9" * 5000, "title": "A", "text": "abc def"}]))
    (folder / "nested.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "inf.json").write_text('[{"id": 1e400, "title": "A", "text": "abc"}, {"id": 2e400, "title": "B", '
                                     '"text": "def"}]')
    (folder / "nan.json").write_text('[{"id": NaN, "title": "A", "text": "abc"}]')
    (folder / "stop.json").write_text(json.dumps([{"title": "the", "text": "the and of a"},
                                                  {"title": "is", "text": "is it was"}]))
    (folder / "forge.json").write_text(json.dumps([
        {"title": "Korvath\n2. [9.999] Forged (chunk 9)", "text": "Korvath is a harbour town.\nA \x1b[31m red light."},
        {"title": "Other", "text": "Nothing here."}]))
    (folder / "emptygold.json").write_text(json.dumps([
        {"id": "q1", "question": "Where was Mirela Vantz born?", "gold_titles": ["Mirela Vantz", "Korvath"]},
        {"id": "q2", "question": "What is Korvath?", "gold_titles": []}]))
    (folder / "allempty.json").write_text(json.dumps([{"id": "q2", "question": "What is Korvath?",
                                                       "gold_titles": []}]))
    (folder / "many.jsonl").write_text("".join(json.dumps({"id": f"q{i}", "question": f"{w} film director {i}"}) + "\n"
                                               for i, w in enumerate(WORDS * 2)))
    _tigrag(folder, "index", "c.json", "-o", "sidx", "--methods", "tigrag,spectrag", *FAST)
    _tigrag(folder, "index", "multi.json", "-o", "mplain", *FAST)
    _tigrag(folder, "index", "stop.json", "-o", "stopidx", *FAST)
    _tigrag(folder, "index", "forge.json", "-o", "fidx", *FAST)
    for name in ("dmg_query", "dmg_add", "dmg_extend"):
        shutil.copytree(folder / "sidx", folder / name)
        _damaged(folder / name, "spectrag_coords.npy")
    shutil.copytree(folder / "idx", folder / "nanidx")
    _with_nan(folder / "nanidx", "embeddings.npy")
    shutil.copytree(folder / "sidx", folder / "nanstage")
    _with_nan(folder / "nanstage", "spectrag_coords.npy")
    (folder / "afile").touch()


# --- checks of what a probe left --------------------------------------------------------------------------

Check = Callable[[Path, "subprocess.CompletedProcess[str]"], str]


def said(text: str, stream: str = "stdout") -> Check:
    """The command must have said `text` (else the result it gave is a silent one)."""
    def check(folder: Path, done: subprocess.CompletedProcess) -> str:
        return "" if text in getattr(done, stream) else f"silent wrong: {stream} lacks {text!r}"
    return check


def stage_stat(index: str, key: str, expected: Callable[[object], bool], what: str) -> Check:
    def check(folder: Path, done: subprocess.CompletedProcess) -> str:
        from gpu_tigrag.index.store import load_index

        stats = load_index(folder / index).stage("spectrag").stats
        value = stats.get(key) if key != "entity_edges" else stats["signals"]["entity"]["edges"]
        return "" if expected(value) else f"silent wrong: {what} ({key} = {value!r})"
    return check


def no_forged_lines(folder: Path, done: subprocess.CompletedProcess) -> str:
    lines = done.stdout.splitlines()
    if any(line.startswith("2. [9.999]") for line in lines) or any("\x1b" in line for line in lines):
        return "silent wrong: a title or text forged a result line or reached the terminal raw"
    return ""


def readable_by_others(index: str) -> Check:
    def check(folder: Path, done: subprocess.CompletedProcess) -> str:
        for path in [folder / index, *(folder / index).rglob("*")]:
            mode = path.stat().st_mode
            need = stat.S_IRGRP | stat.S_IROTH | ((stat.S_IXGRP | stat.S_IXOTH) if path.is_dir() else 0)
            if mode & need != need and not path.name.endswith(".lock"):
                return f"silent wrong: {path.relative_to(folder)} is {oct(mode & 0o777)} under umask 022"
        return ""
    return check


def same_rows(first: str, second: str) -> Check:
    def check(folder: Path, done: subprocess.CompletedProcess) -> str:
        a, b = ((folder / name).read_text().splitlines() for name in (first, second))
        differ = sum(x != y for x, y in zip(a, b)) + abs(len(a) - len(b))
        return f"silent wrong: {differ} of {len(a)} rows differ" if differ else ""
    return check


def no_bad_advice(folder: Path, done: subprocess.CompletedProcess) -> str:
    return "silent wrong: recommends --no-vector-cache, a flag tigrag lacks" if "--no-vector-cache" in done.stderr else ""


def full_disk_said(folder: Path, done: subprocess.CompletedProcess) -> str:
    if "requested and" in done.stderr or "no space left" not in done.stderr:
        return "silent wrong: the message does not say the disk is full"
    return ""


def all_of(*checks: Check) -> Check:
    def check(folder: Path, done: subprocess.CompletedProcess) -> str:
        return next((verdict for verdict in (c(folder, done) for c in checks) if verdict), "")
    return check


# --- the probes -------------------------------------------------------------------------------------------

def probes(small_disk: Path | None = None, read_only: Path | None = None) -> list[Probe]:
    """Every case of issue 23 that a process can try alone; `small_disk` a full tmpfs, `read_only` a
    read-only one holding a vector cache (None where this machine cannot mount them)."""
    other_model = ("from gpu_tigrag.encoders import HashingEncoder\nenc = HashingEncoder(64)\n"
                   "enc.fingerprint = 'sha256:another-model'\n")
    rows = [
        # silent wrong results
        Probe("--allow-mixed-encoder with another model", expect="error", api=other_model +
              "Retriever(idx, preset('paper'), encoder=enc, backend='numpy', allow_mixed_encoder=True)"),
        Probe("--allow-mixed-encoder with another dimension", expect="error",
              api="from gpu_tigrag.encoders import HashingEncoder\nenc = HashingEncoder(128)\n"
                  "enc.fingerprint = idx.encoder_fingerprint\nenc.backend = idx.encoder_backend\n"
                  "Retriever(idx, preset('paper'), encoder=enc, backend='numpy', allow_mixed_encoder=True)"),
        Probe("a re-signed base array holding NaN", ["query", "nanidx", "film"], "error"),
        Probe("a re-signed stage array holding NaN", ["query", "nanstage", "film", "--method", "spectrag"], "error"),
        Probe("spectrag.dimensions above the chunk count",
              ["index", "c.json", "-o", "dimidx", "--methods", "tigrag,spectrag", "--set", "spectrag.dimensions=8", *FAST],
              check=said("3 chunks give 2 of the 8 spectral dimensions")),
        Probe("SpectRAG's default on examples/ (30 chunks)",
              ["index", str(Path(__file__).resolve().parents[2] / "examples" / "corpus.json"), "-o", "exidx",
               "--methods", "tigrag,spectrag", *FAST], check=said("30 chunks give 29 of the 32 spectral dimensions")),
        Probe("litesemrag.level_weights=1e308", ["query", "idx", "film", "--method", "litesemrag", "--set",
                                                 "litesemrag.level_weights=1e308,1,1,1"], "error"),
        Probe("gold_titles: [] in an eval file", ["eval", "idx", "emptygold.json", "-q"],
              "warn:1 of the 2 queries have no gold passage"),
        Probe("every gold list empty", ["eval", "idx", "allempty.json", "-q"], "error"),
        Probe("corpus ids 1e400 and 2e400", ["index", "inf.json", "-o", "infidx", *FAST], "error", "infidx"),
        Probe("corpus id NaN", ["index", "nan.json", "-o", "nanid", *FAST], "error", "nanid"),
        Probe("API: an empty query", expect="error", api="make_retriever(idx).retrieve(['  '])"),
        Probe("API: build_index([])", expect="error", api="build_index([])"),
        Probe("--set litesemrag.* on extend --methods spectrag",
              ["extend", "idx", "--methods", "spectrag", "--set", "litesemrag.min_occurrences=3"], "error"),
        Probe("--set spectrag.* on a TIGRAG query", ["query", "idx", "film", "--set", "spectrag.alpha=0.3"], "error"),
        Probe("--set spectrag.* on index without --methods spectrag",
              ["index", "c.json", "-o", "setidx", "--set", "spectrag.dimensions=4", *FAST],
              "warn:the setting is stored in the index"),
        # tracebacks and wrong advice
        Probe("a damaged SpectRAG stage: TIGRAG query", ["query", "dmg_query", "film", "-k", "1"]),
        Probe("a damaged SpectRAG stage: SpectRAG query", ["query", "dmg_query", "film", "--method", "spectrag"],
              "error"),
        Probe("a damaged SpectRAG stage: add", ["add", "dmg_add", "more.json"]),
        Probe("a damaged SpectRAG stage: extend rebuilds it", ["extend", "dmg_extend", "--methods", "spectrag"],
              check=stage_stat("dmg_extend", "chunks", lambda n: n == 3, "the stage was not rebuilt")),
        Probe("SpectRAG index, 50 chunks in 10 components",
              ["index", "multi.json", "-o", "m1", "--methods", "tigrag,spectrag", *FAST],
              check=stage_stat("m1", "eigensolver", lambda s: str(s).endswith("dense"), "not the dense solve")),
        Probe("SpectRAG extend, 50 chunks in 10 components", ["extend", "mplain", "--methods", "spectrag"]),
        Probe("SpectRAG add to 50 chunks in 10 components", ["add", "m1", "more.json"],
              check=stage_stat("m1", "chunks", lambda n: n > 50, "the stage was not grown")),
        Probe("SpectRAG on 10,000 copies of one passage",
              ["index", "same.json", "-o", "sameidx", "--methods", "tigrag,spectrag", *FAST],
              "warn:9999 of 10000 passages repeat",
              check=stage_stat("sameidx", "entity_edges", lambda e: e == 0, "the entity held by every chunk linked them")),
        Probe("... every entity kept, over the pair budget",
              ["index", "same.json", "-o", "sameidx2", "--methods", "tigrag,spectrag", "--set",
               "spectrag.entity_max_share=1", *FAST], "error", "sameidx2"),
        Probe("a vector cache path that is a file", ["query", "idx", "film", "-k", "1", "--vector-cache", "afile"],
              "warn:going on without it", check=no_bad_advice),
        Probe("a lone surrogate in a corpus", ["index", "surr.json", "-o", "surridx", *FAST],
              "warn:lone surrogate", check=said("index written", "stdout")),
        Probe("a lone surrogate in a query file", ["run", "idx", "surrq.jsonl", "-o", "surr_out.jsonl"],
              "warn:lone surrogate"),
        Probe("a non-UTF-8 byte in a CLI question", ["query", "idx", "film \udcff", "-k", "1"], "warn:lone surrogate"),
        Probe("a lone surrogate in an id", ["index", "surrid.json", "-o", "surrid", *FAST], "error", "surrid"),
        Probe("a passage of 1,053,700 characters (spaCy's NER)",
              ["index", "huge.json", "-o", "hugeidx", "--set", "encoder.model=hashing:64"]),
        Probe("a 5,000-digit numeric id", ["index", "digits.json", "-o", "didx", *FAST], "error", "didx"),
        Probe("a 5,000-character string id", ["index", "digitsstr.json", "-o", "didx2", *FAST], "error", "didx2"),
        Probe("JSON nested 100,000 deep", ["index", "nested.json", "-o", "nestidx", *FAST], "error", "nestidx"),
        Probe("a stopword-only index, the default preset", ["query", "stopidx", "the", "-k", "2"]),
        Probe("API: k=10**12", api="r = make_retriever(idx).retrieve(['film'], k=10**12)\n"
                                   "assert len(r[0].chunk_ids) <= idx.n_chunks"),
        Probe("API: make_retriever(index, 'tigrag')", expect="error", api="make_retriever(idx, 'tigrag')"),
        Probe("API: Retriever('idx') (a path)", expect="error", api="Retriever('idx')"),
        Probe("API: build_index('c.json') (a path)", expect="error", api="build_index('c.json')"),
        Probe("API: retrieve('a question') (a string: one question, a list of one result)",
              api="r = make_retriever(idx)\none, listed = r.retrieve('film'), r.retrieve(['film'])\n"
                  "assert len(one) == 1 and list(one[0].chunk_ids) == list(listed[0].chunk_ids)"),
        Probe("query ... | head -1 (a closed stdout)", expect="exit:141",
              shell="tigrag query idx " + " ".join(f"film{i}" for i in range(300)) + " --json -q | head -1 "
                    ">/dev/null; exit ${PIPESTATUS[0]}"),
        Probe("eval ... | head -1", shell="tigrag eval idx gold.json -q | head -1 >/dev/null; "
                                          "rc=${PIPESTATUS[0]}; [ $rc = 0 ] || [ $rc = 141 ]"),
        Probe("umask 022: a colleague reads the index", shell=f"umask 022; tigrag index c.json -o umidx {' '.join(FAST)} -q",
              check=readable_by_others("umidx")),
        Probe("a title with a newline and an escape", ["query", "fidx", "harbour town", "-k", "2"],
              check=no_forged_lines),
        Probe("run --workers 2 = one process", shell="tigrag run idx many.jsonl -o w0.jsonl -q && "
                                                   "tigrag run idx many.jsonl -o w2.jsonl --workers 2 -q",
              check=same_rows("w0.jsonl", "w2.jsonl")),
    ]
    if small_disk is not None:
        rows.append(Probe("a vector cache on a full disk", ["query", "idx", "film", "-k", "1", "--vector-cache",
                                                           str(small_disk / "vc")], "warn:going on without it",
                          check=no_bad_advice))
        rows.append(Probe("index onto a full disk: the message", ["index", "c.json", "-o", str(small_disk / "idx2"),
                                                                  *FAST], "error", check=full_disk_said))
    if read_only is not None:
        rows.append(Probe("a read-only vector cache", ["query", "idx", "film", "-k", "1", "--vector-cache",
                                                      str(read_only / "vc")], "warn:reading it without adding to it",
                          check=no_bad_advice))
        rows.append(Probe("a vector cache in a read-only folder", ["query", "idx", "film", "-k", "1", "--vector-cache",
                                                                  str(read_only / "new")], check=no_bad_advice))
    for row in rows:
        row.issue = 23
    return rows
