"""Title linking: find the passages whose title a text mentions, through a token index of titles.

Wikipedia-style corpora (2Wiki, HotpotQA, MuSiQue) name each passage after its subject, and a
multi-hop question's bridging entity is very often exactly the title of the passage the next
hop needs. The table maps normalised titles (accents folded, lower-cased, punctuation dropped)
to passage ids; a title with a trailing disambiguation ("Lloyd (film)") is also reachable by
its bare name when no passage has that bare name as its full title.

A text is scanned once, leftmost-longest, with a dictionary lookup per candidate span (at
most `max_span` tokens), so the cost is linear in the text and independent of the number of
titles. A mention must start with a capital letter or a digit in the original text and hold
at least one non-stopword, so "mother" or "The" does not link to a film of that name.
The table is derived from the index's stored titles when a retriever is built, so an index
grown by `add` or built by `--stream` can never hold a stale copy.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse

from .tokens import english_stopwords

_WORD = re.compile(r"[^\W_]+")
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")
ARTICLES = frozenset({"the", "a", "an"})


def fold(text: str) -> str:
    """Unicode-normalised text without accents ("Aschenbrödel" -> "Aschenbrodel"). ASCII text is its own
    NFKD form and holds no combining mark, so it is returned as it is (most chunks: no pass per character)."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


@lru_cache(maxsize=1 << 16)
def title_tokens(text: str) -> tuple[str, ...]:
    """The normalised word tokens under which titles and mentions are compared (remembered: a batch asks again
    for the same entities, hop after hop, and a retriever for every title of its index)."""
    return tuple(w.lower() for w in _WORD.findall(fold(text)))


def normalise_title(text: str) -> str:
    return " ".join(title_tokens(text))


def entity_key(text: str) -> str:
    """Identity of a bridging entity: its normalised text without a leading article, so that
    "the Selvan Sea" and "Selvan Sea" are one candidate."""
    tokens = title_tokens(text)
    if len(tokens) > 1 and tokens[0] in ARTICLES:
        tokens = tokens[1:]
    return " ".join(tokens)


class TitleIndex:
    """Normalised passage titles -> passage ids, with leftmost-longest mention search."""

    def __init__(self, titles: Sequence[str], max_span: int = 12):
        stop = english_stopwords()
        full: dict[tuple[str, ...], list[int]] = {}
        bare: dict[tuple[str, ...], list[int]] = {}
        for passage, title in enumerate(titles):
            key = title_tokens(title)
            if key:
                full.setdefault(key, []).append(passage)
            stripped = title_tokens(_DISAMBIGUATION.sub("", title))
            if stripped and stripped != key:
                bare.setdefault(stripped, []).append(passage)
        table: dict[tuple[str, ...], np.ndarray] = {}
        for key, passages in (*bare.items(), *full.items()):  # a full title overrides a bare name
            if len(key) <= max_span and any(t not in stop for t in key):
                table[key] = np.asarray(passages, dtype=np.int64)
        self.table = table
        self.max_span = max(map(len, table), default=0)
        self.prefixes = {key[:n] for key in table for n in range(1, len(key))}

    def __len__(self) -> int:
        return len(self.table)

    def lookup(self, name: str) -> np.ndarray:
        """Passages whose (full or bare) title is exactly `name` after normalisation; a leading
        article that NER kept ("the Lisbon Film Festival") is dropped when the whole name is no title."""
        key = title_tokens(name)
        found = self.table.get(key)
        if found is None and len(key) > 1 and key[0] in ARTICLES:
            found = self.table.get(key[1:])
        return found if found is not None else np.zeros(0, dtype=np.int64)

    def mentions(self, text: str) -> list[int]:
        """Passages whose title the text mentions, in reading order, without repeats."""
        words = [(m.group(), m.group().lower()) for m in _WORD.finditer(fold(text))]
        found: list[int] = []
        i = 0
        while i < len(words):
            best = 0
            if words[i][0][0].isupper() or words[i][0][0].isdigit():
                key: tuple[str, ...] = ()
                for j in range(i, min(len(words), i + self.max_span)):
                    key = key + (words[j][1],)
                    if key in self.table:
                        best = j + 1 - i
                    if key not in self.prefixes:
                        break
            if best:
                found.extend(int(p) for p in self.table[tuple(w for _, w in words[i:i + best])])
                i += best
            else:
                i += 1
        return list(dict.fromkeys(found))

    def mentions_many(self, texts: Iterable[str]) -> list[list[int]]:
        return [self.mentions(t) for t in texts]


def chunk_bodies(chunk_texts: Sequence[str], chunk_passage: np.ndarray, titles: Sequence[str],
                 title_in_chunk: bool) -> Iterable[str]:
    """Chunk texts without the title line that `title_in_chunk` puts at their head."""
    for text, passage in zip(chunk_texts, chunk_passage):
        title = titles[int(passage)]
        yield text[len(title) + 1:] if title_in_chunk and title and text.startswith(title + "\n") else text


def forward_title_links(chunk_texts: Sequence[str], chunk_passage: np.ndarray, titles: Sequence[str],
                        title_in_chunk: bool) -> scipy.sparse.csr_matrix:
    """Directed title links: row c holds every chunk of each other passage whose title c's body names
    (TitleIndex: capitalised, leftmost-longest mentions), score 1, no self pairs: what chunk c's utility
    questions would ask about ("who is the director it names?")."""
    n = len(chunk_texts)
    chunk_passage = np.asarray(chunk_passage, dtype=np.int64)
    order = np.argsort(chunk_passage, kind="stable")
    indptr = np.zeros(len(titles) + 1, dtype=np.int64)
    np.cumsum(np.bincount(chunk_passage, minlength=len(titles)), out=indptr[1:])
    index = TitleIndex(titles)
    rows, cols = [], []
    for c, body in enumerate(chunk_bodies(chunk_texts, chunk_passage, titles, title_in_chunk)):
        for p in index.mentions(body):
            if p != chunk_passage[c]:
                members = order[indptr[p]:indptr[p + 1]]
                rows.append(np.full(members.size, c, dtype=np.int64))
                cols.append(members)
    if not rows:
        return scipy.sparse.csr_matrix((n, n), dtype=np.float32)
    r, c = np.concatenate(rows), np.concatenate(cols)
    matrix = scipy.sparse.coo_matrix((np.ones(r.size, dtype=np.float32), (r, c)), shape=(n, n)).tocsr()
    matrix.data[:] = 1.0  # a pair named twice stays 1
    matrix.sort_indices()
    return matrix
