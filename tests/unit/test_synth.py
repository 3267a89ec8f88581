"""gpu_tigrag/synth.py: reproducible Zipf text corpora that the whole pipeline can read, and Zipf token-id
arrays for the index stages (the command line, bench/synth.py, runs in tests/interface/test_bench.py)."""

import numpy as np

from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.synth import passages, word, write_corpus, zipf_token_csr


def test_synthetic_corpus_is_reproducible_and_loads(tmp_path):
    outputs = []
    for name in ("a.jsonl", "b.jsonl", "c.parquet"):
        assert write_corpus(tmp_path / name, passages(300, seed=3)) == 300
        outputs.append(tmp_path / name)
    assert outputs[0].read_bytes() == outputs[1].read_bytes()
    loaded = load_corpus(outputs[0])
    assert len(loaded) == 300 and all(p.text.startswith(p.title) for p in loaded)
    assert [p.text for p in load_corpus(outputs[2])] == [p.text for p in loaded]
    assert [p["text"] for p in passages(300, seed=4)] != [p.text for p in loaded]  # the seed matters


def test_words_are_unique_per_rank():
    words = [word(rank) for rank in range(5000)]
    assert len(set(words)) == len(words) and min(map(len, words)) >= 4


def test_zipf_token_csr_is_reproducible_and_in_range():
    indptr, ids = zipf_token_csr(np, 500, 1000, 20, seed=1)
    assert indptr.dtype == np.int64 and ids.dtype == np.int32 and indptr[0] == 0 and indptr[-1] == ids.size
    assert (np.diff(indptr) >= 1).all() and 0 <= ids.min() and ids.max() < 1000
    again = zipf_token_csr(np, 500, 1000, 20, seed=1)
    assert np.array_equal(indptr, again[0]) and np.array_equal(ids, again[1])
    assert np.bincount(ids)[0] > np.bincount(ids, minlength=1000)[500:].mean()  # Zipf: rank 0 the most frequent
