"""Generations share no inode (issue 30 item 7): an in-place edit of a superseded generation's file
(`open(..., "r+b")`, `np.save` over it: the same inode, truncated and rewritten), as root too, never
changes a byte of the current generation, which keeps loading and answering as before. Unchanged files
are cloned (a reflink) where the filesystem can, else written again; every file is read-only once
written, and later writes and the removal of superseded generations still work."""

import dataclasses
import errno
import fcntl
import gc
import os
import stat

import numpy as np
import pytest

from helpers import EXAMPLES, QUESTIONS, string_entities
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.corpus import Passage, load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.index import generation_files
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import add_method, build_index
from gpu_tigrag.index.generations import MANIFEST, collect
from gpu_tigrag.index.store import generation_folder, load_index, save_index
from gpu_tigrag.retrieve.factory import make_retriever

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))


@pytest.fixture(scope="module")
def staged():
    """The example corpus indexed with SpectRAG's stage (fast stand-ins)."""
    return build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                       entity_extractor=string_entities, methods=("tigrag", "spectrag"))


def contents(folder):
    return {file.name: file.read_bytes() for file in sorted(folder.iterdir()) if file.is_file()}


def answers(path, methods=("tigrag",)):
    """What the index at `path`, loaded afresh and verified, answers to the example questions."""
    index = load_index(path)
    found = {}
    for method in methods:
        results = make_retriever(index, RetrievalConfig(method=method), backend="numpy").retrieve(QUESTIONS, k=5)
        found[method] = [(r.chunk_ids, r.scores, r.titles) for r in results]
    return found


def edit_in_place(folder, saved):
    """`np.save` over `folder`/`saved` (O_TRUNC: the same inode, other values), then overwrite bytes in
    the middle of every file of the generation but its manifest through `open(..., "r+b")`."""
    files = [file for file in sorted(folder.iterdir()) if file.is_file() and file.name != MANIFEST]
    for file in files:
        os.chmod(file, 0o644)  # its owner can always make it writable again; root need not
    target = folder / saved
    before, inode = target.read_bytes(), target.stat().st_ino
    np.save(target, np.full_like(np.load(target), 7))
    assert target.stat().st_ino == inode and target.read_bytes() != before
    for file in files:
        with open(file, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(size // 2)
            handle.write(bytes(b ^ 0xFF for b in file.read_bytes()[size // 2 : size // 2 + 16]))
    return files


def test_an_edit_of_the_generation_read_after_extend_leaves_the_current_one_intact(staged, tmp_path):
    path = save_index(dataclasses.replace(staged.with_stage("spectrag", None)), tmp_path / "idx")
    reader = load_index(path)  # holds gen-000001, so that it is still there once superseded
    old = generation_folder(path)
    save_index(add_method(load_index(path), "spectrag"), path)  # every base file re-used
    current = generation_folder(path)
    assert current != old and old.is_dir()
    kept, expected = contents(current), answers(path, ("tigrag", "spectrag"))
    edited = edit_in_place(old, "embeddings.npy")
    assert {"embeddings.npy", "chunks.parquet", "bm25_data.npy"} <= {file.name for file in edited}
    assert contents(current) == kept
    assert answers(path, ("tigrag", "spectrag")) == expected
    del reader
    gc.collect()
    assert collect(path) == [] and not old.exists()  # removed although its files are read-only


def test_an_edit_of_the_generation_read_after_add_leaves_the_current_one_intact(staged, tmp_path):
    path = save_index(dataclasses.replace(staged), tmp_path / "idx")
    reader = load_index(path)
    old = generation_folder(path)
    # a passage naming only known entities: the entity files do not change, the old code linked them
    passage = Passage("Korvath Pier", "Korvath Pier is where Mirela Vantz landed.", "Korvath Pier")
    save_index(add_passages(load_index(path), [passage], encoder=load_encoder(CONFIG.encoder),
                            entity_extractor=string_entities), path)
    current = generation_folder(path)
    assert (old / "entities.parquet").read_bytes() == (current / "entities.parquet").read_bytes()
    kept, expected = contents(current), answers(path, ("tigrag", "spectrag"))
    edit_in_place(old, "entity_token_indptr.npy")
    assert contents(current) == kept
    assert answers(path, ("tigrag", "spectrag")) == expected
    # a later add and extend still write (over read-only files), and the superseded generations go
    save_index(add_method(load_index(path), "spectrag"), path)
    save_index(add_passages(load_index(path), [Passage("Elsin Quay", "Elsin Quay is a pier.", "Elsin Quay")],
                            encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities), path)
    del reader
    gc.collect()
    collect(path)
    assert sorted(p.name for p in path.iterdir() if p.name.startswith("gen-")) == [generation_folder(path).name]
    assert answers(path)["tigrag"]


def test_every_file_of_a_generation_is_read_only_and_readable_by_others(staged, tmp_path):
    mask = os.umask(0o022)
    try:
        path = save_index(dataclasses.replace(staged), tmp_path / "idx")
        save_index(add_method(load_index(path), "spectrag"), path)  # cloned or written again, then carried
    finally:
        os.umask(mask)
    folder = generation_folder(path)
    for file in folder.iterdir():
        mode = stat.S_IMODE(file.stat().st_mode)
        assert file.stat().st_nlink == 1, file.name
        if file.name != MANIFEST:
            assert mode == 0o444, (file.name, oct(mode))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # folders stay as they are


def can_clone(folder):
    """Whether `folder`'s filesystem makes reflinks (FICLONE)."""
    first, second = folder / ".probe-a", folder / ".probe-b"
    first.write_bytes(b"x" * 4096)
    try:
        with open(first, "rb") as origin, open(second, "wb") as clone:
            fcntl.ioctl(clone.fileno(), generation_files.FICLONE, origin.fileno())
        return True
    except OSError as exc:
        assert exc.errno in generation_files._CANNOT
        return False
    finally:
        for file in (first, second):
            file.unlink(missing_ok=True)


def test_unchanged_files_are_cloned_where_the_filesystem_can(staged, tmp_path, monkeypatch):
    cloned = []
    clone = generation_files._clone

    def counting(source, target):
        made = clone(source, target)
        cloned.extend([target.name] if made else [])
        return made

    monkeypatch.setattr(generation_files, "_clone", counting)
    path = save_index(dataclasses.replace(staged), tmp_path / "idx")
    reader, old = load_index(path), generation_folder(path)
    save_index(add_method(load_index(path), "spectrag"), path)
    current = generation_folder(path)
    if can_clone(tmp_path):
        assert {"embeddings.npy", "bm25_data.npy", ".chunks.parquet.link"} <= set(cloned)
    else:
        assert cloned == []  # written again
    for name in ("embeddings.npy", "chunks.parquet"):
        assert (current / name).read_bytes() == (old / name).read_bytes()
        assert (current / name).stat().st_ino != (old / name).stat().st_ino
    del reader


def test_a_clone_that_the_filesystem_refuses_leaves_nothing(tmp_path, monkeypatch):
    source = tmp_path / "a.npy"
    np.save(source, np.arange(10))

    def refuse(fd, request, arg):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(generation_files.fcntl, "ioctl", refuse)
    assert not generation_files._clone(source, tmp_path / "b.npy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]
    assert not generation_files._clone(tmp_path / "gone.npy", tmp_path / "b.npy")
