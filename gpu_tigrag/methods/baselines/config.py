"""The query settings of the `BM25 passages` baseline (`RetrievalConfig.bm25passages`): bm25s's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from ...config_types import CheckedConfig, require, setting
from ...config_types import MAX_K1


#: the values of `bm25passages.stopwords` and `bm25passages.stemmer` (passage_bm25.py implements them)
STOPWORD_LISTS = ("lucene", "nltk", "none")
STEMMERS = ("none", "english")


@dataclass(frozen=True)
class Bm25PassagesQueryConfig(CheckedConfig):
    """BM25 of whole passages over word tokens (methods/baselines/passage_bm25.py); k1 and b as bm25s."""

    k1: float = setting(1.5, 'term-frequency saturation (bm25s 1.5; Pyserini\'s BEIR runs 0.9)', bounds=(0.0, MAX_K1))
    b: float = setting(0.75, 'length normalisation (bm25s 0.75; Pyserini\'s BEIR runs 0.4)', bounds=(0.0, 1.0))
    stopwords: str = setting("lucene", 'stop words: "lucene" (Lucene\'s English 33, bm25s\'s "en"), "nltk" (179), "none"')
    stemmer: str = setting("none", '"none", or "english" (Snowball, through PyStemmer)')

    def _check(self) -> None:
        require(self.stopwords in STOPWORD_LISTS,
                f"bm25passages.stopwords must be one of {', '.join(STOPWORD_LISTS)}, got {self.stopwords!r}")
        require(self.stemmer in STEMMERS, f"bm25passages.stemmer must be one of {', '.join(STEMMERS)}, got {self.stemmer!r}")
