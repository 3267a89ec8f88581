"""SpectRAG's stage on awkward corpora (issue 23): small graphs of several components, more
dimensions than chunks, and entities shared by very many chunks."""

import json

import numpy as np
import pytest
import scipy.sparse

from helpers import logged_messages
from gpu_tigrag.cli import main
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.index.entities import ChunkEntities
from gpu_tigrag.index.store import generation_folder, load_index
from gpu_tigrag.methods.spectrag.chunk_graph import entity_max_chunks, pair_budget
from gpu_tigrag.methods.spectrag.chunk_signals import PAIR_BYTES, PairBudget, entity_signal
from gpu_tigrag.methods.spectrag.config import SpectragIndexConfig
from gpu_tigrag.methods.spectrag.spectral import normalized_laplacian, principal_angles, spectral_coordinates

pytestmark = [pytest.mark.reliability]

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau "
         "upsilon phi chi psi omega").split()


def blocks(sizes, seed=0):
    """A weight matrix of connected random blocks (one component each)."""
    rng = np.random.default_rng(seed)
    parts = []
    for size in sizes:
        upper = scipy.sparse.triu(scipy.sparse.random(size, size, density=0.3, random_state=rng), k=1)
        block = upper + scipy.sparse.diags(rng.uniform(0.1, 1.0, size - 1), 1, shape=(size, size))
        parts.append(block + block.T)
    return scipy.sparse.block_diag(parts).tocsr().astype(np.float32)


# --- item 1: small graphs of several components ----------------------------------------------------

@pytest.mark.parametrize("null_space", ["random", "largest"])
def test_a_small_graph_of_several_components_is_solved_densely(null_space):
    """50 nodes in 5 components, 33 eigenpairs: SciPy's LOBPCG refuses constraints on so few free
    dimensions (NotImplementedError before issue 23); the dense solve gives the Laplacian's spectrum."""
    weights = blocks([10] * 5)
    found = spectral_coordinates(weights, 32, null_space=null_space)
    values, vectors = np.linalg.eigh(normalized_laplacian(weights).toarray())
    assert found.solver.endswith("+dense") and found.components == 5 and found.zero_eigenvalues == 5
    np.testing.assert_allclose(found.eigenvalues, values[:33], atol=1e-9)
    assert principal_angles(found.coords[:, 4:], vectors[:, 5:33]).max() < 1e-6
    assert np.abs(normalized_laplacian(weights) @ found.coords[:, :4]).max() < 1e-6
    np.testing.assert_array_equal(spectral_coordinates(weights, 32, null_space=null_space).coords, found.coords)


def test_graphs_lobpcg_can_solve_keep_their_solver():
    """Where LOBPCG worked before, it still runs: the same solver, so the same coordinates."""
    assert spectral_coordinates(blocks([20, 15, 30]), 8).solver == "components-random+lobpcg"


def several_passages(count=10, sentences=18, seed=0):
    """`count` passages of `sentences` sentences of Greek-letter words: several chunks each,
    linked within a passage only (several components)."""
    rng = np.random.default_rng(seed)
    return [{"title": f"Doc {p}", "text": " ".join(" ".join(rng.choice(WORDS, 8)) + "." for _ in range(sentences))}
            for p in range(count)]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("small")
    (folder / "c.json").write_text(json.dumps(several_passages()))
    (folder / "more.json").write_text(json.dumps(several_passages(3, seed=1)))
    return folder


def test_index_extend_and_add_with_spectrag_on_a_small_index_of_several_components(small_corpus, tmp_path, capsys):
    corpus = small_corpus / "c.json"
    staged = tmp_path / "staged"
    assert main(["index", str(corpus), "-o", str(staged), "--methods", "tigrag,spectrag", *FAST]) == 0
    stage = load_index(staged).spectrag
    assert 34 <= stage.n_chunks <= 160 and 1 < stage.stats["components"] < 33
    assert stage.stats["eigensolver"] == "components-random+dense" and np.isfinite(stage.eigenvalues).all()
    assert main(["add", str(staged), str(small_corpus / "more.json"), *FAST[-1:]]) == 0
    assert load_index(staged).spectrag.n_chunks > stage.n_chunks
    plain = tmp_path / "plain"
    assert main(["index", str(corpus), "-o", str(plain), *FAST]) == 0
    assert main(["extend", str(plain), "--methods", "spectrag", "-q"]) == 0
    assert load_index(plain).spectrag.stats["eigensolver"] == "components-random+dense"
    assert main(["query", str(plain), "alpha beta", "--method", "spectrag", "-k", "2", "-q"]) == 0
    assert "Traceback" not in capsys.readouterr().err


# --- more dimensions than chunks: NaN padding -------------------------------------------------------

def test_dimensions_above_the_chunk_count_are_padded_said_and_checked(small_corpus, tmp_path, capsys):
    """16 chunks give 15 of 32 dimensions: the build says so, the eigenvalues past 16 are NaN, and a NaN
    anywhere else (a damaged array re-signed) is refused at load, naming the file."""
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps(several_passages(4, 12)))
    out = tmp_path / "idx"
    assert main(["index", str(corpus), "-o", str(out), "--methods", "tigrag,spectrag", *FAST]) == 0
    said = capsys.readouterr().out
    stage = load_index(out).spectrag
    n = stage.n_chunks
    assert n < 33 and f"{n} chunks give {n - 1} of the 32 spectral dimensions" in said
    assert np.isfinite(stage.eigenvalues[:n]).all() and np.isnan(stage.eigenvalues[n:]).all()
    assert not stage.coords[:, n - 1:].any()
    from gpu_tigrag.checksums import sha256_file

    values = stage.eigenvalues.copy()
    values[1] = np.nan
    folder = generation_folder(out)
    target = folder / "spectrag_eigenvalues.npy"
    target.unlink()  # a fresh file, not through a link another generation may share
    np.save(target, values)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["spectrag_eigenvalues.npy"] = {"sha256": sha256_file(target), "bytes": target.stat().st_size}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match=rf"spectrag_eigenvalues.npy: expected {n} finite eigenvalue\(s\) then "
                                               "NaN padding"):
        load_index(out).stage("spectrag")


# --- item 2: entities shared by very many chunks -----------------------------------------------------

def shared_entities(n, entities=2):
    """n chunks, each holding the same `entities` PERSON entities (n copies of one passage)."""
    ids = np.tile(np.arange(entities, dtype=np.int32), n)
    return ChunkEntities(texts=[f"E{i}" for i in range(entities)],
                         chunk_indptr=np.arange(0, n * entities + 1, entities, dtype=np.int64), chunk_ids=ids,
                         chunk_masks=np.ones(ids.size, dtype=np.int32), token_indptr=np.zeros(entities + 1, dtype=np.int64),
                         token_ids=np.zeros(0, dtype=np.int32))


def test_an_entity_in_most_chunks_is_skipped_and_said():
    config = SpectragIndexConfig()
    n = 10_000
    with logged_messages() as messages:
        signal = entity_signal(shared_entities(n), n, ("PERSON",), None, "labels", entity_max_chunks(config, n),
                               pair_budget(config, "the entity signal"))
    assert signal.nnz == 0 and signal.shape == (n, n)
    assert any("2 key(s) held by more than 5,000 chunks skipped" in m for m in messages)
    # an entity in at most half the chunks still links them, and so does one in at most 1,000 (a small
    # corpus keeps the public code's graph)
    assert entity_max_chunks(config, 3000) == 1500 and entity_max_chunks(config, 8) == 1000
    kept = entity_signal(shared_entities(6), 8, ("PERSON",), None, "distinct", entity_max_chunks(config, 8))
    assert kept.nnz == 6 * 5
    half = entity_signal(shared_entities(1500, 1), 3000, ("PERSON",), None, "distinct", entity_max_chunks(config, 3000))
    assert half.nnz == 1500 * 1499


def test_entity_pairs_over_the_memory_budget_are_a_clear_error_before_the_product():
    n = 3000
    budget = PairBudget(1, "the entity signal", "lower spectrag.entity_max_share")
    with pytest.raises(TigragError, match=r"the entity signal would count 9,000,000 chunk pairs .*a key shared by "
                                          r"3,000 of the 3,000 chunks.* over the budget of 1 MiB; lower "
                                          r"spectrag.entity_max_share"):
        entity_signal(shared_entities(n), n, ("PERSON",), None, "labels", None, budget)
    small = 600  # within the budget, the same signal is built
    roomy = PairBudget(small * small * PAIR_BYTES // 2**20 + 1, "the entity signal", "")
    assert entity_signal(shared_entities(small), small, ("PERSON",), None, "distinct", None, roomy).nnz == \
        small * (small - 1)


def test_entity_settings_are_checked():
    for bad, message in (({"entity_max_share": 0.0}, "entity_max_share must be in \\(0, 1\\]"),
                         ({"entity_max_share": 1.5}, "entity_max_share must be in \\(0, 1\\]"),
                         ({"memory_budget_mb": 0}, "memory_budget_mb must be in \\[1, 1073741824\\]")):
        with pytest.raises(TigragError, match=message):
            SpectragIndexConfig(**bad)


def test_cli_copies_of_one_passage_build_spectrag_within_memory(tmp_path, capsys):
    """2,000 copies of one passage (the issue's 10,000 scaled down): the entity signal is skipped,
    the build finishes; with every entity kept and a small budget it is one clear line."""
    corpus = tmp_path / "same.json"
    corpus.write_text(json.dumps([{"title": "Same", "text": "Mirela Vantz directed The Glass Orchard in Korvath."}]
                                 * 2000))
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), "--methods", "tigrag,spectrag", *FAST]) == 0
    assert load_index(tmp_path / "idx").spectrag.stats["signals"]["entity"]["edges"] == 0
    capsys.readouterr()
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx2"), "--methods", "tigrag,spectrag", *FAST,
                 "--set", "spectrag.entity_max_share=1", "--set", "spectrag.memory_budget_mb=64"]) == 2
    err = capsys.readouterr().err
    assert "tigrag: error: SpectRAG: the entity signal would count 4,000,000 chunk pairs" in err
    assert "Traceback" not in err and not (tmp_path / "idx2").exists()
