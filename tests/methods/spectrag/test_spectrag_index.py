"""SpectRAG's index stage: edge signals, their combination, spectral coordinates, storage, build hooks, CLI."""

import json

import numpy as np
import pytest
import scipy.sparse

from helpers import EXAMPLES, logged_messages, string_entities
from gpu_tigrag.checksums import sha256_file
from gpu_tigrag.config import EncoderConfig, IndexConfig
from gpu_tigrag.methods.spectrag.config import SpectragIndexConfig
from gpu_tigrag.corpus import Passage, as_passages
from gpu_tigrag.encoders import HashingEncoder, load_encoder
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.methods.spectrag import chunk_signals
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import add_method, build_index, check_methods
from gpu_tigrag.methods.spectrag.chunk_graph import combine_signals, count_tokens, min_max
from gpu_tigrag.methods.spectrag.chunk_signals import (adjacency_signal, citation_keys, citation_signal, entity_signal,
                                            link_signal, question_signal, section_signal, semantic_signal,
                                            symmetric_max)
from gpu_tigrag.index.entities import ChunkEntities, label_mask
from gpu_tigrag.text.titles import forward_title_links
from gpu_tigrag.methods.spectrag.spectral import (normalized_laplacian, principal_angles, spectral_coordinates)
from gpu_tigrag.index.store import generation_folder, index_fingerprint, load_index, read_manifest, save_index

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"))


def pairs(matrix):
    """{(i, j): score} of the upper triangle of a symmetric matrix (checked symmetric, no diagonal)."""
    dense = matrix.toarray()
    np.testing.assert_array_equal(dense, dense.T)
    assert not np.diag(dense).any()
    upper = scipy.sparse.triu(matrix, k=1).tocoo()
    return {(int(i), int(j)): float(v) for i, j, v in zip(upper.row, upper.col, upper.data)}


# --- signals ------------------------------------------------------------------------------------

def test_adjacency_links_consecutive_chunks_of_one_passage_only():
    assert pairs(adjacency_signal(np.array([0, 0, 0, 1, 2, 2]))) == {(0, 1): 1.0, (1, 2): 1.0, (4, 5): 1.0}
    assert pairs(adjacency_signal(np.array([0, 1, 2]))) == {}


def test_section_is_empty_on_headingless_text():
    assert section_signal(4).shape == (4, 4) and section_signal(4).nnz == 0


def entity_table():
    # A (PERSON) in chunks 0, 1, 2; B (GPE) in 0, 1 (twice in 0); C (DATE) in 1, 3; D (PERSON) twice in chunk 3 only
    occurrences = [[(0, "PERSON"), (1, "GPE"), (1, "GPE")], [(0, "PERSON"), (1, "GPE"), (2, "DATE")],
                   [(0, "PERSON")], [(2, "DATE"), (3, "PERSON"), (3, "PERSON")]]
    indptr = np.cumsum([0] + [len(o) for o in occurrences])
    ids = [e for o in occurrences for e, _ in o]
    masks = [label_mask([label]) for o in occurrences for _, label in o]
    return ChunkEntities(["A", "B", "C", "D"], indptr.astype(np.int64), np.array(ids, np.int32),
                         np.array(masks, np.int32), np.zeros(5, np.int64), np.zeros(0, np.int32))


def with_diagonal(matrix):
    """({(i, j): score} of the upper triangle off the diagonal, {i: score} of the diagonal)."""
    dense = matrix.toarray()
    np.testing.assert_array_equal(dense, dense.T)
    diagonal = {int(i): float(dense[i, i]) for i in np.flatnonzero(np.diag(dense))}
    np.fill_diagonal(dense, 0)
    return pairs(scipy.sparse.csr_matrix(dense)), diagonal


@pytest.mark.parametrize("mode", ["labels", "distinct"])
def test_entity_counts_shared_entities_over_the_largest_count(backend, mode):
    table = entity_table()
    every = ("PERSON", "GPE", "DATE")
    # no text carries two labels here: both counts agree (a repeat with the same label counts once)
    assert pairs(entity_signal(table, 4, every, backend, mode)) == {(0, 1): 1.0, (0, 2): 0.5, (1, 2): 0.5, (1, 3): 0.5}
    # the label filter: dates do not link; an entity in one chunk only (D) never does
    assert pairs(entity_signal(table, 4, ("PERSON", "GPE"), backend)) == {(0, 1): 1.0, (0, 2): 0.5, (1, 2): 0.5}
    assert pairs(entity_signal(table, 4, ("PERSON",), backend)) == {(0, 1): 1.0, (0, 2): 1.0, (1, 2): 1.0}
    assert entity_signal(table, 4, ("ORG",), backend).nnz == 0


def test_entity_pairs_count_each_label_and_pair_a_chunk_with_itself_as_the_public_code(backend):
    # E: PERSON and ORG in chunk 0, PERSON in chunk 1; F: PERSON and ORG in chunk 2 only; G: PERSON in 1 and 2
    occurrences = [[(0, "PERSON"), (0, "ORG"), (0, "PERSON")], [(0, "PERSON"), (2, "PERSON")],
                   [(1, "PERSON"), (1, "ORG"), (2, "PERSON")]]
    indptr = np.cumsum([0] + [len(o) for o in occurrences])
    table = ChunkEntities(["E", "F", "G"], indptr.astype(np.int64), np.array([e for o in occurrences for e, _ in o], np.int32),
                          np.array([label_mask([lab]) for o in occurrences for _, lab in o], np.int32),
                          np.zeros(4, np.int64), np.zeros(0, np.int32))
    every = ("PERSON", "ORG")
    # the code's term lists: E -> [0, 0, 1], F -> [2, 2], G -> [1, 2]: pairs (0, 1) twice, (0, 0), (2, 2), (1, 2)
    off, diagonal = with_diagonal(entity_signal(table, 3, every, backend, "labels"))
    assert off == {(0, 1): 1.0, (1, 2): 0.5} and diagonal == {0: 0.5, 2: 0.5}
    off, diagonal = with_diagonal(entity_signal(table, 3, every, backend, "distinct"))
    assert off == {(0, 1): 1.0, (1, 2): 1.0} and diagonal == {}


def brute_force_semantic(vectors, k, threshold):
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    found = {}
    for i in range(len(vectors)):
        for j in np.argsort(-sims[i], kind="stable")[:k]:
            if sims[i, j] >= threshold:
                key = (min(i, j), max(i, j))
                found[key] = max(found.get(key, -1.0), float(sims[i, j]))
    return found


def test_semantic_top_k_and_threshold(backend, monkeypatch):
    monkeypatch.setattr(chunk_signals, "BLOCK_ENTRIES", 7 * 40)  # blocks of 7 rows: several blocks
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((40, 6)).astype(np.float32)
    for k, threshold in ((1, -1.0), (3, 0.3), (5, 0.6)):
        got = pairs(semantic_signal(vectors, k, threshold, backend))
        expected = brute_force_semantic(vectors.astype(np.float64), k, threshold)
        assert got.keys() == expected.keys()
        np.testing.assert_allclose([got[p] for p in expected], [max(v, 0.0) for v in expected.values()], atol=1e-6)


def test_semantic_hand_case():
    vectors = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    # nearest of 0: 1 (.8); of 1: 0 or 2 (.8, .6) -> 0; of 2: 1 (.6); of 3: 2 (0)
    assert pairs(semantic_signal(vectors, 1, 0.5)) == pytest.approx({(0, 1): 0.8, (1, 2): 0.6})
    assert pairs(semantic_signal(vectors, 1, 0.7)) == pytest.approx({(0, 1): 0.8})
    both = {(0, 1): 0.8, (1, 2): 0.6, (0, 2): 0.0, (2, 3): 0.0}  # ties at the cut: the lowest id (0 for chunk 2)
    assert pairs(semantic_signal(vectors, 2, 0.0)) == pytest.approx(both)


def test_semantic_signal_from_an_ivf_index_finds_the_exact_pairs():
    """semantic_search=ivf: probing every list gives the exact signal's pairs (FAISS's float32 products, within
    an ulp); probing few lists finds most of them; "auto" is exact below ann.min_chunks."""
    pytest.importorskip("faiss")
    from gpu_tigrag.methods.spectrag.chunk_graph import semantic_search

    rng = np.random.default_rng(5)
    centres = rng.standard_normal((20, 32)).astype(np.float32)
    vectors = centres[rng.integers(0, 20, 1500)] + 0.3 * rng.standard_normal((1500, 32)).astype(np.float32)
    exact = semantic_signal(vectors, 7, 0.5)
    every = semantic_signal(vectors, 7, 0.5, search="ivf", nprobe=10_000)
    assert pairs(every).keys() == pairs(exact).keys()
    assert abs(exact - every).max() < 1e-5
    few = semantic_signal(vectors, 7, 0.5, search="ivf", nprobe=4)
    found = len(pairs(few).keys() & pairs(exact).keys()) / len(pairs(exact))
    assert 0.8 < found <= 1.0
    assert semantic_search(SpectragIndexConfig(), 199_999) == "exact"
    assert semantic_search(SpectragIndexConfig(), 200_000) == "ivf"
    assert semantic_search(SpectragIndexConfig(semantic_search="ivf"), 10) == "ivf"
    with pytest.raises(TigragError, match="'auto', 'exact' or 'ivf'"):
        SpectragIndexConfig(semantic_search="hnsw")


def test_citation_keys_and_signal():
    # the public code's patterns: a DOI only after "doi:" (its trailing period kept), no spaces before a comma
    text = "As shown [1], [2, 3] and doi:10.1000/XYZ.42. See https://example.org/a). Bare 10.1000/abc, [4 , 5]."
    assert citation_keys(text) == {"ref:1", "ref:2", "ref:3", "doi:10.1000/xyz.42.", "url:https://example.org/a"}
    texts = ["Result [1] and [2].", "Also [1] and [2]; https://x.org/p", "Only [2]. https://x.org/p", "None here."]
    assert pairs(citation_signal(texts)) == {(0, 1): 1.0, (0, 2): 0.5, (1, 2): 1.0}
    assert citation_signal(["no keys", "at all"]).nnz == 0


def test_question_signal_links_chunks_with_near_questions():
    questions = [["Who built the pier?", "When did it open?"], ["Who built the pier?"], ["What is a drought?"]]
    got = pairs(question_signal(questions, HashingEncoder(64), top_k=20, threshold=0.8))
    assert got == pytest.approx({(0, 1): 1.0})
    assert question_signal(questions, HashingEncoder(64), top_k=1, threshold=0.8).nnz == 0  # only itself searched


def test_forward_title_links_point_from_the_naming_chunk_to_the_named_passage():
    """The directed links: row c holds the chunks of each passage c names (never c's own passage), and their
    symmetric closure is link_signal."""
    titles = ["The Glass Orchard", "Mirela Vantz", "Korvath"]
    chunk_passage = np.array([0, 1, 1, 2])
    texts = ["The Glass Orchard\nA film directed by Mirela Vantz.", "Mirela Vantz\nA painter from Korvath.",
             "Mirela Vantz\nShe painted The Glass Orchard poster.", "Korvath\nA harbour town."]
    forward = forward_title_links(texts, chunk_passage, titles, title_in_chunk=True)
    assert {(int(i), int(j)) for i, j in zip(*forward.nonzero())} == {(0, 1), (0, 2), (1, 3), (2, 0)}
    assert (forward.data == 1).all()
    symmetric = link_signal(texts, chunk_passage, titles, title_in_chunk=True)
    assert (symmetric != forward.maximum(forward.T)).nnz == 0


def test_link_signal_joins_a_chunk_to_the_chunks_of_each_passage_it_names():
    titles = ["The Glass Orchard", "Mirela Vantz", "Korvath", "Drought"]
    chunk_passage = np.array([0, 0, 1, 2, 3])
    texts = ["The Glass Orchard\nThe Glass Orchard is a film directed by Mirela Vantz.",  # its own title: no link
             "The Glass Orchard\nIt premiered in Korvath and in korvath again.",  # named twice: score 1
             "Mirela Vantz\nVantz was born in Korvath; a drought is not named (lower case).",
             "Korvath\nA harbour town.", "Drought\nNo names here."]
    got = pairs(link_signal(texts, chunk_passage, titles, title_in_chunk=True))
    assert got == {(0, 2): 1.0, (1, 3): 1.0, (2, 3): 1.0}
    # the title line at a chunk's head is not a mention of the passage's own title or another's
    got = pairs(link_signal(["Mirela Vantz\nplain", "Korvath\nplain"], np.array([0, 1]), ["Mirela Vantz", "Korvath"],
                            title_in_chunk=True))
    assert got == {}
    assert link_signal(["nothing"], np.array([0]), ["Korvath"], title_in_chunk=False).nnz == 0


def test_links_stand_in_for_the_question_signal_in_the_stage():
    index = build_index(as_passages([("The Glass Orchard", "A film directed by Mirela Vantz."),
                                     ("Mirela Vantz", "A director born in Korvath."),
                                     ("Korvath", "A harbour town.")]), CONFIG, entity_extractor=string_entities)
    with_links = add_method(index, "spectrag", config=SpectragIndexConfig(question_signal="links"))
    assert with_links.stage("spectrag").stats["signals"]["question"]["edges"] == 2
    assert add_method(index, "spectrag").stage("spectrag").stats["signals"]["question"]["dropped"]
    with pytest.raises(TigragError, match="'none', 'sentences' or 'links'"):
        SpectragIndexConfig(question_signal="llm")


def test_symmetric_max_keeps_the_larger_score_and_drops_self_pairs():
    got = pairs(symmetric_max(np.array([0, 1, 2, 2]), np.array([1, 0, 2, 0]), np.array([0.3, 0.7, 1.0, 0.2]), 3))
    assert got == pytest.approx({(0, 1): 0.7, (0, 2): 0.2})


# --- combination --------------------------------------------------------------------------------

def test_min_max_normalisation_and_the_edge_threshold_by_hand():
    np.testing.assert_allclose(min_max(np.array([0.8, 0.9, 1.0, 0.85])), [0, 0.5, 1, 0.25])
    np.testing.assert_array_equal(min_max(np.array([0.4, 0.4])), [1, 1])
    n = 4
    signals = {
        "semantic": symmetric_max(np.array([0, 1, 2, 0]), np.array([1, 2, 3, 3]), np.array([0.8, 0.9, 1.0, 0.85]), n),
        "adjacency": symmetric_max(np.array([0, 2]), np.array([1, 3]), np.ones(2), n),
        "entity": symmetric_max(np.array([1]), np.array([2]), np.array([0.5]), n),
        "question": None,
    }
    weights = {"semantic": 0.15, "adjacency": 0.10, "entity": 0.25, "question": 0.28}
    combined, report, linked = combine_signals(signals, weights, 0.1, n)
    # (0,1): .15*0 + .10*1 = .10 (kept: >= .1); (1,2): .15*.5 + .25*1 = .325; (2,3): .15 + .10 = .25;
    # (0,3): .15*.25 = .0375 (dropped); the question weight is not spread over the others
    assert pairs(combined) == pytest.approx({(0, 1): 0.10, (1, 2): 0.325, (2, 3): 0.25})
    assert combined.dtype == np.float32 and linked == 4
    assert report["semantic"] == {"weight": 0.15, "dropped": False, "edges": 4, "kept": 3}
    assert report["adjacency"]["kept"] == 2 and report["entity"]["kept"] == 1
    assert report["question"] == {"weight": 0.28, "dropped": True, "edges": 0, "kept": 0}
    weights["adjacency"] = 0.084  # configuration 1: adjacency-only links die
    combined, _, _ = combine_signals(signals, weights, 0.1, n)
    assert set(pairs(combined)) == {(1, 2), (2, 3)}


def test_combined_weights_are_rounded_and_self_pairs_stay_on_the_diagonal():
    n = 3
    entity = scipy.sparse.csr_matrix(np.array([[0.5, 1.0, 0], [1.0, 0, 0.25], [0, 0.25, 0]], dtype=np.float32))
    semantic = symmetric_max(np.array([0]), np.array([2]), np.array([0.9]), n)
    combined, report, linked = combine_signals({"entity": entity, "semantic": semantic},
                                               {"entity": 0.3333333, "semantic": 0.123456}, 0.1, n)
    off, diagonal = with_diagonal(combined)
    # entity min-max over (0,0) .5, (0,1) 1, (1,2) .25 -> 1/3, 1, 0; semantic alone -> 1
    assert off == pytest.approx({(0, 1): 0.3333, (0, 2): 0.1235}, abs=1e-7) and diagonal == pytest.approx({0: 0.1111})
    assert report["entity"] == {"weight": 0.3333333, "dropped": False, "edges": 3, "kept": 2} and linked == 4


# --- spectral coordinates -----------------------------------------------------------------------

def random_graph(sizes, isolated=0, density=0.3, seed=0):
    rng = np.random.default_rng(seed)
    blocks = []
    for size in sizes:
        upper = scipy.sparse.triu(scipy.sparse.random(size, size, density=density, random_state=rng), k=1)
        path = scipy.sparse.diags(rng.uniform(0.1, 1.0, size - 1), 1, shape=(size, size))  # connected
        block = upper + path
        blocks.append(block + block.T)
    blocks.append(scipy.sparse.csr_matrix((isolated, isolated)))
    return scipy.sparse.block_diag(blocks).tocsr().astype(np.float32)


def dense_spectrum(weights):
    return np.linalg.eigh(normalized_laplacian(weights).toarray())


@pytest.mark.parametrize("solver", ["host", "device"])
def test_eigenpairs_match_the_dense_laplacian_on_a_connected_graph(solver):
    weights = random_graph([60])
    values, vectors = dense_spectrum(weights)
    found = spectral_coordinates(weights, 8, solver)
    assert found.solver == ("arpack-shift-invert" if solver == "host" else "lanczos-la")
    assert found.coords.shape == (60, 8) and found.coords.dtype == np.float32 and found.eigenvalues.shape == (9,)
    np.testing.assert_allclose(found.eigenvalues, values[:9], atol=1e-9)
    assert principal_angles(found.coords, vectors[:, 1:9]).max() < 1e-5
    assert found.zero_eigenvalues == found.components == 1 and found.max_residual < 1e-6
    # the sign convention: each vector's largest-magnitude entry is positive, so a rebuild is identical
    peak = np.abs(found.coords).argmax(axis=0)
    assert (found.coords[peak, np.arange(8)] > 0).all()
    np.testing.assert_array_equal(spectral_coordinates(weights, 8, solver).coords, found.coords)


@pytest.mark.parametrize("solver", ["host", "device"])
def test_zero_eigenvalues_count_the_components(solver):
    weights = random_graph([20, 15, 30], isolated=2)  # 5 components
    values, vectors = dense_spectrum(weights)
    for null_space in ("random", "largest"):
        found = spectral_coordinates(weights, 8, solver, null_space=null_space)
        assert found.components == 5 and found.zero_eigenvalues == 5
        np.testing.assert_allclose(found.eigenvalues, values[:9], atol=1e-7)
        lap = normalized_laplacian(weights)
        assert np.abs(lap @ found.coords[:, :4]).max() < 1e-6  # 4 of the 5 null directions are kept
        assert principal_angles(found.coords[:, 4:], vectors[:, 5:9]).max() < 1e-4  # the non-zero part
    # more components than vectors: every coordinate lies in the null space (the public code's degenerate case)
    many_graph = random_graph([3] * 12, isolated=30)
    largest = spectral_coordinates(many_graph, 8, solver, null_space="largest")
    assert largest.components == 42 and largest.zero_eigenvalues == 9 and largest.solver == "components"
    assert np.abs(normalized_laplacian(many_graph) @ largest.coords).max() < 1e-6
    assert not largest.coords[36:].any()  # chunks outside the 9 largest components sit at zero


def test_the_random_null_space_is_the_public_codes_degenerate_basis_made_reproducible():
    """On a graph of more components than vectors the public code's ARPACK returns an arbitrary basis
    of the null space: one component's rows parallel, no row zero. "random" is such a basis, seeded."""
    weights = random_graph([3] * 12, isolated=30)
    found = spectral_coordinates(weights, 8)
    assert found.solver == "components-random" and found.components == 42 and found.zero_eigenvalues == 9
    coords = found.coords.astype(np.float64)
    assert np.abs(normalized_laplacian(weights) @ coords).max() < 1e-6
    assert np.linalg.norm(coords, axis=1).min() > 0  # no chunk at zero: its proximity to itself is 1
    unit = coords / np.linalg.norm(coords, axis=1, keepdims=True)
    for block in range(12):  # the rows of one component are parallel
        rows = unit[3 * block:3 * block + 3]
        np.testing.assert_allclose(rows @ rows.T, 1.0, atol=1e-6)
    np.testing.assert_allclose(coords.T @ coords, np.eye(8), atol=1e-6)  # orthonormal columns
    np.testing.assert_array_equal(spectral_coordinates(weights, 8).coords, found.coords)  # seeded: reproducible
    with pytest.raises(TigragError, match="null_space must be one of random, largest"):
        spectral_coordinates(weights, 8, null_space="arpack")


def test_a_self_loop_is_not_read_by_the_laplacian():
    weights = random_graph([30]).tolil()
    plain = spectral_coordinates(weights.tocsr(), 4)
    weights[3, 3] = 0.7
    looped = spectral_coordinates(weights.tocsr(), 4)
    np.testing.assert_allclose(looped.eigenvalues, plain.eigenvalues, atol=1e-12)
    assert principal_angles(looped.coords, plain.coords).max() < 1e-6


def test_small_graphs_use_a_dense_solve_and_keep_the_shapes():
    weights = random_graph([5])
    values, _ = dense_spectrum(weights)
    found = spectral_coordinates(weights, 8)
    assert found.solver == "dense" and found.coords.shape == (5, 8) and found.eigenvalues.shape == (9,)
    np.testing.assert_allclose(found.eigenvalues[:5], values)
    assert np.isnan(found.eigenvalues[5:]).all() and not found.coords[:, 4:].any()
    assert spectral_coordinates(scipy.sparse.csr_matrix((1, 1)), 4).coords.shape == (1, 4)


def test_eigensolver_parity_on_the_backend(backend):
    """The device solver (CuPy's Lanczos on a GPU) against the host's ARPACK, by principal angles."""
    weights = random_graph([80])
    host = spectral_coordinates(weights, 6, "host")
    device = spectral_coordinates(weights, 6, "device", backend)
    np.testing.assert_allclose(device.eigenvalues, host.eigenvalues, atol=1e-8)
    assert principal_angles(device.coords, host.coords).max() < 1e-5


def test_an_unknown_eigensolver_is_an_error():
    with pytest.raises(TigragError, match="eigensolver must be one of host, device"):
        spectral_coordinates(random_graph([40]), 4, "gpu")


# --- the stage on an index ------------------------------------------------------------------------

def long_passages():
    """Passages of 9 to 14 sentences: two or three chunks each (s = 6, o = 2)."""
    names = ["Mirela Vantz", "Korvath", "Oskar Helm", "Port Elsin", "Marta Quell"]
    passages = []
    for p, name in enumerate(names):
        sentences = [f"{name} is noted in record {p}-{s}, near {names[(p + s) % 5]}." for s in range(9 + p)]
        passages.append(Passage(name, " ".join(sentences), f"d{p}"))
    return passages


@pytest.fixture(scope="module")
def staged():
    encoder = load_encoder(CONFIG.encoder)
    return build_index(long_passages(), CONFIG, encoder=encoder, entity_extractor=string_entities,
                       methods=("tigrag", "spectrag"))


def test_build_index_builds_the_stage(staged):
    stage = staged.spectrag
    n = staged.n_chunks
    assert n == 16 and stage.weights.shape == (n, n) and stage.coords.shape == (n, 32)
    assert stage.eigenvalues.shape == (33,) and stage.chunk_tokens.shape == (n,)
    assert stage.weights.dtype == np.float32 and (stage.weights != stage.weights.T).nnz == 0
    assert stage.stats["signals"]["adjacency"]["edges"] == 11  # passages of 3, 3, 3, 3 and 4 chunks
    assert stage.stats["signals"]["question"]["dropped"] and stage.stats["signals"]["section"]["edges"] == 0
    loops = stage.stats["self_loops"]
    assert loops == np.count_nonzero(stage.weights.diagonal())
    assert stage.stats["edges_kept"] == (stage.weights.nnz - loops) // 2 >= 11  # adjacency alone reaches .10
    assert stage.stats["format"] == 2
    assert set(stage.stats["seconds"]) >= {"semantic", "entity", "combine", "spectral", "tokens"}
    assert "spectrag" in staged.timings
    np.testing.assert_array_equal(stage.chunk_tokens, count_tokens(staged.chunk_texts))


def test_token_counts_are_cl100k():
    assert count_tokens(["hello world", "", "<|endoftext|>"]).tolist() == [2, 0, 7]


def test_check_methods():
    assert check_methods("tigrag, spectrag") == ("tigrag", "spectrag")
    with pytest.raises(TigragError, match="unknown method.*'lightrag'.*known: naiverag, bm25, hybrid, bm25passages, tigrag, spectrag"):
        check_methods(["lightrag"])


def test_save_load_round_trip_and_damage(staged, tmp_path):
    path = save_index(staged, tmp_path / "idx")
    loaded = load_index(path)
    stage, back = staged.spectrag, loaded.spectrag
    assert (back.weights != stage.weights).nnz == 0 and back.weights.shape == stage.weights.shape
    np.testing.assert_array_equal(back.coords, stage.coords)
    np.testing.assert_array_equal(back.eigenvalues, stage.eigenvalues)
    np.testing.assert_array_equal(back.chunk_tokens, stage.chunk_tokens)
    assert back.stats == json.loads(json.dumps(stage.stats))
    manifest = json.loads((generation_folder(path) / "manifest.json").read_text())
    assert manifest["format_version"] == 3 and manifest["methods"]["spectrag"]["config"]["weights"] == "config2"
    assert "spectrag_coords.npy" in manifest["files"]
    # damage: a flipped byte fails the checksum; a well-formed file of the wrong shape is named
    coords = generation_folder(path) / "spectrag_coords.npy"
    data = bytearray(coords.read_bytes())
    data[-1] ^= 0xFF
    coords.write_bytes(bytes(data))
    damaged = load_index(path)  # the base index loads: the stage is read when SpectRAG is used
    assert damaged.n_chunks == staged.n_chunks and damaged.has_stage("spectrag")
    with pytest.raises(IndexFormatError, match="spectrag_coords.npy: checksum mismatch"):
        damaged.stage("spectrag")
    np.save(coords, np.zeros((staged.n_chunks, 5), dtype=np.float32))
    manifest["files"]["spectrag_coords.npy"] = {"sha256": sha256_file(coords), "bytes": coords.stat().st_size}
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match=r"spectrag_coords.npy: float32 array of shape \(16, 5\), expected "
                                               r"\(16, 32\)"):
        load_index(path).stage("spectrag")


def test_a_stage_of_the_older_format_is_rebuilt_by_extend(staged, tmp_path, capsys):
    """A stage written before issue 22 (no stage format in its statistics) loads as an error naming the
    command that rebuilds it; the base index and the other methods are unaffected."""
    from gpu_tigrag.cli import main

    path = save_index(staged, tmp_path / "old")
    manifest = json.loads((generation_folder(path) / "manifest.json").read_text())
    del manifest["methods"]["spectrag"]["stats"]["format"]
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    old = load_index(path)
    assert old.n_chunks == staged.n_chunks and old.has_stage("spectrag")
    with pytest.raises(IndexFormatError, match=r"older gpu_tigrag \(stage format 1.*tigrag extend INDEX --methods "
                                               r"spectrag"):
        old.stage("spectrag")
    assert main(["extend", str(path), "--methods", "spectrag", "-q"]) == 0
    rebuilt = load_index(path).spectrag
    assert rebuilt.stats["format"] == 2 and (rebuilt.weights != staged.spectrag.weights).nnz == 0


def test_an_index_without_the_stage_loads_with_none(staged, tmp_path):

    plain = staged.with_stage("spectrag", None)
    loaded = load_index(save_index(plain, tmp_path / "plain"))
    assert loaded.spectrag is None
    assert "methods" not in read_manifest(tmp_path / "plain")
    assert index_fingerprint(plain) != index_fingerprint(staged)  # the fingerprint covers the stage's arrays


def test_add_method_returns_a_copy_with_the_stage(staged):

    plain = staged.with_stage("spectrag", None)
    grown = add_method(plain, "spectrag", config=SpectragIndexConfig(weights="config1"))
    assert plain.spectrag is None and grown.spectrag is not None
    assert grown.config.spectrag.weights == "config1" and grown.spectrag.stats["weights"] == "config1"
    with pytest.raises(TigragError, match="tigrag needs only the base index"):
        add_method(plain, "tigrag")


def test_add_passages_rebuilds_the_stage(staged):
    encoder = load_encoder(CONFIG.encoder)
    passages = long_passages()
    base = build_index(passages[:3], CONFIG, encoder=encoder, entity_extractor=string_entities,
                       methods=("tigrag", "spectrag"))
    with logged_messages() as messages:
        grown = add_passages(base, passages[3:], encoder=encoder, entity_extractor=string_entities)
    assert any("rebuilt the SpectRAG stage over the grown index (16 chunks): the graph is global" in m for m in messages)
    assert grown.spectrag.n_chunks == grown.n_chunks == staged.n_chunks > base.spectrag.n_chunks
    assert (grown.spectrag.weights != staged.spectrag.weights).nnz == 0  # as a full build
    np.testing.assert_allclose(grown.spectrag.eigenvalues, staged.spectrag.eigenvalues, atol=1e-9, equal_nan=True)
    assert add_passages(build_index(passages[:3], CONFIG, encoder=encoder, entity_extractor=string_entities),
                        passages[3:], encoder=encoder, entity_extractor=string_entities).spectrag is None


def test_streaming_build_with_the_stage(tmp_path, staged):
    from gpu_tigrag.index.stream import build_index_streaming

    corpus = tmp_path / "long.json"
    corpus.write_text(json.dumps([{"title": p.title, "text": p.text, "id": p.doc_id} for p in long_passages()]))
    streamed = build_index_streaming([corpus], tmp_path / "idx", CONFIG, partition_size=2, workers=1,
                                     encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities,
                                     methods=("tigrag", "spectrag"))
    assert (streamed.spectrag.weights != staged.spectrag.weights).nnz == 0
    assert load_index(tmp_path / "idx").spectrag is not None


# --- command line -------------------------------------------------------------------------------

def test_cli_index_with_spectrag_and_extend(tmp_path, capsys):
    from gpu_tigrag.cli import main

    fast = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
    out = tmp_path / "idx"
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(out), "--methods", "tigrag,spectrag", *fast]) == 0
    assert "SpectRAG chunk graph:" in capsys.readouterr().out
    assert load_index(out).spectrag.coords.shape == (30, 32)
    plain = tmp_path / "plain"
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(plain), *fast]) == 0
    assert load_index(plain).spectrag is None
    assert main(["extend", str(plain), "--methods", "spectrag", "--set", "spectrag.weights=config1",
                 "--set", "spectrag.dimensions=4", "-q"]) == 0
    assert "added spectrag" in capsys.readouterr().out
    extended = load_index(plain)
    assert extended.config.spectrag.weights == "config1" and extended.spectrag.coords.shape == (30, 4)
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(tmp_path / "x"), "--methods", "tigrag,graphrag",
                 *fast]) == 2
    assert main(["extend", str(plain), "--methods", "spectrag", "--set", "w=5", "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown method(s) 'graphrag'; known: naiverag, bm25, hybrid, bm25passages, tigrag, spectrag" in err and "spectrag.*" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 2


def test_the_eigensolver_is_a_setting_of_the_stage(tmp_path, capsys, monkeypatch):
    """spectrag.eigensolver reaches the solver and is recorded with the stage's settings; `extend
    --eigensolver` is its older spelling; a value it does not know is a one-line error."""
    import gpu_tigrag.methods.spectrag.chunk_graph as chunk_graph
    from gpu_tigrag.cli import main

    solvers = []
    solve = chunk_graph.spectral_coordinates
    monkeypatch.setattr(chunk_graph, "spectral_coordinates",
                        lambda weights, dims, solver, *rest: solvers.append(solver) or solve(weights, dims, solver, *rest))

    fast = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
    out = tmp_path / "idx"
    assert main(["index", str(EXAMPLES / "corpus.json"), "-o", str(out), "--methods", "tigrag,spectrag",
                 "--set", "spectrag.eigensolver=device", "--set", "spectrag.dimensions=4", *fast]) == 0
    built = load_index(out)
    assert built.config.spectrag.eigensolver == "device"
    assert main(["extend", str(out), "--methods", "spectrag", "--eigensolver", "host", "-q"]) == 0
    extended = load_index(out)
    assert extended.config.spectrag.eigensolver == "host" and solvers == ["device", "host"]
    capsys.readouterr()
    assert main(["extend", str(out), "--methods", "spectrag", "--set", "spectrag.eigensolver=gpu", "-q"]) == 2
    assert "spectrag.eigensolver must be 'host' or 'device', got 'gpu'" in capsys.readouterr().err



def test_calibrated_weights_share_the_budget_by_edges_and_dispersion():
    import scipy.sparse

    from gpu_tigrag.methods.spectrag.chunk_graph import calibrated_weights

    def upper(values):  # a symmetric signal whose upper-triangle scores are `values`
        n = len(values) + 1
        m = scipy.sparse.coo_matrix((values, (list(range(len(values))), list(range(1, n)))), shape=(n, n))
        return (m + m.T).tocsr()

    signals = {"semantic": upper([0.8, 0.9, 1.0]), "entity": upper([1.0, 1.0]), "adjacency": upper([1.0]),
               "section": None, "question": None, "citation": None}
    weights = calibrated_weights(signals)
    assert weights["adjacency"] == 0.10  # fixed at configuration 2's prior
    assert weights["semantic"] == pytest.approx(0.90) and weights["entity"] == 0.0  # constant scores carry nothing
    signals["entity"] = upper([1.0, 3.0])  # √2 · 0.5 = √3 · std(0, .5, 1): the same importance
    weights = calibrated_weights(signals)
    assert weights["semantic"] == pytest.approx(0.45) and weights["entity"] == pytest.approx(0.45)
    assert sum(weights.values()) == pytest.approx(1.0)
    nothing = {name: None for name in signals}
    from gpu_tigrag.methods.spectrag.config import SIGNAL_WEIGHTS

    assert calibrated_weights(nothing) == SIGNAL_WEIGHTS["config2"]
