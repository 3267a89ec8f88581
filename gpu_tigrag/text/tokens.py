"""Valid tokens, eq. 3.3: Treebank words, lower-cased, minus NLTK English stopwords, kept by φ.

φ (the paper gives only its intent) is read here as: a token is valid when it is at
least `min_length` characters long and either contains a letter (words, "covid-19") or
is a number with at least `min_number_digits` digits (years, large values). Pure
punctuation, short tokens, small numbers and Treebank contraction pieces ("'s", "n't")
are dropped.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources
from typing import Iterable, Sequence

import numpy as np

from ..config_types import TokenConfig

_NUMBER = re.compile(r"^[0-9][0-9.,]*$")
_HAS_LETTER = re.compile(r"[^\W\d_]")


@lru_cache(maxsize=1)
def english_stopwords() -> frozenset[str]:
    """NLTK's English stopword list (179 words), shipped with the package."""
    text = resources.files("gpu_tigrag.text").joinpath("stopwords_en.txt").read_text(encoding="utf-8")
    return frozenset(w.strip() for w in text.splitlines() if w.strip())


@lru_cache(maxsize=1)
def _treebank():
    from .nltk_light import nltk_module

    return nltk_module("nltk.tokenize.treebank").TreebankWordTokenizer()


def treebank_words(text: str) -> list[str]:
    """All Treebank word tokens of `text` (no filtering), for measuring context sizes."""
    return _treebank().tokenize(text)


def is_valid_token(token: str, config: TokenConfig = TokenConfig()) -> bool:
    """φ(token) ∧ token ∉ stopwords, for an already lower-cased token."""
    if len(token) < config.min_length or token in english_stopwords():
        return False
    if token.startswith("'") or token == "n't":
        return False
    if _NUMBER.match(token):
        return sum(ch.isdigit() for ch in token) >= config.min_number_digits
    return bool(_HAS_LETTER.search(token))


_EDGE_PUNCT = ".-'"


def sentence_tokens(sentence: str, config: TokenConfig = TokenConfig()) -> list[str]:
    """Valid tokens of one sentence, in order (duplicates kept: the token graph's windows need order).

    Treebank splits only a sentence-final period, so text goes in one sentence at a time
    (as `nltk.word_tokenize` does); leftover edge periods and hyphens ("ii.", "lay-") are
    stripped so that corpus and query tokens agree.
    """
    words = (w.strip(_EDGE_PUNCT) for w in _treebank().tokenize(sentence.lower()))
    return [w for w in words if is_valid_token(w, config)]


def valid_tokens(text: str, config: TokenConfig = TokenConfig(), language: str = "english") -> list[str]:
    """Valid tokens of free text (a query): punkt sentences, then `sentence_tokens` each."""
    from .sentences import split_sentences

    return [tok for sentence in split_sentences(text, language) for tok in sentence_tokens(sentence, config)]


class Vocabulary:
    """Token <-> int32 id. Ids follow sorted token order, so any partitioning gives the same ids."""

    def __init__(self, tokens: Sequence[str]):
        self.tokens: list[str] = list(tokens)
        self._ids = {t: i for i, t in enumerate(self.tokens)}
        if len(self._ids) != len(self.tokens):
            raise ValueError("vocabulary tokens must be unique")

    @classmethod
    def from_sequences(cls, sequences: Iterable[Sequence[str]]) -> "Vocabulary":
        seen: set[str] = set()
        for seq in sequences:
            seen.update(seq)
        return cls(sorted(seen))

    def __len__(self) -> int:
        return len(self.tokens)

    def get(self, token: str) -> int | None:
        return self._ids.get(token)

    def encode(self, tokens: Sequence[str]) -> np.ndarray:
        """int32 ids of the tokens that are in the vocabulary, in order."""
        ids = [self._ids[t] for t in tokens if t in self._ids]
        return np.asarray(ids, dtype=np.int32)


def token_csr(sequences: Sequence[Sequence[str]], vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    """CSR layout (indptr int64, ids int32) of the token-id sequence of every chunk."""
    lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
    indptr = np.zeros(len(sequences) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    ids = np.empty(int(indptr[-1]), dtype=np.int32)
    lookup = vocab._ids
    pos = 0
    for seq in sequences:
        for tok in seq:
            ids[pos] = lookup[tok]
            pos += 1
    return indptr, ids
