"""The probes of issue 30 for bench/checks/reliability.py: a careless user and an attacker trying to make the engine
delete, overwrite, leak or lie — every writer (index, add, extend, run, trec, eval --out/--save-runs/--save-qrels,
report --out, datasets fetch, the vector cache) and every loader (edited arrays with matching checksums, crafted
headers and manifests), extreme settings and colliding ids. Each runs in a fresh process in the scratch folder;
its check looks at what the command left and says "data loss: …", "security: …" or "silent wrong: …" when
that is not right.

What needs process choreography (a run still being written, in-place edits of old generations across
commands) is checked by the tests named in CHECKED_BY_TESTS.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np

from bench.checks.reliability_probes import FAST, Probe, _generation, _replace_file, _tigrag

#: the filing session's counts over its own 204 probes (issue 30's text), before this round's changes
ISSUE30_BEFORE = {"clear error": 85, "correct": 82, "traceback or confusing": 16, "silent wrong": 9,
                  "data loss": 11, "security": 1}

CHECKED_BY_TESTS = {
    "trec refuses a run still being written (its writer lock held), --partial marks it":
        ["tests/index/test_outputs.py::test_trec_refuses_a_run_still_being_written"],
    "a FIFO, device, folder or link at a TREC output is never replaced, even with --force":
        ["tests/index/test_outputs.py::test_trec_never_replaces_a_non_regular_file_even_with_force"],
    "a flat index's conversion removes only the files its manifest lists":
        ["tests/index/test_outputs.py::test_converting_a_flat_index_removes_only_its_listed_files"],
    "the vector cache never deletes or writes a file it did not make":
        ["tests/index/test_outputs.py::test_the_vector_cache_never_deletes_or_writes_a_file_it_did_not_make"],
}

USER_FILES = ("data.npy", "table.parquet", ".notes.tmp-1", ".x.old-2", "gen-000001/keep.txt", "corpus.json")


def _user_folder(folder: Path, name: str, manifest: str | None) -> None:
    """A folder of a user's files (what `index -o` deleted), with `manifest` as its manifest.json."""
    user = folder / name
    (user / "gen-000001").mkdir(parents=True)
    for file in USER_FILES:
        (user / file).write_text("mine")
    shutil.copy(folder / "c.json", user / "corpus.json")
    if manifest is not None:
        (user / "manifest.json").write_text(manifest)


def _rewrite_array(index: Path, name: str, change) -> None:
    """Edit array `name` of the index's current generation with `change(array) -> array` and re-sign it."""
    array = np.load(_generation(index) / name)
    buffer = io.BytesIO()
    np.save(buffer, change(array))
    _replace_file(index, name, buffer.getvalue(), resign=True)


def _negated(a):
    return -np.abs(a) - 1


def _not_unit(a):
    a = a.copy()
    a[0] *= 3
    return a


def _out_of_range(a):
    a = a.copy()
    a[0] = 10_000_000
    return a


def _not_monotone(a):
    a = a.copy()
    a[1], a[2] = a[2] + 5, a[1]
    return a


def _header_shape(index: Path, name: str) -> None:
    """An npy header that claims a 931 TiB array (the data stays as it was), re-signed."""
    folder = _generation(index)
    data = (folder / name).read_bytes()
    array = np.load(folder / name)
    header = {"descr": array.dtype.str, "fortran_order": False, "shape": (1 << 47,)}
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, header)
    offset = len(data) - array.nbytes
    _replace_file(index, name, buffer.getvalue() + data[offset:], resign=True)


def _integer_titles(index: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    count = len(pq.read_table(_generation(index) / "passages_title.parquet"))
    pq.write_table(pa.table({"title": pa.array(list(range(count)), type=pa.int64())}), buffer)
    _replace_file(index, "passages_title.parquet", buffer.getvalue(), resign=True)


def _pointer(index: Path, generation: str) -> None:
    pointer = index / "manifest.json"
    value = json.loads(pointer.read_text())
    value["generation"] = generation
    pointer.write_text(json.dumps(value))


def _crafted_stage_names(index: Path) -> None:
    """A stage that lists files outside the generation's folder, with manifest entries for them."""
    manifest_file = _generation(index) / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["methods"]["spectrag"]["files"] += ["../../victim.npy", "../../../outside.txt"]
    manifest["files"]["../../victim.npy"] = {"sha256": "0" * 64, "bytes": 4}
    manifest_file.write_text(json.dumps(manifest))


def _link_file(index: Path, name: str, outside: Path) -> None:
    """Replace file `name` of the current generation by a link to a copy outside the index, re-signed: the
    loader would read whatever the link points to."""
    from gpu_tigrag.checksums import sha256_file

    folder = _generation(index)
    shutil.copy(folder / name, outside)
    (folder / name).unlink()
    (folder / name).symlink_to(outside)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": sha256_file(outside), "bytes": outside.stat().st_size}
    (folder / "manifest.json").write_text(json.dumps(manifest))


def scratch_files(folder: Path) -> None:
    """Inputs and indexes of the issue-30 probes (beside those of issues 11 and 23: c.json, idx, sidx)."""
    for name, manifest in (("u_empty_obj", "{}"), ("u_empty_file", ""), ("u_stream", "{}"), ("u_none", None)):
        _user_folder(folder, name, manifest)
    queries = [{"id": f"q{i}", "question": q} for i, q in enumerate(
        ["Where was Mirela Vantz born?", "What is Korvath?", "Who directed The Glass Orchard?", "film", "harbour",
         "lighthouse"])]
    (folder / "q30.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "q30.json").write_text(json.dumps([{**q, "gold_titles": ["Korvath"]} for q in queries]))
    _tigrag(folder, "run", "idx", "q30.jsonl", "-o", "done.jsonl", "-k", "3")
    lines = (folder / "done.jsonl").read_bytes().splitlines(keepends=True)
    for name, data in (("killed.jsonl", b"".join(lines[:3])), ("torn.jsonl", b"".join(lines[:3]) + lines[3][:17])):
        (folder / name).write_bytes(data)
        shutil.copy(folder / "done.jsonl.meta.json", folder / f"{name}.meta.json")
    shutil.copy(folder / "done.jsonl", folder / "nometa.jsonl")  # a run without its record
    for name in ("own.jsonl", "reference.jsonl"):  # a run converted onto itself, and what it must still hold
        shutil.copy(folder / "done.jsonl", folder / name)
    shutil.copy(folder / "done.jsonl.meta.json", folder / "own.jsonl.meta.json")
    shutil.copy(folder / "q30.json", folder / "qown.json")  # a question file its qrels are written onto
    for name in ("notes_trec.txt", "notes_qrels.txt", "notes_report.txt"):  # a user's file per probe
        (folder / name).write_text("mine")
    (folder / "mine_report").mkdir()
    (folder / "mine_report" / "report.md").write_text("mine")
    (folder / "mine_runs").mkdir()
    (folder / "mine_runs" / "qrels.trec").write_text("mine")
    (folder / "dl" / "scifact").mkdir(parents=True)
    (folder / "dl" / "scifact" / "scifact.zip.part").write_text("mine")
    os.mkfifo(folder / "a.fifo")
    if os.geteuid() == 0:
        os.mknod(folder / "null.dev", stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null twin, ours to test on
    (folder / "run_sidecar.jsonl.meta.json").write_text("mine")
    (folder / "vc_foreign").mkdir()
    (folder / "vc_foreign" / "vectors.sqlite3").write_bytes(b"my bytes, not a database" * 40)
    # ids: duplicates and numbers that one parse would merge
    (folder / "dupid.json").write_text(json.dumps([{"id": "a", "title": "A", "text": "alpha beta"},
                                                   {"id": "a", "title": "B", "text": "gamma delta"}]))
    (folder / "numid.json").write_text('[{"id": 1.0, "title": "A", "text": "alpha beta"}, {"id": 1.00, "title": "B", '
                                       '"text": "gamma delta"}, {"id": 10e-1, "title": "C", "text": "epsilon"}]')
    (folder / "dupq.json").write_text(json.dumps([{"id": "q", "question": "film", "gold_titles": ["Korvath"]},
                                                  {"id": "q", "question": "town", "gold_titles": ["Korvath"]}]))
    # edited arrays, re-signed (the checksum matches: only a check by meaning finds them)
    edits = {"e_bm25": ("bm25_data.npy", _negated), "e_unit": ("embeddings.npy", _not_unit),
             "e_token": ("token_ids.npy", _out_of_range), "e_graph": ("graph_indices.npy", _out_of_range),
             "e_indptr": ("bm25_indptr.npy", _not_monotone), "e_entity": ("entity_chunk_ids.npy", _out_of_range),
             "e_add": ("graph_indices.npy", _out_of_range),
             "e_float": ("chunk_passage.npy", lambda a: a.astype(np.float64))}
    for name, (array, change) in edits.items():
        shutil.copytree(folder / "idx", folder / name)
        _rewrite_array(folder / name, array, change)
    shutil.copytree(folder / "idx", folder / "e_header")
    _header_shape(folder / "e_header", "embeddings.npy")
    shutil.copytree(folder / "idx", folder / "e_titles")
    _integer_titles(folder / "e_titles")
    shutil.copytree(folder / "idx", folder / "e_digits")
    _pointer(folder / "e_digits", "gen-" + "9" * 5000)
    shutil.copytree(folder / "idx", folder / "e_escape")
    _pointer(folder / "e_escape", "../../etc")
    shutil.copytree(folder / "idx", folder / "e_link")
    _link_file(folder / "e_link", "chunks.parquet", folder / "outside.parquet")
    shutil.copytree(folder / "sidx", folder / "e_names")
    _crafted_stage_names(folder / "e_names")
    (folder / "victim.npy").write_bytes(b"mine")
    (folder / "outside.txt").write_text("mine")
    for name in ("rewrite", "old_gen", "idx_m", "idx_g"):
        shutil.copytree(folder / "idx", folder / name)
    for file in ("notes.npy", "mine.parquet", ".notes.tmp-9"):
        (folder / "rewrite" / file).write_text("mine")


# --- checks -------------------------------------------------------------------------------------------------

def user_files_kept(name: str):
    def check(folder: Path, done) -> str:
        missing = [f for f in USER_FILES if not (folder / name / f).is_file()]
        changed = [f for f in USER_FILES if f not in missing and f != "corpus.json"
                   and (folder / name / f).read_text() != "mine"]
        if missing or changed:
            return f"data loss: {', '.join(missing + changed)} of {name}/ deleted or changed"
        return ""
    return check


def file_is(path: str, text: str | None = None, data: bytes | None = None):
    def check(folder: Path, done) -> str:
        target = folder / path
        if not target.is_file():
            return f"data loss: {path} is gone"
        if (text is not None and target.read_text(errors="replace") != text) or (
                data is not None and target.read_bytes() != data):
            return f"data loss: {path} was overwritten"
        return ""
    return check


def same_bytes_as(path: str, reference: str):
    def check(folder: Path, done) -> str:
        if (folder / path).read_bytes() != (folder / reference).read_bytes():
            return f"data loss: {path} was overwritten"
        return ""
    return check


def still_special(path: str, test):
    def check(folder: Path, done) -> str:
        mode = os.lstat(folder / path).st_mode
        return "" if test(mode) else f"security: {path} was replaced by a regular file"
    return check


def loads(index: str):
    def check(folder: Path, done) -> str:
        from gpu_tigrag.index.store import load_index

        try:
            load_index(folder / index)
        except Exception as exc:  # noqa: BLE001 - the index was damaged by the command
            return f"data loss: {index} no longer loads ({exc})"
        return ""
    return check


def exit_code(code: int):
    def check(folder: Path, done) -> str:
        return "" if done.returncode == code else f"silent wrong: exit {done.returncode}, not {code}"
    return check


def five_results(folder: Path, done) -> str:
    rows = json.loads(done.stdout)
    return "" if all(len(r["chunk_ids"]) == 5 for r in rows) else "silent wrong: fewer than -k 5 results"


def same_result_counts(first: str, second: str):
    def check(folder: Path, done) -> str:
        a, b = (json.loads((folder / name).read_text()) for name in (first, second))
        counts = [len(r["chunk_ids"]) for r in a], [len(r["chunk_ids"]) for r in b]
        return "" if counts[0] == counts[1] else f"silent wrong: {counts[1]} results instead of {counts[0]}"
    return check


def ids_are(index: str, expected: list[str]):
    def check(folder: Path, done) -> str:
        from gpu_tigrag.index.store import load_index

        ids = load_index(folder / index).passage_ids
        return "" if ids == expected else f"silent wrong: the passage ids are {ids}, not {expected}"
    return check


def record_says(path: str, key: str, value):
    def check(folder: Path, done) -> str:
        record = json.loads((folder / f"{path}.meta.json").read_text())
        return "" if record.get(key) == value else f"silent wrong: {path}'s record has {key}={record.get(key)!r}"
    return check


def no_new_generation(index: str):
    def check(folder: Path, done) -> str:
        generations = sorted(p.name for p in (folder / index).iterdir() if p.name.startswith("gen-"))
        return "" if generations == ["gen-000001"] else f"silent wrong: {index} has {generations}"
    return check


def all_of(*checks):
    def check(folder: Path, done) -> str:
        return next((v for v in (c(folder, done) for c in checks) if v), "")
    return check


def set_aside(folder: Path, done) -> str:
    kept = [p for p in (folder / "vc_foreign").iterdir() if ".damaged-" in p.name]
    if not kept or kept[0].read_bytes() != b"my bytes, not a database" * 40:
        return "data loss: the file named vectors.sqlite3 was deleted"
    return ""


#: a reader holds generation 1 while `extend` writes generation 2; then generation 1's vectors are edited in place
#: (as `np.save` or an editor would): the current generation must not change (it shared the file by a hard link)
EDIT_OLD_GENERATION = """import subprocess, sys
from gpu_tigrag.index.store import generation_folder
held = load_index('old_gen')
old = generation_folder('old_gen')
subprocess.run([sys.executable, '-m', 'gpu_tigrag.cli', 'extend', 'old_gen', '--ann', '-q'], check=True)
with open(old / 'embeddings.npy', 'r+b') as handle:
    handle.seek(-16, 2)
    handle.write(bytes([255]) * 16)
"""


def probes() -> list[Probe]:
    trec = ["trec", "done.jsonl", "-o"]
    device = [Probe("trec -o a device node (a /dev/null twin)", [*trec, "null.dev"], "error",
                    check=still_special("null.dev", stat.S_ISCHR)),
              Probe("... even with --force", [*trec, "null.dev", "--force"], "error",
                    check=still_special("null.dev", stat.S_ISCHR))] if os.geteuid() == 0 else []
    rows = [
        # data loss: writers
        Probe("index -o a folder whose manifest.json is {}", ["index", "c.json", "-o", "u_empty_obj", *FAST], "error",
              check=user_files_kept("u_empty_obj")),
        Probe("index -o a folder whose manifest.json is empty", ["index", "c.json", "-o", "u_empty_file", *FAST],
              "error", check=user_files_kept("u_empty_file")),
        Probe("index --stream -o a folder whose manifest.json is {}",
              ["index", "c.json", "-o", "u_stream", "--stream", "--workers", "1", *FAST], "error",
              check=user_files_kept("u_stream")),
        Probe("index DIR/corpus.json -o DIR (no manifest)", ["index", "u_none/corpus.json", "-o", "u_none", *FAST],
              "error", check=user_files_kept("u_none")),
        Probe("index -o /", ["index", "c.json", "-o", "/", *FAST], "error"),
        Probe("index -o inside an index", ["index", "c.json", "-o", "idx/sub", *FAST], "error", "idx/sub"),
        Probe("a user's files in an index folder survive a rewrite", ["index", "c.json", "-o", "rewrite", *FAST],
              check=all_of(file_is("rewrite/notes.npy", "mine"), file_is("rewrite/mine.parquet", "mine"),
                           file_is("rewrite/.notes.tmp-9", "mine"), loads("rewrite"))),
        Probe("trec onto its own input", ["trec", "own.jsonl", "-o", "own.jsonl"], "error",
              check=same_bytes_as("own.jsonl", "reference.jsonl")),
        Probe("trec onto an unrelated file", [*trec, "notes_trec.txt"], "error",
              check=file_is("notes_trec.txt", "mine")),
        Probe("trec onto the index's manifest.json", [*trec, "idx_m/manifest.json"], "error", check=loads("idx_m")),
        Probe("trec onto a file inside a generation", [*trec, "idx_g/gen-000001/chunks.parquet"], "error",
              check=loads("idx_g")),
        Probe("trec onto the run's own sidecar", [*trec, "done.jsonl.meta.json"], "error",
              check=record_says("done.jsonl", "format", "gpu_tigrag-run")),
        Probe("trec -o a FIFO", [*trec, "a.fifo"], "error", check=still_special("a.fifo", stat.S_ISFIFO)),
        *device,
        Probe("trec -o a foreign file with --force (asked for)",
              shell="echo mine > forced.txt && tigrag trec done.jsonl -o forced.txt --force -q"),
        Probe("eval --save-qrels onto the question file", ["eval", "idx", "qown.json", "--save-qrels", "qown.json",
                                                             "-q"], "error", check=same_bytes_as("qown.json", "q30.json")),
        Probe("eval --save-qrels onto an unrelated file", ["eval", "idx", "q30.json", "--save-qrels", "notes_qrels.txt",
                                                           "-q"], "error", check=file_is("notes_qrels.txt", "mine")),
        Probe("eval --out into a folder holding the user's report.md",
              ["eval", "idx", "q30.json", "--systems", "BM25", "--out", "mine_report", "-q"], "error",
              check=file_is("mine_report/report.md", "mine")),
        Probe("eval --save-runs into a folder holding the user's qrels.trec",
              ["eval", "idx", "q30.json", "--systems", "BM25", "--save-runs", "mine_runs", "-q"], "error",
              check=file_is("mine_runs/qrels.trec", "mine")),
        Probe("eval --out inside an index", ["eval", "idx", "q30.json", "--systems", "BM25", "--out", "idx/report",
                                             "-q"], "error", "idx/report"),
        Probe("report --out onto an unrelated file", shell="tigrag eval idx q30.json --systems BM25 --out r30 -q && "
              "tigrag report r30 --out notes_report.txt", expect="error", check=file_is("notes_report.txt", "mine")),
        Probe("run -o beside a foreign sidecar", ["run", "idx", "q30.jsonl", "-o", "run_sidecar.jsonl"], "error",
              "run_sidecar.jsonl", check=file_is("run_sidecar.jsonl.meta.json", "mine")),
        Probe("run -o inside an index", ["run", "idx", "q30.jsonl", "-o", "idx/out.jsonl"], "error", "idx/out.jsonl"),
        Probe("datasets fetch over a user's .part file", ["datasets", "fetch", "scifact", "--to", "dl"], "error",
              check=file_is("dl/scifact/scifact.zip.part", "mine")),
        Probe("a vector cache file that is a user's file", ["query", "idx", "film", "-k", "1", "--vector-cache",
                                                            "vc_foreign"], "warn:the damaged file is kept",
              check=set_aside),
        Probe("an in-place edit of a generation a reader still holds, after extend", api=EDIT_OLD_GENERATION,
              check=loads("old_gen")),
        # completeness
        Probe("trec of a killed run (3 of 6 queries)", ["trec", "killed.jsonl", "-o", "killed.trec"], "error",
              "killed.trec"),
        Probe("trec of a run with a torn last line", ["trec", "torn.jsonl", "-o", "torn.trec"], "error", "torn.trec"),
        Probe("trec of a run without its record", ["trec", "nometa.jsonl", "-o", "nometa.trec"], "error",
              "nometa.trec"),
        Probe("trec --partial of a killed run", ["trec", "killed.jsonl", "-o", "partial.trec", "--partial"],
              "warn:a partial run: 3 of 6 queries", check=record_says("partial.trec", "complete", False)),
        Probe("trec of a finished run records it complete", ["trec", "done.jsonl", "-o", "done.trec"],
              check=record_says("done.trec", "complete", True)),
        # ids
        Probe("duplicate corpus ids", ["index", "dupid.json", "-o", "dupidx30", *FAST], "error", "dupidx30"),
        Probe("corpus ids 1.0, 1.00 and 10e-1 stay three ids", ["index", "numid.json", "-o", "numidx30", *FAST],
              check=ids_are("numidx30", ["1.0", "1.00", "10e-1"])),
        Probe("duplicate query ids in an eval file", ["eval", "idx", "dupq.json", "-q"], "error"),
        # extreme settings
        Probe("tigrag.fusion.question_link_bonus=1e308", ["query", "idx", "film", "-k", "5", "--json", "--set",
                                                          "tigrag.fusion.question_link_bonus=1e308"], "error"),
        Probe("tigrag.fusion.bridge_link_bonus=1e308", ["query", "idx", "film", "-k", "5", "--json", "--set",
                                                        "tigrag.fusion.bridge_link_bonus=1e308"], "error"),
        Probe("the largest link bonuses allowed keep every result",
              shell="tigrag query idx film 'Where was Mirela Vantz born?' -k 3 --json -q > bonus_default.json && "
                    "tigrag query idx film 'Where was Mirela Vantz born?' -k 3 --json -q --set "
                    "tigrag.fusion.question_link_bonus=1000 --set tigrag.fusion.bridge_link_bonus=1000 > bonus_max.json",
              check=same_result_counts("bonus_default.json", "bonus_max.json")),
        Probe("bm25.k1=1e308 at index time", ["index", "c.json", "-o", "k1idx", "--set", "bm25.k1=1e308", *FAST],
              "error", "k1idx"),
        Probe("spectrag.dimensions past int64", ["index", "c.json", "-o", "dimidx30", "--methods", "tigrag,spectrag",
                                                 "--set", "spectrag.dimensions=99999999999999999999", *FAST], "error",
              "dimidx30"),
        Probe("tigrag.ppr.damping=nan", ["query", "idx", "film", "--set", "tigrag.ppr.damping=nan"], "error"),
        # edited arrays with a matching checksum
        Probe("negated BM25 weights, re-signed", ["query", "e_bm25", "film"], "error", check=exit_code(3)),
        Probe("an embedding row not unit length, re-signed", ["query", "e_unit", "film"], "error", check=exit_code(3)),
        Probe("an out-of-range token id, re-signed", ["query", "e_token", "film"], "error", check=exit_code(3)),
        Probe("an out-of-range graph index, re-signed (segfault)", ["query", "e_graph", "film"], "error",
              check=exit_code(3)),
        Probe("a non-monotone BM25 indptr, re-signed", ["query", "e_indptr", "film"], "error", check=exit_code(3)),
        Probe("an out-of-range entity id, re-signed", ["query", "e_entity", "film"], "error", check=exit_code(3)),
        Probe("add onto an out-of-range graph index", ["add", "e_add", "c.json"], "error",
              check=all_of(exit_code(3), no_new_generation("e_add"))),
        Probe("a float64 chunk_passage.npy", ["query", "e_float", "film"], "error", check=exit_code(3)),
        Probe("integer titles in passages_title.parquet", ["query", "e_titles", "film"], "error", check=exit_code(3)),
        Probe("an npy header claiming 931 TiB", ["query", "e_header", "film"], "error", check=exit_code(3)),
        Probe("a generation name of 5,000 digits", ["query", "e_digits", "film"], "error", check=exit_code(3)),
        Probe("a pointer naming ../../etc", ["query", "e_escape", "film"], "error", check=exit_code(3)),
        Probe("a generation file that is a link to a file outside, re-signed", ["query", "e_link", "film"], "error",
              check=exit_code(3)),
        Probe("a stage listing ../../victim.npy (extend --ann would carry it)", ["extend", "e_names", "--ann"],
              "error", check=all_of(exit_code(3), file_is("victim.npy", "mine"), file_is("outside.txt", "mine"))),
    ]
    for row in rows:
        row.issue = 30
    return rows
