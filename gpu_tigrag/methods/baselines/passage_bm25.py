"""BM25 as the field's toolkits score it: whole passages, word tokens, English stop words.

The `BM25` baseline is the paper's: BM25 over the valid tokens of the token graph (φ: three or more
characters, numbers of three or more digits, NLTK's 179 stop words), one score per chunk, the arrays
TIGRAG's PPR-weighted formula (eq. 3.6) multiplies. A reviewer's BM25 baseline is another thing: bm25s,
Pyserini or Elasticsearch score whole documents over their own tokens. On SciFact the chunk and token
choices cost the paper's BM25 3.2 points of nDCG@10 against bm25s (bench/results/bm25_parity.md), so
this module gives the baseline a reviewer expects, named apart (`BM25 passages`):

* a passage's text is the concatenation of its chunks (the index keeps chunks, not passages: a
  sentence that two overlapping chunks share counts twice; measured within 0.25 point of whole
  passages on SciFact);
* tokens: lower-cased runs of two or more word characters (`(?u)\\b\\w\\w+\\b`, as bm25s and
  scikit-learn), minus a stop-word list (`lucene`: Lucene's English analyser's 33 words, bm25s's `en`;
  `nltk`: NLTK's 179; `none`), optionally Snowball-stemmed (`english`, through PyStemmer);
* scores: idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)) (Lucene's, never negative) times
  tf / (tf + k1·(1 − b + b·|d| / avgdl)), summed over the query's tokens, repeats included; the
  (k1 + 1) factor of the textbook form is left out: a constant, it changes no ranking.

It is built from the index's chunk texts when a retriever first needs it (a second per 10,000 chunks:
no index stage to keep in step with `add` and `extend`) and kept for the process (`DeviceIndex`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Sequence

import numpy as np
import scipy.sparse

from ...errors import TigragError
from ...text.tokens import english_stopwords
from .config import STEMMERS, STOPWORD_LISTS  # the choices, declared with the settings

WORD = re.compile(r"(?u)\b\w\w+\b")
#: Lucene's English analyser's stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET; bm25s's "en")
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split())


def stopword_list(name: str) -> frozenset[str]:
    """The stop words of `name` (STOPWORD_LISTS)."""
    if name == "lucene":
        return LUCENE_STOPWORDS
    if name == "nltk":
        return english_stopwords()
    if name == "none":
        return frozenset()
    raise TigragError(f"bm25passages.stopwords must be one of {', '.join(STOPWORD_LISTS)}, got {name!r}")


@lru_cache(maxsize=4)
def _stemmer(name: str) -> Callable[[list[str]], list[str]] | None:
    if name == "none":
        return None
    if name not in STEMMERS:
        raise TigragError(f"bm25passages.stemmer must be one of {', '.join(STEMMERS)}, got {name!r}")
    try:
        import Stemmer
    except ImportError:
        raise TigragError("bm25passages.stemmer=english needs PyStemmer (`pip install PyStemmer`, the Snowball "
                          "stemmer bm25s uses); or leave it at none") from None
    return Stemmer.Stemmer(name).stemWords


def analyzer(stopwords: str, stemmer: str) -> Callable[[str], list[str]]:
    """text -> its tokens, in order, repeats kept (the module's notes)."""
    stop, stem = stopword_list(stopwords), _stemmer(stemmer)

    def tokens(text: str) -> list[str]:
        words = [w for w in WORD.findall(text.lower()) if w not in stop]
        return stem(words) if stem is not None else words

    return tokens


@dataclass
class PassageBM25:
    """BM25 of whole passages: `postings` (terms × passages, float32 CSR: a term's row holds the BM25
    weight of every passage it occurs in), the term table and the analyser that made them."""

    postings: scipy.sparse.csr_matrix
    terms: dict[str, int]
    tokens: Callable[[str], list[str]]

    @property
    def n_terms(self) -> int:
        return int(self.postings.shape[0])

    def query_terms(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's term ids (int64, repeats kept); a token the corpus lacks scores nothing and is left out."""
        return [np.asarray([self.terms[t] for t in self.tokens(text) if t in self.terms], dtype=np.int64)
                for text in texts]


def passage_texts(chunk_texts: Sequence[str], chunk_passage: np.ndarray, n_passages: int) -> list[str]:
    """Each passage's text: its chunks joined in chunk order (module notes)."""
    parts: list[list[str]] = [[] for _ in range(n_passages)]
    for text, passage in zip(chunk_texts, np.asarray(chunk_passage).tolist()):
        parts[passage].append(text)
    return [" ".join(p) for p in parts]


def build_passage_bm25(texts: Sequence[str], k1: float, b: float, stopwords: str, stemmer: str) -> PassageBM25:
    """The PassageBM25 of `texts` (one per passage) with the given parameters (module notes)."""
    tokens = analyzer(stopwords, stemmer)
    terms: dict[str, int] = {}
    ids: list[int] = []
    lengths = np.zeros(len(texts), dtype=np.int64)
    for i, text in enumerate(texts):
        found = [terms.setdefault(t, len(terms)) for t in tokens(text)]
        ids.extend(found)
        lengths[i] = len(found)
    rows = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    counts = scipy.sparse.csr_matrix((np.ones(len(ids), dtype=np.float64), (rows, np.asarray(ids, dtype=np.int64))),
                                     shape=(len(texts), len(terms)))
    counts.sum_duplicates()
    n = max(len(texts), 1)
    df = np.bincount(counts.indices, minlength=len(terms)).astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    average = max(float(lengths.mean()) if lengths.size else 0.0, 1e-9)
    coo = counts.tocoo()
    tf = coo.data
    weights = idf[coo.col] * tf / (tf + k1 * (1.0 - b + b * lengths[coo.row] / average))
    matrix = scipy.sparse.csr_matrix((weights.astype(np.float32), (coo.col, coo.row)), shape=(len(terms), len(texts)))
    matrix.sort_indices()
    return PassageBM25(matrix, terms, tokens)


def first_chunks(chunk_passage: np.ndarray, n_passages: int) -> np.ndarray:
    """int64: the first chunk of each passage (the chunk a passage-level ranking answers with)."""
    chunk_passage = np.asarray(chunk_passage, dtype=np.int64)
    first = np.full(n_passages, -1, dtype=np.int64)
    order = np.arange(chunk_passage.size, dtype=np.int64)[::-1]
    first[chunk_passage[::-1]] = order  # the last write per passage is its smallest chunk id
    return first


def passage_bm25_of(index: Any, settings: Any) -> PassageBM25:
    """The PassageBM25 of `index`'s passages under `settings` (`Bm25PassagesQueryConfig`)."""
    texts = passage_texts(index.chunk_texts, index.chunk_passage, len(index.passage_titles))
    return build_passage_bm25(texts, settings.k1, settings.b, settings.stopwords, settings.stemmer)
