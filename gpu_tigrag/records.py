"""Which field of a corpus or query record is its id, its text and its title: one table of keys
per field and one precedence rule, shared by every reader of records (`corpus.py`, the query
runs of `batch_run.py`, `evaluate/queries.py` and the BEIR queries of `evaluate/datasets.py`).

The rule: each field has an ordered table of keys, and the first key of the table that the
record has decides the field, whatever its value and whatever other keys of the table the
record also carries. For ids, `_id` comes before `id`: BEIR and the 2Wiki and HotpotQA query
files use `_id`, MuSiQue and the bundled example use `id`, no bundled file has both, and the
corpus and evaluation readers already preferred `_id` (only `tigrag run` preferred `id`).
After them comes the alias of the record kind: `idx` for passages (MuSiQue paragraphs), `qid`
for queries. A record without any id key gets the kind's fallback: a passage its title, a
query its position in the file.

| field | keys, in precedence order | when none is there |
|---|---|---|
| passage id | `_id`, `id`, `idx` | the title |
| passage text | `text`, `paragraph_text`, `contents` | error |
| passage title | `title` | `""` if the record has an id, else error |
| query id | `_id`, `id`, `qid` | the position (0-based) |
| query text | `question`, `text`, `query` | error |

Values: an id is a string or a number, kept as the number's own text in the file (7 -> "7",
1.00 -> "1.00", 10e-1 -> "10e-1": JSON numbers that are equal as values but written differently stay
distinct ids, and match a qrels file that writes them the same way); a null id is an error, as is a
null title (leave the field out instead). A JSON object that holds one key twice is an error naming
the key (JSON keeps only the last value: a passage of a `title -> text` file would vanish). A lone surrogate (JSON's "\ud800": half of a
UTF-16 pair, which UTF-8 cannot store and tokenizers refuse) in a text, title or query is
replaced by U+FFFD, as a UTF-8 decoder replaces an invalid byte, with one warning per file naming
the first record: the rest of the record is good text, and a corpus with one emoji cut in half
by a UTF-16 tool should still index. In an id it is an error (replacing could merge two ids). Passage text may be a list of
sentences (joined with spaces); a null passage text is an empty passage (skipped and counted by
`load_corpus`). Query text must be a string. Every error names the file and the record (the
`where` the caller passes, e.g. `corpus.json: record 3` or `queries.jsonl: line 7`) and what
was expected.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from typing import Any, Mapping, Sequence

from .errors import CorpusError

log = logging.getLogger(__name__)

#: the id keys of every record kind, in precedence order
ID_KEYS = ("_id", "id")
#: ids longer than this are refused when read (a 5,000-digit number is a mistake, not an id)
MAX_ID_CHARS = 1000
MAX_ID_DIGITS = 1000
MAX_ID_BITS = 3322  # 10**1000 < 2**3322
#: passage ids: the shared keys, then MuSiQue's paragraph index
PASSAGE_ID_KEYS = ID_KEYS + ("idx",)
#: query ids: the shared keys, then `qid`
QUERY_ID_KEYS = ID_KEYS + ("qid",)
#: passage text: plain and BEIR `text`, MuSiQue `paragraph_text`, Pyserini `contents`
PASSAGE_TEXT_KEYS = ("text", "paragraph_text", "contents")
#: query text: the QA sets' `question`, BEIR's `text`, `query`
QUERY_TEXT_KEYS = ("question", "text", "query")
TITLE_KEY = "title"
#: a lone surrogate: a code point of U+D800-U+DFFF, half of a UTF-16 pair (JSON "\ud800", or a byte
#: that is not UTF-8 in a command-line argument), which UTF-8 cannot store
_SURROGATE = re.compile("[\ud800-\udfff]")
#: the files whose lone surrogates were reported (one warning per file and process)
_REPAIRED_FILES: set[str] = set()


def replace_surrogates(text: str) -> tuple[str, int]:
    """`text` with each lone surrogate replaced by U+FFFD (what a UTF-8 decoder puts for an
    invalid sequence), and how many there were."""
    if text.isascii():
        return text, 0
    return _SURROGATE.subn("\ufffd", text)


def valid_text(value: str, where: str, key: str) -> str:
    """`value` with its lone surrogates replaced (`replace_surrogates`); the first record of a file
    (the part of `where` before ": ") that holds one is named in a warning."""
    fixed, count = replace_surrogates(value)
    if count:
        source = where.split(": ")[0]
        if source not in _REPAIRED_FILES:
            _REPAIRED_FILES.add(source)
            log.warning("%s: field %r holds %d lone surrogate(s) (invalid Unicode: half of a UTF-16 pair), replaced "
                        "by U+FFFD; later records of %s are repaired the same way without a warning",
                        where, key, count, source)
    return fixed


def first_key(record: Mapping[str, Any] | Sequence[str], keys: Sequence[str]) -> str | None:
    """The first of `keys` that `record` has (a mapping, or a list of column names), or None."""
    return next((key for key in keys if key in record), None)


def as_record(data: Any, where: str, expected: str) -> Mapping[str, Any]:
    """`data` if it is an object; otherwise an error naming `where` and what was `expected`."""
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: expected an object with {expected}, got {type(data).__name__}")
    return data


class JsonNumber(float):
    """A JSON number with a fraction or an exponent (`1.00`, `10e-1`), read as the float it is, that
    keeps the text it was written as: an id read from it is that text, so two numbers that are equal
    as floats but written differently stay two ids instead of becoming one ("1.0")."""

    __slots__ = ("text",)

    def __new__(cls, text: str) -> "JsonNumber":
        number = super().__new__(cls, text)
        number.text = text
        return number


class _DuplicateKey(ValueError):
    def __init__(self, key: str, first: int, second: int):
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's dict; a key given twice raises (JSON would keep the last value silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: dict[str, int] = {}
        for position, (key, _) in enumerate(pairs):
            if key in seen:
                raise _DuplicateKey(key, seen[key], position)
            seen[key] = position
    return out


def _id(record: Mapping[str, Any], keys: Sequence[str], where: str) -> str | None:
    key = first_key(record, keys)
    if key is None:
        return None
    return id_text(record[key], where, key)


def id_text(value: Any, where: str, key: str) -> str:
    """An id (a passage's, a query's, a gold passage's) as text: a string as it is, a number as it was
    written; null, a list, an object, a boolean, a non-finite or too long number are errors naming
    `where` and the field `key`."""
    if value is None:
        raise CorpusError(f"{where}: field {key!r} is null (expected a string or a number; leave the field out "
                          "if there is none)")
    if isinstance(value, (dict, list, bool)):
        raise CorpusError(f"{where}: field {key!r} must be a string or a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        # JSON's 1e400 reads as inf, NaN as nan: two different ids would become one string
        raise CorpusError(f"{where}: field {key!r} is {value!r}, not a finite number; write the id as a string")
    if isinstance(value, int) and value.bit_length() > MAX_ID_BITS:
        raise CorpusError(f"{where}: field {key!r} is a number of more than {MAX_ID_DIGITS} digits; write the id "
                          "as a string")
    text = value.text if isinstance(value, JsonNumber) else str(value)
    if replace_surrogates(text)[1]:
        raise CorpusError(f"{where}: field {key!r} holds a lone surrogate (invalid Unicode: half of a UTF-16 pair), "
                          "which cannot be stored; write the id as valid text (replacing it could merge two ids)")
    if len(text) > MAX_ID_CHARS:
        raise CorpusError(f"{where}: field {key!r} is {len(text):,} characters long; ids are at most "
                          f"{MAX_ID_CHARS:,}")
    return text


def parse_json(text: str | bytes, where: str, one_line: bool = False) -> Any:
    """`json.loads(text)`, every way it can fail (malformed, numbers of too many digits, nesting
    deeper than Python's recursion limit, an object holding one key twice) a CorpusError naming
    `where` (`one_line`: a JSONL line, whose position `where` already names). Numbers with a
    fraction or exponent are JsonNumber floats, which keep their text for ids."""
    try:
        return json.loads(text, parse_float=JsonNumber, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise CorpusError(f"{where}: an object holds the key {exc.key!r} twice (its entries {exc.first} and "
                          f"{exc.second}); JSON keeps only the last value, so the first would be lost: give each "
                          "key once") from None
    except json.JSONDecodeError as exc:
        if one_line:
            raise CorpusError(f"{where}: malformed JSON ({exc.msg}, column {exc.colno})") from None
        raise CorpusError(f"{where}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise CorpusError(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer literal of more than 4,300 digits
        if "integer string conversion" in str(exc):  # Python's advice (sys.set_int_max_str_digits) is not the user's
            raise CorpusError(f"{where}: unreadable JSON: a number of more than {sys.get_int_max_str_digits():,} "
                              f"digits (an id is at most {MAX_ID_CHARS:,} characters)") from None
        raise CorpusError(f"{where}: unreadable JSON ({exc})") from None


def string_value(value: Any, where: str, key: str) -> str:
    """A string field, or a list of strings joined with spaces; null is the empty string."""
    if value is None:
        return ""
    if isinstance(value, str):
        return valid_text(value, where, key)
    if isinstance(value, list) and all(isinstance(s, str) for s in value):
        return valid_text(" ".join(s.strip() for s in value), where, key)
    raise CorpusError(f"{where}: field {key!r} must be a string (or list of strings), got {type(value).__name__}")


def passage_id(record: Mapping[str, Any], where: str) -> str | None:
    """The record's own passage id (`_id`, `id`, `idx`, first present), or None when it has none."""
    return _id(record, PASSAGE_ID_KEYS, where)


def passage_text(record: Mapping[str, Any], where: str) -> str:
    """The passage text (`text`, `paragraph_text`, `contents`, first present), not stripped."""
    key = first_key(record, PASSAGE_TEXT_KEYS)
    if key is None:
        raise _missing_text(record, where)
    return string_value(record[key], where, key)


def _missing_text(record: Mapping[str, Any], where: str) -> CorpusError:
    return CorpusError(f"{where}: missing field 'text' (found fields: {', '.join(sorted(record)) or 'none'})")


def passage_title(record: Mapping[str, Any], where: str) -> str:
    """The passage title; a record without one must have an id (BEIR-style records), and its
    title is then empty."""
    if TITLE_KEY not in record:
        if first_key(record, PASSAGE_ID_KEYS) is None:
            raise CorpusError(f"{where}: missing field 'title'")
        return ""
    if record[TITLE_KEY] is None:
        raise CorpusError(f"{where}: field 'title' is null (expected a string; leave the field out if there is none)")
    return string_value(record[TITLE_KEY], where, TITLE_KEY)


def passage_fields(record: Mapping[str, Any], where: str) -> tuple[str, str, str | None]:
    """(title, text, id or None) of a passage record, not stripped. A missing text is reported
    before a missing or null title."""
    key = first_key(record, PASSAGE_TEXT_KEYS)
    if key is None:
        raise _missing_text(record, where)
    title = passage_title(record, where)
    return title, string_value(record[key], where, key), passage_id(record, where)


def query_id(record: Mapping[str, Any], where: str, position: int | None) -> str:
    """The query id (`_id`, `id`, `qid`, first present); without one, `position` as a string, or an
    error when `position` is None (BEIR queries, which qrels name by id)."""
    qid = _id(record, QUERY_ID_KEYS, where)
    if qid is not None:
        return qid
    if position is None:
        raise CorpusError(f"{where}: missing field '_id' (the query's id, which the qrels refer to)")
    return str(position)


class UniqueQueryIds:
    """Query ids seen so far in one question file, each with the record that had it first: a second
    query with an earlier one's id is a CorpusError naming both records (a run, qrels or per-query
    table names each query by its id, so two queries of one id would merge in any scorer)."""

    def __init__(self) -> None:
        self._first: dict[str, str] = {}

    def add(self, qid: str, where: str) -> None:
        earlier = self._first.setdefault(qid, where)
        if earlier is not where:
            raise CorpusError(f"{where}: query id {qid!r} is also the id of {earlier}; query ids must be unique: "
                              "runs, qrels and per-query tables name each query by its id (a record without an id "
                              "is known by its position)")


def query_text(record: Mapping[str, Any], where: str) -> str:
    """The query text (`question`, `text`, `query`, first present), not stripped; it must be a string."""
    key = first_key(record, QUERY_TEXT_KEYS)
    if key is None:
        raise CorpusError(f"{where}: missing field 'question' (or 'text')")
    value = record[key]
    if not isinstance(value, str):
        raise CorpusError(f"{where}: field {key!r} must be a string, got {type(value).__name__}")
    return valid_text(value, where, key)
