"""Disk full and unwritable outputs: one clear error naming the file, nothing half-written, nothing
of the previous version lost, and a resumable build continues once there is room (issue 11).

Each case runs on a real full filesystem (a small tmpfs, where this machine lets the tests mount
one) and by injection (a write that fails with ENOSPC), which runs everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import numpy as np
import pytest

from helpers import EXAMPLES, string_entities
from gpu_tigrag.atomic import atomic_write_json
from gpu_tigrag.cli import main
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.errors import OutputError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.index.store import load_index, manifest_sha256, save_index
from gpu_tigrag.index.stream import build_index_streaming

pytestmark = [pytest.mark.reliability]

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))
FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]


def _try_mount(folder: Path, size_kib: int) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
                          capture_output=True)
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path):
    """A folder on a 2 MiB filesystem (skipped where mounting a tmpfs is not allowed)."""
    folder = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    if not _try_mount(folder, 2048):
        pytest.skip("cannot mount a small tmpfs here (needs root); the injected-failure tests cover this path")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Fill `folder`'s filesystem to the last byte; returns the filler file (delete it to make room)."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.fixture(scope="module")
def small_index():
    return build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                       entity_extractor=string_entities)


def no_temporaries(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if ".tmp" in p.name or ".old-" in p.name]


def fail_writes(monkeypatch, module, name: str = "save") -> None:
    """Make `module.np.<name>` fail as a full disk does."""
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(module.np, name, full)


# ---- index save -------------------------------------------------------------------------------

def test_saving_an_index_onto_a_full_disk_keeps_the_old_one(small_disk, small_index):
    target = small_disk / "index"
    save_index(small_index, target)
    before = manifest_sha256(target)
    filler = fill(small_disk)
    with pytest.raises(OutputError, match=r"index: cannot write \(no space left on device\); nothing was changed"):
        save_index(small_index, target)
    assert manifest_sha256(target) == before and no_temporaries(small_disk)
    filler.unlink()
    assert load_index(target).n_chunks == small_index.n_chunks


def test_an_injected_full_disk_during_save_is_one_clear_error(tmp_path, small_index, monkeypatch):
    import gpu_tigrag.index.store as store

    save_index(small_index, tmp_path / "index")
    before = manifest_sha256(tmp_path / "index")
    fail_writes(monkeypatch, store)
    with pytest.raises(OutputError, match="no space left on device"):
        save_index(small_index, tmp_path / "index")
    assert manifest_sha256(tmp_path / "index") == before and no_temporaries(tmp_path)


def test_cli_index_onto_a_full_disk_exits_4_with_one_line(small_disk, capsys):
    fill(small_disk)
    code = main(["index", str(EXAMPLES / "corpus.json"), "-o", str(small_disk / "index"), "-q", *FAST])
    err = capsys.readouterr().err
    assert code == 4 and "Traceback" not in err  # 4: out of resources (errors.EXIT_RESOURCES)
    assert "no space left on device" in err and str(small_disk / "index") in err
    assert not (small_disk / "index").exists() and no_temporaries(small_disk)


# ---- streaming build --------------------------------------------------------------------------

def test_a_stream_build_stopped_by_a_full_disk_resumes_once_there_is_room(tmp_path, monkeypatch):
    import gpu_tigrag.index.stream as stream

    encoder = load_encoder(CONFIG.encoder)
    corpus, output = EXAMPLES / "corpus.json", tmp_path / "idx"
    real_save = np.save
    calls = {"n": 0}

    def full_after_two(*args, **kwargs):  # the third .npy checkpoint finds the disk full
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(stream.np, "save", full_after_two)
    with pytest.raises(OutputError, match="no space left on device"):
        build_index_streaming([corpus], output, CONFIG, partition_size=5, workers=1, encoder=encoder,
                              entity_extractor=string_entities)
    work = output.with_name("idx.work")
    assert not output.exists() and work.is_dir() and not [p for p in work.iterdir() if ".tmp-" in p.name]
    monkeypatch.setattr(stream.np, "save", real_save)
    resumed = build_index_streaming([corpus], output, CONFIG, partition_size=5, workers=1, resume=True,
                                    encoder=encoder, entity_extractor=string_entities)
    clean = build_index(load_corpus(corpus), CONFIG, encoder=encoder, entity_extractor=string_entities)
    assert resumed.chunk_texts == clean.chunk_texts
    assert np.array_equal(resumed.embeddings, clean.embeddings)
    assert (resumed.graph != clean.graph).nnz == 0 and not work.exists()


# ---- small files written atomically -------------------------------------------------------------

def test_an_atomic_json_write_onto_a_full_disk_keeps_the_old_file(small_disk):
    target = small_disk / "state.json"
    atomic_write_json(target, {"version": 1})
    fill(small_disk)
    with pytest.raises(OutputError, match="state.json: cannot write"):
        atomic_write_json(target, {"version": 2, "padding": "x" * 100_000})
    assert json.loads(target.read_text()) == {"version": 1} and no_temporaries(small_disk)


def test_an_unwritable_folder_is_one_clear_error(tmp_path):
    if os.geteuid() == 0:
        target = Path("/proc/gpu_tigrag-test/state.json")  # root may write anywhere a disk allows
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "state.json"
    with pytest.raises(OutputError, match="state.json: cannot write"):
        atomic_write_json(target, {"x": 1})


def test_numpys_short_write_reads_as_a_full_disk(tmp_path, small_index, monkeypatch):
    """numpy reports a short write as "N requested and M written" without an errno: the message says
    what it means."""
    import gpu_tigrag.index.store as store

    real_save = np.save

    def short_write(file, array, *args, **kwargs):
        if str(file).endswith("embeddings.npy") or "embeddings" in str(file):
            raise OSError("2636288 requested and 1574880 written")
        return real_save(file, array, *args, **kwargs)

    monkeypatch.setattr(store.np, "save", short_write)
    with pytest.raises(OutputError, match=r"the disk is full or the quota exceeded \(only 1,574,880 of 2,636,288"):
        save_index(small_index, tmp_path / "index")
    assert no_temporaries(tmp_path)
