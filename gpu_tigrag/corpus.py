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
"""

from __future__ import annotations

import glob
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from .errors import CorpusError
from .records import (PASSAGE_ID_KEYS, PASSAGE_TEXT_KEYS, TITLE_KEY, as_record, first_key, parse_json, passage_fields,
                      string_value)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Passage:
    """One corpus passage. `doc_id` is the record's own id where it has one (BEIR), else its title."""

    title: str
    text: str
    doc_id: str


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
    return Passage(title=title.strip(), text=text.strip(), doc_id=title if doc_id is None else doc_id)


def _iter_json(path: Path) -> Iterator[Passage]:
    data = parse_json(_read_text(path), str(path))
    if isinstance(data, list):
        for i, record in enumerate(data):
            yield _passage_from_record(record, f"{path}: record {i}")
    elif isinstance(data, dict):
        for i, (title, body) in enumerate(data.items()):
            where = f"{path}: record {i} (title {title!r})"
            text = string_value(body, where, "sentences")
            title = string_value(title, where, "title")
            yield Passage(title=title.strip(), text=text.strip(), doc_id=title)
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


def _iter_jsonl(path: Path) -> Iterator[Passage]:
    for lineno, record in iter_jsonl(path):
        yield _passage_from_record(record, f"{path}: line {lineno}")


def _iter_parquet(path: Path) -> Iterator[Passage]:
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
            yield _passage_from_record(record, f"{path}: row {row}")
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


def iter_passages(path: str | Path) -> Iterator[Passage]:
    """Passages of one corpus file (or BEIR directory), in file order, empty ones included."""
    path = Path(path)
    if path.is_dir():
        if (path / "corpus.jsonl").is_file():
            return _iter_jsonl(path / "corpus.jsonl")
        raise CorpusError(f"{path}: directory holds no corpus.jsonl (BEIR layout expected)")
    suffix = path.suffix.lower()
    if suffix == ".json":
        return _iter_json(path)
    if suffix in (".jsonl", ".ndjson"):
        return _iter_jsonl(path)
    if suffix in (".parquet", ".pq"):
        return _iter_parquet(path)
    raise CorpusError(f"{path}: unknown corpus format {suffix!r}; expected .json, .jsonl or .parquet")


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
    """All passages of one or more corpus files; empty passages are skipped with a warning."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = expand_paths(paths)
    passages: list[Passage] = []
    skipped = 0
    for path in paths:
        for passage in iter_passages(path):
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
