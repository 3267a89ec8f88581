"""Writers of an index or a run output: one at a time, resumes that check what they continue,
streaming checkpoints that cannot go stale, temporaries of a killed save cleaned up (issue 11.1)."""

import gc
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager

import numpy as np
import pytest

from helpers import EXAMPLES, QUESTIONS, ROOT, logged_messages, string_entities
from gpu_tigrag.batch_run import run_queries
from gpu_tigrag.cli import main
from gpu_tigrag.config import (
    TIGRAG_LEGACY_KEYS, EncoderConfig, EntityConfig, IndexConfig, RetrievalConfig, replace_path,
)
from gpu_tigrag.corpus import Passage, load_corpus
from gpu_tigrag.errors import ResumeMismatchError, TigragError, WriterLockError
from gpu_tigrag.index.add import add_passages, add_to_index_dir
from gpu_tigrag.index.build import build_index
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.index.store import load_index, origin, save_index
from gpu_tigrag.index.stream import build_index_streaming
from gpu_tigrag.locking import lock_path, writer_lock
from gpu_tigrag.presets import preset
from gpu_tigrag.methods.tigrag.retriever import Retriever

pytestmark = [pytest.mark.reliability]

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))
FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
HOLD = ("import sys\nfrom gpu_tigrag.locking import writer_lock\nwith writer_lock(sys.argv[1]):\n"
        "    print('ready', flush=True)\n    sys.stdin.read()\n")


@contextmanager
def held_by_another_process(target):
    """A separate process holding the writer lock of `target`; yields its PID."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(target)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def snapshot(*paths):
    """Every file under `paths` with its bytes (to show that a refused writer changed nothing)."""
    files = {}
    for path in paths:
        for file in sorted(path.rglob("*")) if path.is_dir() else [path] if path.exists() else []:
            if file.is_file():
                files[str(file)] = file.read_bytes()
    return files


def leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".lock", ".work")) or ".tmp" in p.name
                  or ".old-" in p.name)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """A saved index of the example corpus (fast stand-ins), its directory and a query file."""
    folder = tmp_path_factory.mktemp("writers")
    index = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                        entity_extractor=string_entities)
    save_index(index, folder / "index")
    queries = write_queries(folder / "queries.jsonl", 12)
    return folder / "index", queries


def write_queries(path, n, suffix=""):
    with open(path, "w") as handle:
        for i in range(n):
            handle.write(json.dumps({"id": f"q{i}", "question": QUESTIONS[i % len(QUESTIONS)] + f" ({i}){suffix}"})
                         + "\n")
    return path


def extra_corpus(path, title):
    path.write_text(json.dumps([{"title": title, "text": f"{title} is a new pier near Korvath built by Marta Quell."}]))
    return path


def copy_index(src, dst):
    shutil.copytree(src, dst)
    return dst


# ---- 1. one writer at a time ---------------------------------------------------------------------

def test_the_lock_names_its_holder_and_dies_with_it(tmp_path):
    target = tmp_path / "out.jsonl"
    with held_by_another_process(target) as pid:
        with pytest.raises(WriterLockError, match=rf"{target}: .*PID {pid} holds {lock_path(target)}"):
            with writer_lock(target):
                pass
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(target)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)  # kill -9 leaves the lock file but not the lock
    proc.wait()
    assert lock_path(target).exists()
    with writer_lock(target):
        assert lock_path(target).read_text().strip() == str(os.getpid())
    assert not lock_path(target).exists()


@pytest.mark.parametrize("plant", ["link to a file", "dangling link", "folder"])
def test_a_planted_lock_path_is_refused_and_nothing_outside_is_touched(tmp_path, plant):
    """A lock file that is a symbolic link is never followed (its target would be truncated and
    overwritten with a PID, or a file created where a dangling one points); anything but a regular
    file is a clear error, before any change."""
    target, victim = tmp_path / "index", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    lock = lock_path(target)
    if plant == "link to a file":
        lock.symlink_to(victim)
    elif plant == "dangling link":
        lock.symlink_to(tmp_path / "elsewhere" / "created")
    else:
        lock.mkdir()
    with pytest.raises(TigragError, match="lock of .* must be a regular file"):
        with writer_lock(target):
            pass
    assert victim.read_text() == "precious\n" and not (tmp_path / "elsewhere").exists()
    assert not target.exists()


def test_the_cli_refuses_a_planted_lock_link(tmp_path, capsys):
    corpus, victim = tmp_path / "corpus.json", tmp_path / "victim.txt"
    shutil.copy(EXAMPLES / "corpus.json", corpus)
    victim.write_text("precious\n")
    lock_path(tmp_path / "idx").symlink_to(victim)
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 2
    assert "must be a regular file" in capsys.readouterr().err
    assert victim.read_text() == "precious\n" and not (tmp_path / "idx").exists()


def test_a_second_index_build_is_refused_and_changes_nothing(base, tmp_path, capsys):
    index_dir = copy_index(base[0], tmp_path / "index")
    before = snapshot(index_dir)
    corpus = extra_corpus(tmp_path / "other.json", "Zebrine Quay")
    with held_by_another_process(index_dir) as pid:
        for stream in ([], ["--stream", "--workers", "1"]):
            assert main(["index", str(corpus), "-o", str(index_dir), "-q", *FAST, *stream]) == 2
            err = capsys.readouterr().err
            assert f"{index_dir}: another write of this index is already in progress (PID {pid}" in err, err
            assert snapshot(index_dir) == before
            assert leftovers(tmp_path) == ["index.lock"]  # the holder's; no work folder, no temporary
        with pytest.raises(WriterLockError, match=f"PID {pid}"):
            save_index(load_index(index_dir), index_dir)
    assert snapshot(index_dir) == before and leftovers(tmp_path) == []


def test_a_second_add_is_refused_and_changes_nothing(base, tmp_path, capsys):
    index_dir = copy_index(base[0], tmp_path / "index")
    before = snapshot(index_dir)
    corpus = extra_corpus(tmp_path / "other.json", "Zebrine Quay")
    with held_by_another_process(index_dir) as pid:
        assert main(["add", str(index_dir), str(corpus), "-q"]) == 2
        assert f"(PID {pid} holds {index_dir}.lock)" in capsys.readouterr().err
        with pytest.raises(WriterLockError, match=f"PID {pid}"):
            add_to_index_dir(index_dir, load_corpus(corpus), entity_extractor=string_entities)
        assert snapshot(index_dir) == before
    old, grown = add_to_index_dir(index_dir, load_corpus(corpus), entity_extractor=string_entities)
    assert load_index(index_dir).passage_titles == old.passage_titles + ["Zebrine Quay"] == grown.passage_titles


def test_two_adds_of_one_index_lose_no_passage(base, tmp_path):
    """Both read the index before either writes: the second write would drop the first add."""
    index_dir = copy_index(base[0], tmp_path / "index")
    first, second = load_index(index_dir), load_index(index_dir)
    encoder = load_encoder(CONFIG.encoder)
    save_index(add_passages(first, [Passage("Zebrine Quay", "Zebrine Quay is a pier.", "z")], encoder=encoder,
                            entity_extractor=string_entities), index_dir)
    after_first = snapshot(index_dir)
    late = add_passages(second, [Passage("Ulmar Dock", "Ulmar Dock is a dock.", "u")], encoder=encoder,
                        entity_extractor=string_entities)
    with pytest.raises(WriterLockError, match="another writer saved this index after it was read"):
        save_index(late, index_dir)
    assert snapshot(index_dir) == after_first
    assert load_index(index_dir).passage_titles[-1] == "Zebrine Quay"
    save_index(late, tmp_path / "elsewhere")  # the refusal is about that directory only


def test_concurrent_add_processes_lose_nothing(base, tmp_path):
    index_dir = copy_index(base[0], tmp_path / "index")
    titles = ["Zebrine Quay", "Ulmar Dock"]
    procs = [subprocess.Popen([sys.executable, "-m", "gpu_tigrag.cli", "add", str(index_dir),
                               str(extra_corpus(tmp_path / f"extra{i}.json", title)), "-q"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for i, title in enumerate(titles)]
    outcomes = [(proc.wait(timeout=120), proc.stderr.read()) for proc in procs]
    added = [title for title, (rc, _) in zip(titles, outcomes) if rc == 0]
    for rc, err in outcomes:
        assert rc in (0, 2), err
        if rc == 2:
            assert "another write of this index is already in progress" in err or "after it was read" in err, err
    assert added, outcomes
    base_titles = load_index(base[0]).passage_titles
    assert sorted(load_index(index_dir).passage_titles[len(base_titles):]) == sorted(added)  # no add lost


def test_a_second_run_onto_one_output_is_refused(base, tmp_path, capsys):
    index_dir, queries = base
    out = tmp_path / "out.jsonl"
    command = ["run", str(index_dir), str(queries), "-o", str(out), "-k", "3", "-q", "--backend", "numpy"]
    with held_by_another_process(out) as pid:
        assert main(command) == 2
        assert f"{out}: another run writing this output is already in progress (PID {pid}" in capsys.readouterr().err
        assert not out.exists()
    assert main(command) == 0
    before = snapshot(out, tmp_path / "out.jsonl.meta.json")
    with held_by_another_process(out) as pid:
        assert main(command + ["--resume"]) == 2
        assert f"PID {pid}" in capsys.readouterr().err
    assert snapshot(out, tmp_path / "out.jsonl.meta.json") == before


def test_concurrent_resumed_runs_write_each_query_once(base, tmp_path):
    index_dir, _ = base
    queries = write_queries(tmp_path / "q.jsonl", 150)
    reference = tmp_path / "reference.jsonl"
    config = replace_path(replace_path(preset(), "batch_size", 4), "hops", 1)  # what the command line below runs
    run_queries(Retriever(load_index(index_dir), config, backend="numpy"), queries, reference, k=3)
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "gpu_tigrag.cli", "run", str(index_dir), str(queries), "-k", "3", "-q",
               "--backend", "numpy", "--set", "batch_size=4", "--set", "hops=1", "-o", str(out), "--resume"]
    procs = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=ROOT) for _ in range(2)]
    outcomes = [(proc.wait(timeout=300), proc.stderr.read()) for proc in procs]
    for rc, err in outcomes:
        assert rc == 0 or (rc == 2 and "another run writing this output is already in progress" in err), err
    assert out.read_text() == reference.read_text()  # 150 lines, each query once, in order


# ---- 2. a resume continues only its own run --------------------------------------------------------

@pytest.fixture(scope="module")
def finished_run(base, tmp_path_factory):
    """A retriever, its query file, and the reference output of a complete run with k=3."""
    index_dir, queries = base
    retriever = Retriever(load_index(index_dir), RetrievalConfig(batch_size=4), backend="numpy")
    out = tmp_path_factory.mktemp("run") / "full.jsonl"
    run_queries(retriever, queries, out, k=3)
    return retriever, queries, out


def partial_copy(finished_run, tmp_path, rows=5, tail=""):
    """An output as a kill after `rows` rows leaves it (with the run's sidecar)."""
    _, _, full = finished_run
    lines = full.read_text().splitlines(keepends=True)
    out = tmp_path / "partial.jsonl"
    out.write_text("".join(lines[:rows]) + tail)
    shutil.copy(f"{full}.meta.json", f"{out}.meta.json")
    return out


def refuses(out, match, call):
    before = snapshot(out, out.with_name(out.name + ".meta.json"))
    with pytest.raises(ResumeMismatchError, match=match):
        call()
    assert snapshot(out, out.with_name(out.name + ".meta.json")) == before, "a refused resume changed the output"
    assert not lock_path(out).exists()


def test_a_resume_continues_its_own_run_exactly(finished_run, tmp_path):
    retriever, queries, full = finished_run
    lines = full.read_text().splitlines(keepends=True)
    out = partial_copy(finished_run, tmp_path, rows=5, tail=lines[5][:30])  # killed in the middle of row 6
    stats = run_queries(retriever, queries, out, k=3, resume=True)
    assert (stats["skipped_done"], stats["written"]) == (5, 7) and out.read_text() == full.read_text()


def test_a_resume_onto_another_query_file_is_refused(finished_run, tmp_path):
    retriever, _, _ = finished_run
    out = partial_copy(finished_run, tmp_path)
    other = write_queries(tmp_path / "other.jsonl", 12, suffix="?")
    refuses(out, "another query file", lambda: run_queries(retriever, other, out, k=3, resume=True))


def test_a_resume_with_another_k_is_refused(finished_run, tmp_path):
    retriever, queries, _ = finished_run
    out = partial_copy(finished_run, tmp_path)
    refuses(out, "k=3, not k=5", lambda: run_queries(retriever, queries, out, k=5, resume=True))


def test_a_run_file_of_the_old_config_layout_resumes(finished_run, tmp_path):
    """A sidecar written when TIGRAG's settings were top-level keys of the retrieval config (before
    the `tigrag` section) describes the same run: the resume continues it."""
    retriever, queries, full = finished_run
    out = partial_copy(finished_run, tmp_path, rows=5)
    sidecar = out.with_name(out.name + ".meta.json")
    meta = json.loads(sidecar.read_text())
    config = meta["retrieval_config"]
    section = config.pop("tigrag")
    config.update({key: section[key] for key in TIGRAG_LEGACY_KEYS})  # settings added since have no old place
    assert "hops" in config and "ppr" in config
    sidecar.write_text(json.dumps(meta))
    stats = run_queries(retriever, queries, out, k=3, resume=True)
    assert stats["skipped_done"] == 5 and out.read_text() == full.read_text()


def test_a_resume_with_another_configuration_is_refused(finished_run, tmp_path):
    retriever, queries, _ = finished_run
    out = partial_copy(finished_run, tmp_path)
    changed = Retriever(retriever.index, RetrievalConfig.of("tigrag", batch_size=4, hops=1), backend="numpy")
    refuses(out, r"another retrieval configuration \(tigrag.hops 2 there, 1 now\)",
            lambda: run_queries(changed, queries, out, k=3, resume=True))


def test_a_resume_on_another_index_is_refused(finished_run, base, tmp_path):
    retriever, queries, _ = finished_run
    out = partial_copy(finished_run, tmp_path)
    grown = add_passages(retriever.index, [Passage("Zebrine Quay", "Zebrine Quay is a pier.", "z")],
                         encoder=retriever.encoder, entity_extractor=string_entities)
    other = Retriever(grown, retriever.config, backend="numpy")
    refuses(out, "another index", lambda: run_queries(other, queries, out, k=3, resume=True))


@pytest.mark.parametrize("damage, match", [
    ("garbage line", "line 6 is not a result row"),
    ("repeated row", "row 6 is not the answer to query 5"),
    ("other rows", "row 1 is not the answer to query 0"),
    ("garbage tail", "the last line is cut short and is not the start of row 6"),
    ("no sidecar", "has no partial.jsonl.meta.json"),
    ("damaged sidecar", "partial.jsonl.meta.json: damaged"),
])
def test_a_resume_onto_damaged_or_foreign_rows_is_refused(finished_run, tmp_path, damage, match):
    retriever, queries, full = finished_run
    lines = full.read_text().splitlines(keepends=True)
    out = partial_copy(finished_run, tmp_path)
    meta = out.with_name(out.name + ".meta.json")
    if damage == "garbage line":
        out.write_text("".join(lines[:5]) + "not json at all\n")
    elif damage == "repeated row":
        out.write_text("".join(lines[:5]) + lines[4])
    elif damage == "other rows":
        out.write_text("".join(lines[1:6]))
    elif damage == "garbage tail":
        out.write_text("".join(lines[:5]) + "\x00\x00\x00")
    elif damage == "no sidecar":
        meta.unlink()
    else:
        meta.write_text(meta.read_text()[:20])
    refuses(out, match, lambda: run_queries(retriever, queries, out, k=3, resume=True))


def test_a_resume_refuses_a_damaged_parquet_part_and_drops_a_stale_temporary(finished_run, tmp_path):
    retriever, queries, full = finished_run
    out = tmp_path / "out.parquet"
    run_queries(retriever, queries, out, k=3)
    parts = sorted(out.glob("part-*.parquet"))
    parts[-1].unlink()  # killed before the last part was renamed into place ...
    (out / "part-000002.tmp").write_bytes(b"half a part")  # ... with its temporary left behind
    stats = run_queries(retriever, queries, out, k=3, resume=True)
    assert (stats["skipped_done"], stats["written"]) == (8, 4) and not list(out.glob("*.tmp"))
    parts[0].write_bytes(parts[0].read_bytes()[:50])
    refuses(out, "part-000000.parquet: not a readable result part",
            lambda: run_queries(retriever, queries, out, k=3, resume=True))


# ---- 3. streaming checkpoints never go stale ----------------------------------------------------

def crashing_ner(texts):
    raise RuntimeError("NER crashed")


def interrupted_stream_build(corpus, output):
    """A streaming build stopped after tokenise, count and embed (its NER crashes)."""
    with pytest.raises(RuntimeError, match="NER crashed"):
        build_index_streaming([corpus], output, CONFIG, partition_size=5, workers=1,
                              encoder=load_encoder(CONFIG.encoder), entity_extractor=crashing_ner)
    return output.with_name(output.name + ".work")


def resume_stream_build(corpus, output):
    with logged_messages() as messages:
        index = build_index_streaming([corpus], output, CONFIG, partition_size=5, workers=1, resume=True,
                                      encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities)
    return index, " | ".join(messages)


def in_memory(corpus):
    return build_index(load_corpus(corpus), CONFIG, encoder=load_encoder(CONFIG.encoder),
                       entity_extractor=string_entities)


def assert_same_index(a, b):
    assert a.vocab.tokens == b.vocab.tokens and a.chunk_texts == b.chunk_texts
    assert a.passage_titles == b.passage_titles
    np.testing.assert_array_equal(a.token_ids, b.token_ids)
    assert (a.graph != b.graph).nnz == 0
    np.testing.assert_array_equal(a.bm25.toarray(), b.bm25.toarray())
    np.testing.assert_array_equal(a.embeddings, b.embeddings)
    np.testing.assert_array_equal(a.entities.chunk_ids, b.entities.chunk_ids)


@pytest.fixture(scope="module")
def stopped_build(tmp_path_factory):
    """The corpus and work folder of an interrupted streaming build (copied by each test)."""
    folder = tmp_path_factory.mktemp("stream")
    corpus = shutil.copy(EXAMPLES / "corpus.json", folder / "corpus.json")
    return corpus, interrupted_stream_build(corpus, folder / "template")


def stopped_copy(stopped_build, tmp_path):
    corpus, work = stopped_build
    shutil.copytree(work, tmp_path / "idx.work")
    return corpus, tmp_path / "idx", tmp_path / "idx.work"


def test_a_corpus_edited_before_a_stream_resume_is_not_kept_stale(tmp_path):
    corpus = shutil.copy(EXAMPLES / "corpus.json", tmp_path / "corpus.json")
    interrupted_stream_build(corpus, tmp_path / "idx")
    text = corpus.read_text()
    edited = text.replace("long drought", "long draught", 1)
    assert edited != text and len(edited) == len(text)  # a same-size edit: path and size match
    corpus.write_text(edited)
    index, log = resume_stream_build(corpus, tmp_path / "idx")
    assert "partition 0: its passages changed since the interrupted build" in log
    assert any("long draught" in t for t in index.chunk_texts)
    assert not any("long drought" in t for t in index.chunk_texts)
    assert_same_index(index, in_memory(corpus))


@pytest.mark.parametrize("stage", ["embed.npy", "tokens.npz", "counts.npz"])
def test_an_altered_stream_checkpoint_is_recomputed(stopped_build, tmp_path, stage):
    corpus, output, work = stopped_copy(stopped_build, tmp_path)
    victim = sorted(work.glob(f"part-00001-*.{stage}"))[0]
    if stage == "embed.npy":
        np.save(victim, -np.load(victim))  # a valid file with other values
    else:
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # truncated: was a BadZipFile
    index, log = resume_stream_build(corpus, output)
    assert f"{victim.name} (checksum mismatch)" in log
    assert_same_index(index, in_memory(corpus))


def test_unfinished_stream_checkpoints_are_removed_and_redone(stopped_build, tmp_path):
    corpus, output, work = stopped_copy(stopped_build, tmp_path)
    embed = sorted(work.glob("part-00002-*.embed.npy"))[0]
    stale = work / "part-00003-0123456789abcdef0123.tokens.npz.tmp.npz"
    stale.write_bytes(b"killed mid-write")
    ledger = work / "checksums.jsonl"
    ledger.write_text("".join(line + "\n" for line in ledger.read_text().splitlines()
                              if embed.name not in line) + '{"file": "torn')  # its write never recorded
    index, log = resume_stream_build(corpus, output)
    assert f"{stale.name} (unfinished)" in log and f"{embed.name} (unfinished)" in log
    assert_same_index(index, in_memory(corpus))
    assert not work.exists()


def test_a_damaged_stream_build_description_is_a_clear_error(stopped_build, tmp_path):
    corpus, output, work = stopped_copy(stopped_build, tmp_path)
    (work / "build.json").write_text('{"config": ')
    with pytest.raises(TigragError, match="build.json: damaged .* delete .* to start over"):
        resume_stream_build(corpus, output)


# ---- 4. temporaries of a killed save ------------------------------------------------------------

KILLED_SAVE = """
import dataclasses, gc, os, shutil, sys
from gpu_tigrag.index.store import load_index, origin, save_index
where = sys.argv[2]
def killing(real):
    def call(*args, **kwargs):
        os.kill(os.getpid(), 9)
    return call
if where == "write":  # while the new generation's files are written
    import gpu_tigrag.index.store as store
    store.write_npy = killing(store.write_npy)
elif where == "commit":  # the new generation complete, the pointer not yet switched
    os.replace = killing(os.replace)
else:  # the pointer switched, the old generation being removed
    shutil.rmtree = killing(shutil.rmtree)
index = load_index(sys.argv[1])
copy = dataclasses.replace(index, timings={"again": 1.0})
del index
gc.collect()  # this process no longer holds the old generation: the save removes it
save_index(copy, sys.argv[1])
"""


@pytest.mark.parametrize("killed", ["write", "commit", "removal"])
def test_a_killed_save_leaves_the_old_or_the_new_index_and_the_next_save_cleans_up(base, tmp_path, killed):
    """A save killed at any point leaves the index loadable (the old generation until the pointer
    switches, the new one after); what it left is removed by the next save, under the lock."""
    index_dir = copy_index(base[0], tmp_path / "index")
    titles, timings = load_index(index_dir).passage_titles, load_index(index_dir).timings
    gc.collect()  # this test holds no generation while the save runs
    proc = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(index_dir), killed], cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    inside = sorted(p.name for p in index_dir.iterdir())
    left = {"write": r"\.gen-000002\.tmp-.*", "commit": "gen-000002", "removal": r"\.gen-000001\.old-.*"}[killed]
    assert any(re.fullmatch(left, name) for name in inside), inside
    after = load_index(index_dir)
    assert after.timings == ({"again": 1.0} if killed == "removal" else timings)
    assert after.passage_titles == titles
    del after
    for _ in range(2):  # the first save leaves the generation its own reader held; the second removes it
        gc.collect()
        save_index(load_index(index_dir), index_dir)
    inside = sorted(p.name for p in index_dir.iterdir())
    assert len(inside) == 3 and inside[2] == "manifest.json", inside  # the generation read and the new one
    assert origin(load_index(index_dir)).generation == inside[1]
    assert leftovers(tmp_path) == [] and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert load_index(index_dir).passage_titles == titles


def test_a_killed_first_save_leaves_no_index_and_a_temporary_the_next_save_removes(base, tmp_path):
    script = KILLED_SAVE.replace("index = load_index(sys.argv[1])", "index = load_index(sys.argv[3])")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "index"), "write", str(base[0])], cwd=ROOT)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "index").exists()
    assert [p.name.startswith(".index.tmp-") for p in tmp_path.iterdir() if p.name != "index.lock"] == [True]
    save_index(load_index(base[0]), tmp_path / "index")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index"]


def test_a_locked_index_or_add_fails_before_any_work(base, tmp_path, capsys, monkeypatch):
    import gpu_tigrag.index.add
    import gpu_tigrag.index.build

    def no_work(*args, **kwargs):
        raise AssertionError("work started while another writer held the lock")

    monkeypatch.setattr(gpu_tigrag.index.build, "build_index", no_work)
    monkeypatch.setattr(gpu_tigrag.index.add, "add_passages", no_work)
    index_dir = copy_index(base[0], tmp_path / "index")
    corpus = extra_corpus(tmp_path / "other.json", "Zebrine Quay")
    with held_by_another_process(index_dir) as pid:
        assert main(["index", str(corpus), "-o", str(index_dir), "-q", *FAST]) == 2
        assert main(["add", str(index_dir), str(corpus), "-q"]) == 2
        err = capsys.readouterr().err
        assert err.count(f"PID {pid}") == 2 and "work started" not in err
