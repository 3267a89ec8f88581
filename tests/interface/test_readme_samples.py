"""The README's console samples are what the commands print now: each `$ command` of its ```console
blocks runs, in order, in a fresh folder beside the bundled examples (the default encoder and NER, as a
reader would run them), and its output must equal the sample line for line. Figures that are times
(seconds, queries/s) and the folder the index was written to vary from run to run: in lines that carry
them, numbers and that path are compared as placeholders. Elsewhere the text must be equal and every
number within 0.01 of the sample (integers, such as chunk ids, exactly): the int8 encoder's vectors move in
their last digits between CPU families (ONNX Runtime picks its int8 kernels by instruction set), so a
score printed to three decimals may differ by one there, while rankings, titles and metrics may not. When a change moves a sample, `python tests/interface/test_readme_samples.py --write` rewrites the
samples' outputs in README.md from the commands (review the diff)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: lines whose figures are measurements of time (or that name the run's folder): numbers are placeholders there
TIMED = re.compile(r"build seconds|queries in|q/s|written to|without the encoder")
NUMBER = re.compile(r"\d[\d,]*(\.\d+)?")


def console_samples(text: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every `$ ` line of the README's ```console blocks, in order."""
    samples: list[tuple[str, list[str]]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```console"
            continue
        if not inside:
            continue
        if line.startswith("$ "):
            samples.append((line[2:], []))
        elif samples:
            samples[-1][1].append(line)
    return samples


#: how far a printed score or metric may be from the README's (module doc)
TOLERANCE = 0.01


def normalised(line: str, folder: Path) -> str:
    line = line.replace(str(folder), "FOLDER").rstrip()
    if TIMED.search(line):
        line = re.sub(r"\S*/my-index", "FOLDER/my-index", line)
        line = NUMBER.sub("#", line)
    return line


def same_line(got: str, expected: str) -> bool:
    """Equal text, and equal numbers: integers exactly, others within TOLERANCE."""
    if NUMBER.sub("#", got) != NUMBER.sub("#", expected):
        return False
    for a, b in zip(NUMBER.finditer(got), NUMBER.finditer(expected)):
        x, y = a.group().replace(",", ""), b.group().replace(",", "")
        if ("." in x or "." in y) and abs(float(x) - float(y)) <= TOLERANCE:
            continue
        if x != y:
            return False
    return True


def run(command: str, folder: Path) -> list[str]:
    """The command's output and messages in the order a terminal shows them (one unbuffered stream;
    progress bars off, as they leave no line in a terminal either)."""
    argv = shlex.split(command)
    if argv[0] == "tigrag":
        argv = [sys.executable, "-m", "gpu_tigrag.cli", *argv[1:]]
    env = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-2000:]}"
    return done.stdout.splitlines()


def outputs(folder: Path) -> list[tuple[str, list[str], list[str]]]:
    (folder / "examples").symlink_to(ROOT / "examples")
    return [(command, expected, run(command, folder)) for command, expected in console_samples(README.read_text())]


@pytest.mark.slow  # builds the example index with the default encoder and spaCy
def test_the_readme_console_samples_are_current(tmp_path):
    for command, expected, got in outputs(tmp_path):
        now, then = [normalised(line, tmp_path) for line in got], [normalised(line, tmp_path) for line in expected]
        assert len(now) == len(then) and all(same_line(a, b) for a, b in zip(now, then)), \
            f"README sample `$ {command}` is stale; its output now:\n" + "\n".join(got)


def test_a_stale_sample_is_caught():
    """The comparison itself: a moved ranking, a changed metric or a new line fail; a time or a score's
    last digit does not."""
    assert same_line("1. [1.080] The Glass Orchard (chunk 0)", "1. [1.082] The Glass Orchard (chunk 0)")
    assert not same_line("1. [1.080] Mirela Vantz (chunk 1)", "1. [1.080] The Glass Orchard (chunk 0)")
    assert not same_line("recall@2: 0.9000", "recall@2: 0.9333")
    assert not same_line('"chunk_ids": [0, 1, 18, 4, 29]', '"chunk_ids": [0, 1, 18, 29, 4]')
    folder = Path("/tmp/x")
    assert normalised("15 queries in 0.23 s end to end: 66.0 q/s", folder) == \
        normalised("15 queries in 3.49 s end to end: 4.3 q/s", folder)


def rewrite_readme() -> None:
    """Replace each console sample's output in README.md by what its command prints now (a developer's
    tool for a change that moves the samples; the folder of the run reads /tmp/guide)."""
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        fresh = iter(outputs(Path(scratch)))
        lines, out, inside, skipping = README.read_text().splitlines(), [], False, False
        for line in lines:
            if line.startswith("```"):
                inside, skipping = line.strip() == "```console", False
            elif inside and line.startswith("$ "):
                command, _, got = next(fresh)
                assert command == line[2:]
                out += [line, *(g.replace(scratch, "/tmp/guide") for g in got)]
                skipping = True
                continue
            if not skipping or line.startswith("```"):
                out.append(line)
        README.write_text("\n".join(out) + "\n")


if __name__ == "__main__" and "--write" in sys.argv:
    rewrite_readme()
