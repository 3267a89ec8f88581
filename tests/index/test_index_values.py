"""Index arrays are checked by meaning at load, not only by checksum (issue 30, items 6 and 8): an
array edited and re-signed in its generation's manifest is an IndexFormatError naming the file and
what is wrong (exit 3, "rebuild the index"; a stage's: its `tigrag extend` command), never a silent
wrong answer, a traceback or a segmentation fault in a kernel; `add` and `extend` build nothing on
such arrays; crafted npy headers, Parquet columns and generation names are damaged files too."""

import io
import json
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse

from helpers import EXAMPLES, QUESTIONS, ROOT, string_entities
from gpu_tigrag.checksums import sha256_file
from gpu_tigrag.cli import main
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import EXIT_DAMAGED_INDEX, IndexFormatError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import generation_folder, load_index, save_index
from gpu_tigrag.methods.litesemrag.semantic_graph import STAGE_VERSION, SemanticGraph
from gpu_tigrag.retrieve.factory import make_retriever
from gpu_tigrag.ops.rows import unit_rows

pytestmark = [pytest.mark.reliability]

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))
REBUILD = "rebuild the index"


def litesemrag_stage(index, rng):
    """A small LiteSemRAG stage over `index` (its real build needs spaCy and a token encoder)."""
    strings = index.vocab.tokens[:20]
    tf = scipy.sparse.random(len(strings), index.n_chunks, density=0.2, random_state=1, format="csr",
                             dtype=np.float32)
    tf.data[:] = 1.0
    return SemanticGraph(strings=strings, proto_ptr=np.arange(len(strings) + 1, dtype=np.int64),
                         proto_vectors=unit_rows(rng.standard_normal((len(strings), 16))), tf=tf,
                         chunk_len=rng.integers(5, 60, size=index.n_chunks).astype(np.int32),
                         stats={"stage_version": STAGE_VERSION})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The example corpus with the SpectRAG and LiteSemRAG stages, saved (fast stand-ins)."""
    index = build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                        entity_extractor=string_entities, methods=("tigrag", "spectrag"))
    index.stages["litesemrag"] = litesemrag_stage(index, np.random.default_rng(0))
    return save_index(index, tmp_path_factory.mktemp("values") / "index")


@pytest.fixture
def copy(built, tmp_path):
    return shutil.copytree(built, tmp_path / "index")


def rewrite(index_dir, name, data: bytes):
    """Replace file `name` of the current generation with `data` and re-sign it in the manifest (the
    file may be a hard link shared with another generation: a new file, never written through it)."""
    files = generation_folder(index_dir)
    (files / name).unlink()
    (files / name).write_bytes(data)
    manifest = json.loads((files / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": sha256_file(files / name), "bytes": (files / name).stat().st_size}
    (files / "manifest.json").write_text(json.dumps(manifest))


def npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def edit(index_dir, name, change):
    """Apply `change` (array -> array, or in place returning None) to array `name` and re-sign it."""
    array = np.load(generation_folder(index_dir) / f"{name}.npy").copy()
    changed = change(array)
    rewrite(index_dir, f"{name}.npy", npy_bytes(array if changed is None else changed))


def at(position, value):
    def change(array):
        array[position] = value
    return change


def past_the_end(array):
    """One offset in the middle pointing past the data (later offsets then decrease)."""
    array[len(array) // 2] = array[-1] + 1


#: (array, change, what the error says after the file's name); the sizes: 30 passages, 312 tokens
BASE_EDITS = {
    "chunk_passage past the passages": ("chunk_passage", at(0, 30), r"1 of its 30 ids are outside the passages "
                                        r"\(0 to 29\)"),
    "chunk_passage negative": ("chunk_passage", at(0, -1), "outside the passages"),
    "chunk_passage float64": ("chunk_passage", lambda a: a.astype(np.float64), "a <f8 array .* expected int32"),
    "token id past the vocabulary": ("token_ids", at(0, 10**6), "ids are outside the vocabulary"),
    "token id negative": ("token_ids", at(0, -3), "ids are outside the vocabulary"),
    "token offsets decrease": ("token_indptr", past_the_end, "offsets decrease at row"),
    "token offsets end early": ("token_indptr", lambda a: at(-1, a[-1] - 1)(a), "offsets run from 0 to"),
    "graph column past the vocabulary": ("graph_indices", at(0, 10**6), "outside the .* columns of the token graph"),
    "graph column negative": ("graph_indices", at(0, -1), "outside the .* columns of the token graph"),
    "graph offsets decrease": ("graph_indptr", past_the_end, "offsets decrease at row"),
    "graph offsets do not start at 0": ("graph_indptr", at(0, 1), "offsets run from 1 to"),
    "graph weight zero": ("graph_data", at(0, 0.0), "values of the token graph are not finite > 0"),
    "graph weight negative": ("graph_data", lambda a: -a, "values of the token graph are not finite > 0"),
    "bm25 column past the vocabulary": ("bm25_indices", at(0, 10**6), "outside the .* columns of the BM25 matrix"),
    "bm25 offsets decrease": ("bm25_indptr", past_the_end, "offsets decrease at row"),
    "bm25 negated": ("bm25_data", lambda a: -a, "values of the BM25 matrix are not finite >= 0"),
    "entity id negative": ("entity_chunk_ids", at(0, -1), "ids are outside the entity table"),
    "entity offsets decrease": ("entity_chunk_indptr", past_the_end, "offsets decrease at row"),
    "entity label mask past the labels": ("entity_chunk_masks", at(0, 1 << 30),
                                          "label masks are outside the bits of the .* entity labels"),
    "entity token id past the vocabulary": ("entity_token_ids", at(0, 10**6), "ids are outside the vocabulary"),
    "entity token offsets decrease": ("entity_token_indptr", past_the_end, "offsets decrease at row"),
    "vector not of unit length": ("embeddings", lambda a: at(2, a[2] * 1.5)(a),
                                  r"1 of its 30 vectors are not of unit length .*row 2 has norm 1\.5"),
    "vectors float64": ("embeddings", lambda a: a.astype(np.float64), "a <f8 array .* expected float32"),
    "vectors in Fortran order": ("embeddings", np.asfortranarray, "Fortran order, expected float32"),
    "vectors of another size": ("embeddings", lambda a: unit_rows(a[:, :32]), "vectors of 32 dimensions, the "
                                "manifest's encoder gives 64"),
}


@pytest.mark.parametrize("case", list(BASE_EDITS))
def test_an_edited_base_array_is_refused_at_load_naming_the_file(copy, case):
    name, change, message = BASE_EDITS[case]
    edit(copy, name, change)
    with pytest.raises(IndexFormatError, match=rf"{name}\.npy: .*{message}.*{REBUILD}"):
        load_index(copy)


def test_the_index_loads_and_answers(built):
    index = load_index(built)
    assert index.stage("spectrag").n_chunks == index.n_chunks
    assert index.stage("litesemrag").n_prototypes == 20
    results = make_retriever(index, RetrievalConfig(), backend="numpy").retrieve(QUESTIONS[:2], k=3)
    assert [len(r.chunk_ids) for r in results] == [3, 3]


@pytest.mark.parametrize("backend, refused", [("hashing", False), ("torch", True)])
def test_a_zero_vector_is_accepted_only_from_the_hashing_encoder(copy, backend, refused):
    """The hashing stand-in gives a text without a word the zero vector; the other encoders never do."""
    edit(copy, "embeddings", at(1, 0.0))
    files = generation_folder(copy)
    manifest = json.loads((files / "manifest.json").read_text())
    manifest["encoder"]["backend"] = backend
    (files / "manifest.json").write_text(json.dumps(manifest))
    if not refused:
        assert not load_index(copy).embeddings[1].any()
        return
    with pytest.raises(IndexFormatError, match=r"embeddings\.npy: 1 of its 30 vectors are not of unit length "
                                               r"\(row 1 has norm 0"):
        load_index(copy)


#: (array, change, message) of each stage's arrays
STAGE_EDITS = {
    "spectrag offsets decrease": ("spectrag_weights_indptr", past_the_end, "offsets decrease at row"),
    "spectrag weight negative": ("spectrag_weights_data", at(0, -1.0), "values of the chunk graph are not finite >= 0"),
    "spectrag token count negative": ("spectrag_chunk_tokens", at(0, -5), "token counts are not >= 0"),
    "spectrag coordinates float64": ("spectrag_coords", lambda a: a.astype(np.float64), "expected .* of float32"),
    "litesemrag pointers start below 0": ("litesemrag_proto_ptr", at(0, -1), "offsets run from -1 to"),
    "litesemrag postings offsets decrease": ("litesemrag_tf_indptr", past_the_end, "offsets decrease at row"),
    "litesemrag count negative": ("litesemrag_tf_data", at(0, -1.0), "values of the postings are not finite >= 0"),
    "litesemrag prototype not unit": ("litesemrag_proto_vectors", lambda a: at(3, a[3] * 2)(a),
                                      "1 of its 20 vectors are not of unit length"),
    "litesemrag chunk length negative": ("litesemrag_chunk_len", at(0, -1), "chunk lengths are not >= 0"),
}


@pytest.mark.parametrize("case", list(STAGE_EDITS))
def test_an_edited_stage_array_fails_its_method_naming_the_file(copy, case):
    name, change, message = STAGE_EDITS[case]
    method = name.split("_")[0]
    edit(copy, name, change)
    index = load_index(copy)  # the base index still loads
    with pytest.raises(IndexFormatError, match=rf"{name}\.npy: .*{message}.*tigrag extend .* --methods {method}"):
        index.stage(method)


# ---- files that are not what their header or schema says -------------------------------------------

def test_an_npy_header_claiming_931_tib_is_a_damaged_file_not_out_of_memory(copy, capsys):
    data = (generation_folder(copy) / "embeddings.npy").read_bytes()
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (10**12, 256)})
    rewrite(copy, "embeddings.npy", header.getvalue() + data[128:])
    with pytest.raises(IndexFormatError, match=r"embeddings\.npy: damaged file: its header claims a float32 array "
                                               r"of shape \(1000000000000, 256\) \(1,024,000,000,000,000 bytes\)"):
        load_index(copy)
    assert main(["query", str(copy), QUESTIONS[0], "--backend", "numpy"]) == EXIT_DAMAGED_INDEX
    assert "damaged file" in capsys.readouterr().err


def test_an_npy_file_cut_after_its_header_is_a_damaged_file(copy):
    data = (generation_folder(copy) / "token_ids.npy").read_bytes()
    rewrite(copy, "token_ids.npy", data[:-4])
    with pytest.raises(IndexFormatError, match=r"token_ids\.npy: damaged file: .* the file holds"):
        load_index(copy)


@pytest.mark.parametrize("name, column, table, message", [
    ("passages_title", "title", pa.table({"title": pa.array(range(30))}), "a column of int64, expected strings"),
    ("passages_id", "doc_id", pa.table({"doc_id": pa.array(["a"] * 29 + [None], pa.string())}),
     "1 of its 30 strings are missing"),
    ("chunks", "text", pa.table({"body": pa.array(["x"] * 30)}), "not a readable table with a column 'text'"),
])
def test_a_parquet_column_of_other_values_is_a_clean_error(copy, capsys, name, column, table, message):
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    rewrite(copy, f"{name}.parquet", buffer.getvalue())
    with pytest.raises(IndexFormatError, match=rf"{name}\.parquet: {message}.*{REBUILD}"):
        load_index(copy)
    assert main(["query", str(copy), QUESTIONS[0], "--backend", "numpy"]) == EXIT_DAMAGED_INDEX
    assert "Traceback" not in capsys.readouterr().err


def test_a_generation_name_of_5000_digits_is_a_damaged_pointer(copy, capsys):
    (copy / "manifest.json").write_text(json.dumps({"format": "gpu_tigrag-index", "format_version": 4,
                                                    "generation": "gen-" + "9" * 5000}))
    with pytest.raises(IndexFormatError, match=r"names the generation 'gen-9{30,}\.\.\. \(5,006 characters\)"):
        load_index(copy)
    assert main(["query", str(copy), QUESTIONS[0]]) == EXIT_DAMAGED_INDEX
    err = capsys.readouterr().err
    assert "the pointer is damaged" in err and len(err) < 400


def test_a_manifest_holding_an_integer_of_5000_digits_is_damaged(copy):
    files = generation_folder(copy)
    text = (files / "manifest.json").read_text()
    (files / "manifest.json").write_text(text.replace('"format_version": 3', '"format_version": ' + "3" * 5000))
    with pytest.raises(IndexFormatError, match=r"manifest\.json: damaged manifest \(ValueError"):
        load_index(copy)


def test_a_manifest_without_an_encoder_record_is_damaged(copy):
    files = generation_folder(copy)
    manifest = json.loads((files / "manifest.json").read_text())
    manifest["encoder"] = "hashing:64"
    (files / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="names no encoder"):
        load_index(copy)


# ---- the crash the issue reports, and the writers ------------------------------------------------

@pytest.mark.parametrize("name", ["graph_indices", "bm25_indices"])
def test_an_out_of_range_column_no_longer_crashes_the_query_process(copy, name):
    """Before the checks a column id past the vocabulary reached the numba kernels: the query process
    died of a segmentation fault (run in a subprocess, so that a crash cannot take pytest with it)."""
    edit(copy, name, at(0, 10**6))
    done = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "query", str(copy), QUESTIONS[0], "-q",
                           "--backend", "numpy"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == EXIT_DAMAGED_INDEX, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{name}.npy" in lines[0] and REBUILD in lines[0], lines


def test_add_and_extend_build_nothing_on_a_refused_array(copy, tmp_path, capsys):
    edit(copy, "graph_indices", at(0, 10**6))
    before = sorted(p.name for p in copy.iterdir())
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps([{"title": "Zebrine Quay", "text": "Zebrine Quay is a pier near Korvath."}]))
    assert main(["add", str(copy), str(extra), "-q"]) == EXIT_DAMAGED_INDEX
    assert "graph_indices.npy" in capsys.readouterr().err
    assert main(["extend", str(copy), "--methods", "spectrag", "-q"]) == EXIT_DAMAGED_INDEX
    assert "graph_indices.npy" in capsys.readouterr().err
    assert sorted(p.name for p in copy.iterdir()) == before  # no new generation
