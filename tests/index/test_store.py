import json

import numpy as np
import pytest

from gpu_tigrag.config import EncoderConfig, IndexConfig
from gpu_tigrag.corpus import Passage
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.index.store import generation_folder, load_index, read_manifest, save_index

PASSAGES = [
    Passage("Korvath", "Korvath is a harbour town. Mirela Vantz was born there.", "k"),
    Passage("Mirela Vantz", "Mirela Vantz directed The Glass Orchard in 1987.", "m"),
]


@pytest.fixture(scope="module")
def index():
    config = IndexConfig(encoder=EncoderConfig(model="hashing:32"))
    return build_index(PASSAGES, config, encoder=load_encoder(config.encoder))


def test_roundtrip_preserves_every_array(index, tmp_path):
    path = save_index(index, tmp_path / "idx")
    loaded = load_index(path)
    assert loaded.config == index.config
    assert loaded.chunk_texts == index.chunk_texts and loaded.vocab.tokens == index.vocab.tokens
    assert (loaded.graph != index.graph).nnz == 0 and (loaded.bm25 != index.bm25).nnz == 0
    np.testing.assert_array_equal(loaded.embeddings, index.embeddings)
    assert loaded.entities.texts == index.entities.texts
    np.testing.assert_array_equal(loaded.entities.chunk_ids, index.entities.chunk_ids)
    manifest = read_manifest(path)
    assert manifest["graph_statistics"]["nodes"] == index.n_vocab
    assert manifest["counts"]["chunks"] == index.n_chunks
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_overwrite_is_atomic_and_refuses_foreign_directories(index, tmp_path):
    path = save_index(index, tmp_path / "idx")
    save_index(index, path)  # replacing an index works
    load_index(path)
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("mine")
    with pytest.raises(TigragError, match="not an index directory"):
        save_index(index, foreign)
    assert (foreign / "keep.txt").read_text() == "mine"


def test_damaged_files_are_reported(index, tmp_path):
    path = save_index(index, tmp_path / "idx")
    files = generation_folder(path)
    data = bytearray((files / "graph_data.npy").read_bytes())
    data[-1] ^= 0xFF
    (files / "graph_data.npy").write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="graph_data.npy: checksum mismatch"):
        load_index(path)
    (files / "vocab.parquet").unlink()
    with pytest.raises(IndexFormatError, match="vocab.parquet: missing"):
        load_index(path)


def test_version_and_manifest_checks(index, tmp_path):
    path = save_index(index, tmp_path / "idx")
    file = generation_folder(path) / "manifest.json"
    manifest = json.loads(file.read_text())
    manifest["format_version"] = 999
    file.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="format version 999 is not supported"):
        load_index(path)
    file.write_text("{not json")
    with pytest.raises(IndexFormatError, match="damaged manifest"):
        load_index(path)
    with pytest.raises(IndexFormatError, match="no such index directory"):
        load_index(tmp_path / "absent")


def test_an_edited_config_in_the_manifest_is_caught(index, tmp_path):
    path = save_index(index, tmp_path / "idx")
    file = generation_folder(path) / "manifest.json"
    manifest = json.loads(file.read_text())
    manifest["config"]["bm25"]["k1"] = 0.9  # a valid value, but not the one the index was built with
    file.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="does not match its checksum"):
        load_index(path)
    del manifest["config_sha256"]
    file.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="does not match its checksum"):
        load_index(path)


def test_precomputed_encoder_roundtrip_without_pickle(tmp_path):
    from gpu_tigrag.errors import ModelError
    from gpu_tigrag.encoders import HashingEncoder, PrecomputedEncoder

    inner = HashingEncoder(16)
    recorded = PrecomputedEncoder.record(inner, ["alpha beta", "gamma", "alpha beta"])
    recorded.save(tmp_path / "vectors.npz")
    loaded = PrecomputedEncoder.load(tmp_path / "vectors.npz")
    assert (loaded.name, loaded.fingerprint, loaded.dim) == (inner.name, inner.fingerprint, 16)
    np.testing.assert_array_equal(loaded.encode(["gamma", "alpha beta"]), inner.encode(["gamma", "alpha beta"]))
    with pytest.raises(ModelError, match="no passage vector"):
        loaded.encode(["delta"])


def test_a_re_signed_array_holding_nan_is_refused(index, tmp_path):
    """A float array with NaN (written with a matching checksum, as an edit that re-signs the
    manifest would) is refused at load, naming the file: a NaN would rank by chunk order, silently."""
    from gpu_tigrag.checksums import sha256_file

    save_index(index, tmp_path / "idx")
    file = generation_folder(tmp_path / "idx") / "embeddings.npy"
    vectors = np.load(file)
    vectors[1, 0] = np.nan
    np.save(file, vectors)
    manifest_path = file.with_name("manifest.json")
    manifest = json.loads(manifest_path.read_text())
    manifest["files"]["embeddings.npy"] = {"bytes": file.stat().st_size, "sha256": sha256_file(file)}
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="embeddings.npy: 1 of its .* values are NaN or infinite"):
        load_index(tmp_path / "idx")


def test_index_files_and_folder_follow_the_umask(index, tmp_path):
    """An index is readable by whoever the user's umask lets read it (not 0700/0600 as the
    temporaries it is written through), like any file a Unix tool writes."""
    import os
    import stat

    old = os.umask(0o022)
    try:
        path = save_index(index, tmp_path / "idx")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o755
    for changes in range(2):  # a new index, then a new generation of it
        folders = {stat.S_IMODE(f.stat().st_mode) for f in path.rglob("*") if f.is_dir()}
        files = {stat.S_IMODE(f.stat().st_mode) for f in path.rglob("*") if f.is_file() and f.name != "manifest.json"}
        manifests = {stat.S_IMODE(f.stat().st_mode) for f in path.rglob("manifest.json")}
        # a generation's arrays and tables are read-only once written (generation_files.READ_ONLY)
        assert folders == {0o755} and files == {0o444} and manifests == {0o644}, (folders, files, manifests)
        old = os.umask(0o022)
        try:
            save_index(load_index(path), path)
        finally:
            os.umask(old)
