import numpy as np
import pytest

from gpu_tigrag.config import ChunkConfig, TokenConfig
from gpu_tigrag.corpus import Passage
from gpu_tigrag.text.chunking import chunk_sentences, window_starts
from gpu_tigrag.text.pipeline import build_chunks
from gpu_tigrag.text.sentences import split_sentences
from gpu_tigrag.text.tokens import is_valid_token, sentence_tokens, valid_tokens


@pytest.mark.parametrize("n,starts", [(0, []), (1, [0]), (6, [0]), (7, [0, 4]), (10, [0, 4, 8]), (12, [0, 4, 8])])
def test_window_starts_follow_eq_3_1(n, starts):
    assert list(window_starts(n, 6, 4)) == starts


def test_chunks_overlap_by_o_sentences():
    sentences = [f"S{i}." for i in range(10)]
    chunks = chunk_sentences(sentences, 6, 2)
    assert chunks == ["S0. S1. S2. S3. S4. S5.", "S4. S5. S6. S7. S8. S9.", "S8. S9."]


def test_punkt_keeps_abbreviations():
    text = "Dr. Smith went to Washington in Jan. 1950. He left the U.S. in 1960. Then he came back."
    assert split_sentences(text) == [
        "Dr. Smith went to Washington in Jan. 1950.", "He left the U.S. in 1960.", "Then he came back."]


@pytest.mark.parametrize("token,valid", [
    ("the", False),  # stopword
    ("an", False), ("ox", False),  # shorter than 3
    ("1950", True), ("1,000,000", True), ("875", True),  # years and large numbers kept
    ("12", False), ("1.5", False),  # small numbers dropped
    ("...", False), ("--", False),  # punctuation
    ("n't", False), ("'s", False),  # contraction pieces
    ("lotharingia", True), ("covid-19", True),
])
def test_validity_function(token, valid):
    assert is_valid_token(token, TokenConfig()) is valid


def test_tokens_lowercase_ordered_with_duplicates():
    assert sentence_tokens("The Queen met the queen of Lotharingia in 875.") == ["queen", "met", "queen", "lotharingia", "875"]
    assert valid_tokens("Lothair II. She was born.") == ["lothair", "born"]


def test_chunk_token_csr_matches_sequences():
    passages = [Passage("Alpha Title", "Red apples grow. Green apples fall.", "a"), Passage("Beta", "Blue sky.", "b")]
    chunks = build_chunks(passages, ChunkConfig(), TokenConfig())
    assert len(chunks) == 2 and chunks.passage_of_chunk.tolist() == [0, 1]
    assert chunks.texts[0] == "Alpha Title\nRed apples grow. Green apples fall."
    vocab = chunks.vocab.tokens
    assert vocab == sorted(vocab)
    decoded = [[vocab[i] for i in chunks.tokens_of(c)] for c in range(2)]
    assert decoded == [["alpha", "title", "red", "apples", "grow", "green", "apples", "fall"], ["beta", "blue", "sky"]]
    assert chunks.token_ids.dtype == np.int32 and chunks.token_indptr.dtype == np.int64
