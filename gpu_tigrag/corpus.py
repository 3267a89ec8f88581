"""Corpus loading: passages (title, text) from every format of the evaluation data
(docs/design-notes.md#evaluation-data) and of docs/input-formats.md.

Accepted inputs:
  * JSON list of objects with `title` and `text` (or `paragraph_text`, `contents`);
  * JSON object `title -> [sentences]` (HotpotQA) or `title -> text`;
  * JSONL, one object per line, including BEIR `corpus.jsonl` (`_id`, `title`, `text`);
  * Parquet with `title` and `text` columns (optional `_id`/`id`);
  * a directory holding a BEIR `corpus.jsonl`.
Which key of a record is its id, text and title, and which wins when a record has several, is
decided in `records.py` (the same rule as for query records). Errors name the file, the record
(index or line) and what was expected.

A passage's own id (`_id`, `id`, `idx`) names it in TREC runs, BEIR scoring and `doc_ids`, so it must
be unique across the whole corpus (every file given): a second passage with the id of an earlier one
is an error naming both records (`PassageIds`, which keeps one entry per id and no text, so the
streamed build checks a corpus of any size). A passage repeated whole, id, title and text (a file
given twice), is not a clash: it is counted as a repeat (`duplicate_passages`) and dropped by
`--drop-duplicates`. Passages without an id of their own are known by their title, which may repeat.
"""

from __future__ import annotations

import glob
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from .errors import CorpusError, TigragError
from .records import (PASSAGE_ID_KEYS, PASSAGE_TEXT_KEYS, TITLE_KEY, as_record, first_key, parse_json, passage_fields,
                      string_value)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Passage:
    """One corpus passage. `doc_id` is the record's own id where it has one (BEIR), else its title.

    `own_id`: whether `doc_id` is the record's own id (True) or its title (False), as the corpus
    readers set it; None (a passage built in code) counts an id other than the title as its own.
    `where`: the record it was read from (`corpus.json: record 3`), named in errors. Neither takes part
    in equality."""

    title: str
    text: str
    doc_id: str
    own_id: bool | None = field(default=None, compare=False, repr=False)
    where: str = field(default="", compare=False, repr=False)

    @property
    def has_own_id(self) -> bool:
        """Whether `doc_id` must be unique: the record's own id, not a title standing in for one."""
        return self.doc_id != self.title if self.own_id is None else self.own_id

    def describe(self, position: int) -> str:
        """Where this passage came from, or its position (0-based) in a list built in code."""
        return self.where or f"passage {position} (title {self.title!r})"


def as_passages(items: Any) -> list[Passage]:
    """`items` as Passage records: Passages as they are, dicts read as a corpus record is (`title`, `text`,
    an optional `_id`/`id`/`idx`), `(title, text)` pairs; anything else is a TigragError naming the item."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TigragError(f"passages must be a sequence (list) of Passage records, dicts or (title, text) pairs, got "
                          f"{type(items).__name__}")
    out = []
    for position, item in enumerate(items):
        where = f"passage {position}"
        if isinstance(item, Passage):
            out.append(item)
        elif isinstance(item, dict):
            out.append(_passage_from_record(item, where))
        elif isinstance(item, tuple) and len(item) == 2 and all(isinstance(x, str) for x in item):
            out.append(_passage_from_record({"title": item[0], "text": item[1]}, where))
        else:
            raise TigragError(f"{where} is a {type(item).__name__}; give Passage records, dicts with 'title' and "
                              "'text' (and an optional 'id'), or (title, text) pairs")
    return out


def content_digest(passage: Passage) -> int:
    """An 8-byte digest of the passage's title and text (a collision among a million passages has odds of
    about 3e-8): what tells a passage repeated whole from another passage with its id."""
    digest = hashlib.blake2b(f"{passage.title}\0{passage.text}".encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "little")


def _clash(where: str, doc_id: str, first: str) -> CorpusError:
    return CorpusError(f"{where}: passage id {doc_id!r} is also the id of {first}, another passage (other title or "
                       "text); passage ids must be unique: they name the passages in runs, qrels and doc_ids, where "
                       "two passages of one id would be one")


class PassageIds:
    """The own ids of the passages seen so far (`Passage.has_own_id`), across every file of a corpus: a
    passage with the id of an earlier one is a CorpusError naming both records, unless it repeats that
    passage whole (same title and text: a file given twice, a repeat that `--drop-duplicates` drops).

    One entry per id: the id, an 8-byte digest of the first passage's title and text and a small
    integer `key` saying where it was; `describe(key)` gives that record back for the error. No text
    is kept, so a streamed build checks a corpus of any size (about 150 bytes per id)."""

    def __init__(self, describe: Callable[[int], str]):
        self._first: dict[str, int] = {}
        self._describe = describe

    def __len__(self) -> int:
        return len(self._first)

    def add(self, passage: Passage, key: int, where: str) -> None:
        """Record `passage` (read at `where`, known later as `key` >= 0); CorpusError if another passage
        already has its id."""
        if not passage.has_own_id:
            return
        digest = content_digest(passage)
        first = self._first.get(passage.doc_id)
        if first is None:
            self._first[passage.doc_id] = (key << 64) | digest
        elif first & 0xFFFF_FFFF_FFFF_FFFF != digest:
            raise _clash(where, passage.doc_id, self._describe(first >> 64))


def check_unique_ids(passages: Sequence[Passage]) -> None:
    """CorpusError when two of `passages` (a list in memory) share an own id and are not one passage
    repeated whole; the error names both (their records, or their positions in the list)."""
    first: dict[str, int] = {}
    for position, passage in enumerate(passages):
        if passage.has_own_id:
            earlier = first.setdefault(passage.doc_id, position)
            other = passages[earlier]
            if earlier != position and (other.title, other.text) != (passage.title, passage.text):
                raise _clash(passage.describe(position), passage.doc_id, other.describe(earlier))


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CorpusError(f"{path}: is a directory without a corpus.jsonl") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None


def _passage_from_record(data: Any, where: str) -> Passage:
    title, text, doc_id = passage_fields(as_record(data, where, "'title' and 'text'"), where)
    return Passage(title=title.strip(), text=text.strip(), doc_id=title if doc_id is None else doc_id,
                   own_id=doc_id is not None, where=where)


#: what a record is called in each format's errors: "corpus.json: record 3", "c.jsonl: line 7", "c.parquet: row 0"
RECORD, LINE, ROW = "record", "line", "row"


def _iter_json(path: Path) -> Iterator[tuple[int, Passage]]:
    data = parse_json(_read_text(path), str(path))  # an object holding a title twice is an error there
    if isinstance(data, list):
        for i, record in enumerate(data):
            yield i, _passage_from_record(record, f"{path}: {RECORD} {i}")
    elif isinstance(data, dict):
        for i, (title, body) in enumerate(data.items()):
            where = f"{path}: {RECORD} {i} (title {title!r})"
            text = string_value(body, where, "sentences")
            title = string_value(title, where, "title")
            yield i, Passage(title=title.strip(), text=text.strip(), doc_id=title, own_id=False, where=where)
    else:
        raise CorpusError(f"{path}: expected a JSON list of passages or an object title -> sentences")


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed record) of a JSONL file, read line by line; blank lines skipped.

    Errors name the file and the line: unreadable, not UTF-8, or malformed JSON.
    """
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror})") from None
    with handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusError(f"{path}: line {lineno}: not UTF-8 (invalid byte at column {exc.start + 1})") from None
            if not line.strip():
                continue
            yield lineno, parse_json(line, f"{path}: line {lineno}", one_line=True)


def _iter_jsonl(path: Path) -> Iterator[tuple[int, Passage]]:
    for lineno, record in iter_jsonl(path):
        yield lineno, _passage_from_record(record, f"{path}: {LINE} {lineno}")


def _iter_parquet(path: Path) -> Iterator[tuple[int, Passage]]:
    """Record batch by record batch."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover
        raise CorpusError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        parquet = pq.ParquetFile(path)
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise CorpusError(f"{path}: not a readable Parquet file ({exc})") from None
    columns = set(parquet.schema_arrow.names)
    text_col = first_key(columns, PASSAGE_TEXT_KEYS)
    if text_col is None or TITLE_KEY not in columns:
        raise CorpusError(f"{path}: Parquet needs 'title' and 'text' columns, found {sorted(columns)}")
    id_col = first_key(columns, PASSAGE_ID_KEYS)
    row = 0
    for batch in parquet.iter_batches(batch_size=8192, columns=[c for c in (TITLE_KEY, text_col, id_col) if c]):
        for record in batch.to_pylist():
            yield row, _passage_from_record(record, f"{path}: {ROW} {row}")
            row += 1


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Corpus paths with glob patterns (`data/*.jsonl`) expanded in sorted order."""
    out: list[Path] = []
    for item in paths:
        text = str(item)
        if any(ch in text for ch in "*?["):
            matches = sorted(Path(p) for p in glob.glob(text))
            if not matches:
                raise CorpusError(f"{text}: the pattern matches no file")
            out.extend(matches)
        else:
            out.append(Path(item))
    return out


def _located(path: Path) -> tuple[Path, str, Iterator[tuple[int, Passage]]]:
    """(the file read, what its records are called, its (record number, passage) pairs)."""
    if path.is_dir():
        if (path / "corpus.jsonl").is_file():
            return path / "corpus.jsonl", LINE, _iter_jsonl(path / "corpus.jsonl")
        raise CorpusError(f"{path}: directory holds no corpus.jsonl (BEIR layout expected)")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return path, RECORD, _iter_json(path)
    if suffix in (".jsonl", ".ndjson"):
        return path, LINE, _iter_jsonl(path)
    if suffix in (".parquet", ".pq"):
        return path, ROW, _iter_parquet(path)
    raise CorpusError(f"{path}: unknown corpus format {suffix!r}; expected .json, .jsonl or .parquet")


def iter_passages(path: str | Path) -> Iterator[Passage]:
    """Passages of one corpus file (or BEIR directory), in file order, empty ones included."""
    return (passage for _, passage in _located(Path(path))[2])


def iter_corpus(paths: Sequence[Path]) -> Iterator[Passage]:
    """Passages of every file of `paths` in order, empty ones included; each non-empty passage's own
    id is checked against every earlier one's (`PassageIds`: a clash is a CorpusError naming both
    records), across files, while the files are read."""
    files: list[tuple[Path, str]] = []
    ids = PassageIds(lambda key: f"{files[key >> 40][0]}: {files[key >> 40][1]} {key & ((1 << 40) - 1)}")
    for path in paths:
        source, kind, records = _located(Path(path))
        files.append((source, kind))
        file_key = (len(files) - 1) << 40
        for number, passage in records:
            if passage.text:
                ids.add(passage, file_key | number, passage.where)
            yield passage


def duplicate_passages(passages: Sequence[Passage]) -> int:
    """Passages whose title and text repeat an earlier passage's (e.g. a corpus file given twice)."""
    return len(passages) - len({(p.title, p.text) for p in passages})


def drop_duplicate_passages(passages: Sequence[Passage]) -> list[Passage]:
    """`passages` without the repeats of `duplicate_passages` (the first of each kept, order kept)."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in passages:
        if (p.title, p.text) not in seen:
            seen.add((p.title, p.text))
            out.append(p)
    return out


def load_corpus(paths: str | Path | Sequence[str | Path]) -> list[Passage]:
    """All passages of one or more corpus files; empty passages are skipped with a warning. Two
    passages with one id (and another title or text) are a CorpusError naming both records."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = expand_paths(paths)
    passages: list[Passage] = []
    skipped = 0
    for passage in iter_corpus(paths):  # a passage id used twice is an error naming both records
        if passage.text:
            passages.append(passage)
        else:
            skipped += 1
    if skipped:
        log.warning("skipped %d empty passage(s)", skipped)
    if not passages:
        raise CorpusError(f"{', '.join(map(str, paths))}: no non-empty passages found")
    return passages


def drop_duplicates(passages: list[Passage], known: set[tuple[str, str]] | None = None) -> list[Passage]:
    """Passages without title-and-text repeats, and without those whose (title, id) is in `known`
    (the passages an index already holds); the count dropped is logged as a warning."""
    kept = [p for p in drop_duplicate_passages(passages) if not known or (p.title, p.doc_id) not in known]
    if len(kept) < len(passages):
        log.warning("dropped %s duplicate passage(s)", f"{len(passages) - len(kept):,}")
    return kept
