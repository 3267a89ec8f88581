"""Index generations (issue 23): a reader reads one immutable generation, pinned for as long as it
uses it; a save writes a new one and switches the pointer atomically; superseded generations go once
no reader holds them; indexes written before generations load and are converted by their next save."""

import dataclasses
import gc
import json
import os
import shutil
import threading

import numpy as np
import pytest

from helpers import EXAMPLES, string_entities
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig
from gpu_tigrag.corpus import Passage, load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import add_method, build_index
from gpu_tigrag.index.generations import collect
from gpu_tigrag.index.store import generation_folder, load_index, origin, read_manifest, save_index

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))


@pytest.fixture(scope="module")
def staged():
    """The example corpus indexed with SpectRAG's stage (fast stand-ins)."""
    return build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                       entity_extractor=string_entities, methods=("tigrag", "spectrag"))


def fresh(index):
    """A copy of `index` that remembers no directory (saving it anywhere is a plain overwrite)."""
    return dataclasses.replace(index)


def grown(index, title):
    return fresh(add_passages(index, [Passage(title, f"{title} is a pier near Korvath.", title)],
                              encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities))


def generations(path):
    return sorted(p.name for p in path.iterdir() if p.name.startswith("gen-"))


def flatten(path, flat):
    """`flat`: the index at `path` in the layout written before generations (files beside the manifest)."""
    shutil.copytree(generation_folder(path), flat)
    return flat


def test_a_save_is_a_new_generation_and_the_pointer_names_it(staged, tmp_path):
    path = save_index(staged, tmp_path / "idx")
    pointer = json.loads((path / "manifest.json").read_text())
    assert pointer == {"format": "gpu_tigrag-index", "format_version": 4, "generation": "gen-000001"}
    assert generations(path) == ["gen-000001"] and read_manifest(path)["counts"]["chunks"] == staged.n_chunks
    save_index(grown(staged, "Zebrine Quay"), path)
    assert json.loads((path / "manifest.json").read_text())["generation"] == "gen-000002"
    assert generations(path) == ["gen-000002"]  # nobody held the first one: removed
    assert origin(load_index(path)).generation == "gen-000002"


def test_a_reader_keeps_its_generation_stages_read_later_included(staged, tmp_path):
    path = save_index(staged, tmp_path / "idx")
    reader = load_index(path)  # pins gen-000001; its stage is not read yet
    save_index(grown(staged, "Zebrine Quay"), path)
    save_index(grown(staged, "Ulmar Dock"), path)
    assert generations(path) == ["gen-000001", "gen-000003"]  # gen-000002 had no reader
    assert reader.n_chunks == staged.n_chunks
    stage = reader.stage("spectrag")  # read now, from the generation the reader holds
    np.testing.assert_array_equal(stage.coords, staged.spectrag.coords)
    assert load_index(path).passage_titles[-1] == "Ulmar Dock"
    del reader, stage
    gc.collect()
    assert collect(path) == [] and generations(path) == ["gen-000003"]  # the next writer's clean-up


def test_an_index_written_before_generations_loads_and_its_next_save_converts_it(staged, tmp_path):
    flat = flatten(save_index(staged, tmp_path / "idx"), tmp_path / "flat")
    assert (flat / "embeddings.npy").is_file() and read_manifest(flat)["format_version"] == 3
    old = load_index(flat)
    assert old.n_chunks == staged.n_chunks and origin(old).generation is None
    save_index(grown(old, "Zebrine Quay"), flat)
    assert generations(flat) == ["gen-000001"] and load_index(flat).passage_titles[-1] == "Zebrine Quay"
    assert (flat / "embeddings.npy").is_file()  # the flat files stay while a reader (old) holds them
    np.testing.assert_array_equal(old.stage("spectrag").coords, staged.spectrag.coords)
    del old
    gc.collect()
    collect(flat)
    assert sorted(p.name for p in flat.iterdir()) == ["gen-000001", "manifest.json"]


def test_unchanged_files_are_hard_linked_only_when_asked(staged, tmp_path, monkeypatch):
    """By default no generation shares an inode with another (tests/index/test_generation_copies.py);
    `generation_files.HARD_LINKS` links the files that did not change from the generation read."""
    monkeypatch.setattr("gpu_tigrag.index.generation_files.HARD_LINKS", True)
    path = save_index(staged.with_stage("spectrag", None), tmp_path / "idx")
    first = generation_folder(path)
    inode, chunks = ((first / name).stat().st_ino for name in ("embeddings.npy", "chunks.parquet"))
    extended = add_method(load_index(path), "spectrag")
    save_index(extended, path)
    second = generation_folder(path)
    assert second != first and (second / "embeddings.npy").stat().st_ino == inode  # linked, not written
    assert (second / "chunks.parquet").stat().st_ino == chunks
    assert (second / "spectrag_coords.npy").stat().st_nlink == 1
    unverified = add_method(load_index(path, verify_checksums=False), "spectrag")
    save_index(unverified, path)  # a file not verified when read is never linked: written afresh
    assert (generation_folder(path) / "embeddings.npy").stat().st_ino != inode
    assert load_index(path).has_stage("spectrag")


def test_a_damaged_pointer_or_missing_generation_is_a_clear_error(staged, tmp_path):
    path = save_index(staged, tmp_path / "idx")
    pointer = path / "manifest.json"
    pointer.write_text(json.dumps({"format": "gpu_tigrag-index", "format_version": 4, "generation": "../elsewhere"}))
    with pytest.raises(IndexFormatError, match="names the generation '../elsewhere'.*pointer is damaged"):
        load_index(path)
    pointer.write_text(json.dumps({"format": "gpu_tigrag-index", "format_version": 4, "generation": "gen-000009"}))
    with pytest.raises(IndexFormatError, match=r"gen-000009: missing, but .*manifest.json names it"):
        load_index(path)


def test_a_generation_folder_or_a_dangling_link_is_never_written(staged, tmp_path):
    path = save_index(staged, tmp_path / "idx")
    with pytest.raises(TigragError, match="a generation of the index .* write to"):
        save_index(staged, path / "gen-000001")
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere" / "idx")
    with pytest.raises(TigragError, match="a symbolic link to nothing"):
        save_index(staged, link)
    assert not (tmp_path / "nowhere").exists()


def test_readers_in_threads_never_see_a_save(staged, tmp_path):
    """Loads racing saves see a committed index, never an error (the fast, in-process form of
    tests/reliability/test_reliability_readers.py)."""
    path = save_index(staged.with_stage("spectrag", None), tmp_path / "idx")
    states = [staged.with_stage("spectrag", None)]
    for title in ("Zebrine Quay", "Ulmar Dock", "Tessel Wharf"):
        states.append(grown(states[-1], title))
    counts = {len(s.passage_titles) for s in states}
    seen, failures, done = [], [], threading.Event()

    def read():
        while not done.is_set():
            try:
                seen.append(len(load_index(path).passage_titles))
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                failures.append(repr(exc))

    readers = [threading.Thread(target=read) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for _ in range(2):
            for state in states[1:] + states[:1]:
                save_index(fresh(state), path)
    finally:
        done.set()
        for thread in readers:
            thread.join()
    assert failures == [] and seen and set(seen) <= counts
    assert len(generations(path)) <= 3  # superseded ones go (the readers may still hold one or two)
    assert not [p for p in os.listdir(path) if p.startswith(".")]
