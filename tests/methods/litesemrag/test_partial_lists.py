"""LiteSemRAG's partial-match lists: the phrases holding every word of a span (`_containing`), by galloping
intersections (kernels/sorted_sets.py) that give `np.intersect1d`'s answer."""

import numpy as np

from gpu_tigrag.kernels.sorted_sets import intersect_sorted
from gpu_tigrag.methods.litesemrag.retriever import _containing


def test_intersections_are_numpys():
    rng = np.random.default_rng(0)
    for trial in range(200):
        a = np.unique(rng.integers(0, rng.integers(1, 3000), rng.integers(0, 300)))
        b = np.unique(rng.integers(0, rng.integers(1, 3000), rng.integers(0, 2000)))
        for x, y in ((a, b), (b, a)):
            got = intersect_sorted(x, y)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, np.intersect1d(x, y, assume_unique=True), err_msg=str(trial))


def test_containing_intersects_every_word_and_drops_the_span_itself():
    phrases = {"new": np.array([1, 4, 7, 9]), "york": np.array([4, 7, 8]), "city": np.array([0, 4, 9])}
    assert _containing(phrases, "new york", -1).tolist() == [4, 7]
    assert _containing(phrases, "new york", 7).tolist() == [4]
    assert _containing(phrases, "york new city", -1).tolist() == [4]
    assert _containing(phrases, "new", 9).tolist() == [1, 4, 7]
    assert _containing(phrases, "new jersey", -1).tolist() == []  # a word in no phrase
    assert _containing(phrases, "york city", -1).tolist() == [4]
    assert _containing(phrases, "", -1).tolist() == []
