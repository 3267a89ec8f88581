"""A damaged method stage never blocks the rest (issue 23): a stage array with a wrong checksum, cut
short or holding NaN (re-signed) fails only the method that uses it, with an error naming the file
and `tigrag extend INDEX --methods NAME`; plain TIGRAG queries, `add` and `extend` work, and `extend`
of the damaged method repairs it."""

import json
import shutil

import numpy as np
import pytest

from helpers import EXAMPLES, QUESTIONS, string_entities
from gpu_tigrag.checksums import sha256_file
from gpu_tigrag.cli import main
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import EXIT_DAMAGED_INDEX, IndexFormatError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import generation_folder, load_index, save_index
from gpu_tigrag.retrieve.factory import make_retriever

pytestmark = [pytest.mark.reliability]

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """The example corpus with SpectRAG's stage, saved (fast stand-ins)."""
    index = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                        entity_extractor=string_entities, methods=("tigrag", "spectrag"))
    return save_index(index, tmp_path_factory.mktemp("stages") / "index")


def resign(files, name):
    """Record `name`'s current bytes in its generation's manifest (an edit that keeps checksums valid)."""
    manifest_path = files / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["files"][name] = {"sha256": sha256_file(files / name), "bytes": (files / name).stat().st_size}
    manifest_path.write_text(json.dumps(manifest))


def damage(index_dir, how):
    """Damage a SpectRAG array of the index in `index_dir`; returns the damaged file's name."""
    files = generation_folder(index_dir)
    if how == "checksum":
        target = files / "spectrag_coords.npy"
        data = bytearray(target.read_bytes())
        data[-1] ^= 0xFF
        target.write_bytes(bytes(data))
    elif how == "truncated":
        target = files / "spectrag_weights_data.npy"
        target.write_bytes(target.read_bytes()[:-8])
    else:  # NaN, written with a valid checksum
        target = files / "spectrag_coords.npy"
        coords = np.load(target)
        coords[3, 0] = np.nan
        np.save(target, coords)
        resign(files, target.name)
    return target.name


EXPECTED = {"checksum": "checksum mismatch", "truncated": "size .* differs from the manifest's",
            "nan": "1 of its .* values are NaN"}


@pytest.mark.parametrize("how", ["checksum", "truncated", "nan"])
def test_a_damaged_stage_fails_only_its_method_and_extend_repairs_it(staged, tmp_path, capsys, how):
    index_dir = shutil.copytree(staged, tmp_path / "index")
    name = damage(index_dir, how)
    # the Python API: the base index loads and TIGRAG answers; SpectRAG says what to run
    index = load_index(index_dir)
    assert make_retriever(index, RetrievalConfig(), backend="numpy").retrieve(QUESTIONS[:2], k=3)
    with pytest.raises(IndexFormatError, match=rf"{name}: {EXPECTED[how]}.*rebuild the spectrag stage with "
                                               rf"`tigrag extend {index_dir} --methods spectrag`"):
        make_retriever(index, RetrievalConfig(method="spectrag"), backend="numpy")
    # the command line: plain queries work, SpectRAG's fail with one line naming the file and the repair
    assert main(["query", str(index_dir), QUESTIONS[0], "-k", "2", "--backend", "numpy"]) == 0
    capsys.readouterr()
    assert main(["query", str(index_dir), QUESTIONS[0], "--method", "spectrag", "--backend", "numpy"]) \
        == EXIT_DAMAGED_INDEX
    err = capsys.readouterr().err
    assert name in err and f"tigrag extend {index_dir} --methods spectrag" in err and "Traceback" not in err
    # add works (it rebuilds the stage over the grown index); so does extend, which repairs it
    grown = shutil.copytree(index_dir, tmp_path / "grown")
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps([{"title": "Zebrine Quay", "text": "Zebrine Quay is a pier near Korvath."}]))
    assert main(["add", str(grown), str(extra), "-q"]) == 0
    assert load_index(grown).stage("spectrag").coords.shape[0] == index.n_chunks + 1
    assert main(["extend", str(index_dir), "--methods", "spectrag", "-q"]) == 0
    repaired = load_index(index_dir).stage("spectrag")
    np.testing.assert_array_equal(repaired.coords, load_index(staged).stage("spectrag").coords)


def test_a_save_carries_a_stage_it_never_read_over_unread(staged, tmp_path):
    """Saving an index whose damaged stage was never read keeps the stage's files as they are (the
    damage stays detectable) instead of failing the save of everything else."""
    index_dir = shutil.copytree(staged, tmp_path / "index")
    name = damage(index_dir, "checksum")
    index = load_index(index_dir)
    index.timings = {**index.timings, "again": 1.0}
    save_index(index, index_dir)
    again = load_index(index_dir)
    assert again.timings["again"] == 1.0 and again.has_stage("spectrag")
    with pytest.raises(IndexFormatError, match=f"{name}: checksum mismatch.*tigrag extend"):
        again.stage("spectrag")


@pytest.mark.slow  # LiteSemRAG's stage needs its token encoder and spaCy: ~30 s on 2 shared cores
def test_a_damaged_litesemrag_stage_blocks_neither_spectrag_nor_the_evaluation(tmp_path, capsys):
    pytest.importorskip("spacy")
    pytest.importorskip(EntityConfig().model)
    index_dir = tmp_path / "index"
    fast = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(index_dir), "-q", *fast,
                 "--methods", "tigrag,spectrag,litesemrag"]) == 0
    files = generation_folder(index_dir)
    vectors = files / "litesemrag_proto_vectors.npy"
    vectors.write_bytes(vectors.read_bytes()[:-8])
    capsys.readouterr()
    assert main(["extend", str(index_dir), "--methods", "spectrag", "-q"]) == 0  # the other stage: no read
    assert "added spectrag" in capsys.readouterr().out
    assert main(["eval", str(index_dir), str(EXAMPLES / "questions.json"), "--systems", "all", "-q",
                 "--backend", "numpy", "--json"]) == 0
    captured = capsys.readouterr()
    ran = set(json.loads(captured.out)["results"]["systems"])
    assert "TIGRAG" in ran and "SpectRAG" in ran and not any(s.startswith("LiteSemRAG") for s in ran)
    assert "litesemrag_proto_vectors.npy: size" in captured.err and "--methods litesemrag" in captured.err
    assert main(["extend", str(index_dir), "--methods", "litesemrag", "-q"]) == 0
    assert load_index(index_dir).stage("litesemrag").proto_vectors.shape[0] > 0
