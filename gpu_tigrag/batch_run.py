"""Batch query runs (`tigrag run`): stream any number of queries through a Retriever in
micro-batches and stream the results out, in one process (`dask_run.py` spreads them over Dask
workers).

Queries are read lazily from JSONL or Parquet (record batches, never all in memory); a JSON list
(the question files `tigrag eval` takes) and the query file of a dataset folder (HippoRAG protocol
or BEIR) are read too, a JSON list whole. They are cut into
micro-batches sized by `Retriever.batch_size()` (free device memory or the memory budget).
A helper thread tokenises and embeds batch i+1 while batch i runs the method's scoring, and
results are appended in input order, one row per query carrying its input position and id,
in one of `FORMATS`: a JSONL file (written unbuffered and fsync'ed after every batch;
`resume=True` counts the complete lines, cutting off a torn last one), a TREC run file (written
and fsync'ed the same way, one line per passage at its best chunk: `evaluate/runfiles.py`; it
cannot be resumed) or a folder of Parquet part files each written atomically (`atomic.py`).
Resuming continues with the next query, so no query is lost or written twice. A write that fails
(disk full) is an `OutputError` saying how many rows the output keeps; the JSONL or TREC file is
first cut back to its last complete batch.

A run holds its output's writer lock (`OUT.lock`) throughout, so a second run onto the same
output fails at once; and a resume first checks that the output belongs to this query file,
index, configuration and k, row by row (`run_resume.py`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

from .atomic import atomic_write, describe_os_error, stale_siblings
from .config import config_to_dict
from .corpus import iter_jsonl
from .errors import CorpusError, OutputError, ResumeMismatchError, TigragError
from .evaluate.datasets import QuerySource
from .locking import writer_lock
from .progress import counter
from .records import as_record, parse_json, query_id, query_text
from .retrieve.base import BaseRetriever as Retriever  # the protocol every method's retriever follows
from .outputs import check_outside_indexes
from .run_resume import HINT, check_meta, check_own_meta, check_rows, meta_path, run_identity, torn_tail_ok, write_meta

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class QueryRecord:
    """One query of a run: its 0-based position in the query file, its id and its text."""

    position: int
    qid: str
    text: str


def _record(data: object, position: int, where: str) -> QueryRecord:
    """A bare string is a query whose id is its position; an object's id and text are read as
    `records.py` says."""
    if isinstance(data, str):
        return QueryRecord(position, str(position), data)
    record = as_record(data, where, "'question' (or 'text')")
    text = query_text(record, where)
    return QueryRecord(position, query_id(record, where, position), text)


def stream_queries(source: str | Path | QuerySource) -> Iterator[QueryRecord]:
    """Queries of a JSONL file (objects or bare strings) or a Parquet file, read lazily; of a JSON list,
    read whole; of a dataset folder, its query file (`evaluate.datasets.query_file`); of a `QuerySource`
    with a split, the queries that split judges, numbered from 0 in the file's order."""
    if isinstance(source, QuerySource):
        judged = source.judged()
        records = _stream_file(source.path)
        if judged is None:
            yield from records
            return
        kept = (record for record in records if record.qid in judged)
        for position, record in enumerate(kept):
            yield QueryRecord(position, record.qid, record.text)
        return
    yield from _stream_file(source)


def _stream_file(path: str | Path) -> Iterator[QueryRecord]:
    from .evaluate.datasets import query_file

    given = Path(path)
    if not given.exists():
        raise CorpusError(f"{given}: no such query file")
    path = query_file(given)
    if path.exists() and not path.is_file() and not path.is_dir():
        raise CorpusError(f"{path}: not a regular file (a pipe, FIFO or device); a run reads its query file more "
                          "than once (to check it, to fingerprint it, to answer it): save it to a file first")
    if not path.is_file():
        raise CorpusError(f"{path}: no such query file")
    if path.suffix.lower() in (".parquet", ".pq"):
        pq = _pyarrow_parquet("Parquet query files")

        position = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                yield _record(row, position, f"{path}: row {position}")
                position += 1
        return
    if path.suffix.lower() not in (".jsonl", ".ndjson") and _starts_with_list(path):
        yield from _json_list(path)
        return
    for position, (lineno, data) in enumerate(iter_jsonl(path)):
        yield _record(data, position, f"{path}: line {lineno}")


def _starts_with_list(path: Path) -> bool:
    """Whether the file's first non-blank byte opens a JSON list (a `.json` file is one in any case)."""
    if path.suffix.lower() == ".json":
        return True
    with open(path, "rb") as handle:
        head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def _json_list(path: Path) -> Iterator[QueryRecord]:
    """Queries of a JSON list (read whole, as `tigrag eval` reads question files)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
    data = parse_json(text, str(path))
    if not isinstance(data, list):
        raise CorpusError(f"{path}: expected a JSON list of queries (or JSONL, one query a line), got "
                          f"{type(data).__name__}")
    for position, item in enumerate(data):
        yield _record(item, position, f"{path}: record {position}")


def _pyarrow_parquet(what: str):
    """pyarrow.parquet, or a clear error naming what needed it."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TigragError(f"{what} need pyarrow, which is not installed (pip install pyarrow)") from None
    return pq


def result_record(record: QueryRecord, result) -> dict:
    """The output row of one answered query (shared by local and Dask runs)."""
    row = {"index": record.position, "id": record.qid, "query": record.text, "chunk_ids": result.chunk_ids,
           "scores": result.scores, "titles": result.titles, "doc_ids": result.doc_ids,
           "dense_fallback": result.dense_fallback, "hops": len(result.hops)}
    if result.context is not None:  # an adaptive context (SpectRAG): the first `context` chunk ids
        row["context"] = result.context
    return row


#: what a failed write's error adds: the rows before it are complete, and a resume continues
RESUME_NOTE = "--resume continues with the next query"


class JsonlSink:
    """Appends rows as JSON lines, fsync'ed per write; resumes after the last complete line.

    A write that fails (disk full) is cut off again, so the file ends with the last complete
    batch, and raises an `OutputError` saying how many rows the file keeps."""

    def __init__(self, path: Path):
        self.path = path
        self.keep, self.tail = 0, b""
        self.kept_rows = 0  # complete rows in the file: those found by `rows`, then those written

    def has_content(self) -> bool:
        """Whether the file holds anything (then only its own sidecar lets a resume continue it)."""
        return self.path.is_file() and self.path.stat().st_size > 0

    def rows(self) -> Iterator[Any]:
        """The rows of the complete lines already written; a garbage line raises ResumeMismatchError."""
        self.keep, self.tail, self.kept_rows = 0, b"", 0
        if not self.path.is_file():
            return
        with open(self.path, "rb") as handle:
            for lineno, line in enumerate(handle, start=1):
                if not line.endswith(b"\n"):
                    self.tail = line
                    return
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise ResumeMismatchError(f"{self.path}: line {lineno} is not a result row ({exc}); {HINT}") from None
                yield row
                self.keep += len(line)
                self.kept_rows += 1

    def trim(self, done: int) -> None:
        """Cut off a torn last line (after `rows`), if it is the start of row `done`."""
        if not self.tail:
            return
        if not torn_tail_ok(self.tail, done):
            raise ResumeMismatchError(f"{self.path}: the last line is cut short and is not the start of row "
                                      f"{done + 1}; {HINT}")
        os.truncate(self.path, self.keep)

    def __enter__(self) -> "JsonlSink":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.handle = open(self.path, "ab", buffering=0)  # unbuffered: a failed write leaves nothing pending
            self.size = os.fstat(self.handle.fileno()).st_size
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot write ({describe_os_error(exc)})") from None
        return self

    def encode(self, rows: list[dict]) -> bytes:
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode("utf-8")

    def write(self, rows: list[dict]) -> None:
        data = memoryview(self.encode(rows))
        try:
            written = 0
            while written < len(data):
                written += self.handle.write(data[written:])
            os.fsync(self.handle.fileno())
        except OSError as exc:
            self._fail(exc)
        self.size += len(data)
        self.kept_rows += len(rows)

    def _fail(self, exc: OSError) -> None:
        """Cut the file back to its last complete batch and raise the one-line error."""
        try:
            os.truncate(self.path, self.size)
            kept = f"its {self.kept_rows:,} complete rows are kept"
        except OSError:
            kept = f"its first {self.kept_rows:,} rows are complete (a torn last line is cut off on resume)"
        raise OutputError(f"{self.path}: cannot write ({describe_os_error(exc)}); {kept}, and {RESUME_NOTE}") \
            from None

    def __exit__(self, *exc) -> None:
        self.handle.close()


class TrecSink(JsonlSink):
    """A TREC run file: per query, its passages (by corpus id) at their best chunk, `qid Q0 docid rank
    score tag` (`evaluate/runfiles.py`), written and fsync'ed per batch like JSONL. It holds no record
    of the query positions, so it cannot be resumed (`open_run` refuses)."""

    def __init__(self, path: Path, tag: str):
        super().__init__(path)
        self.tag = tag

    def encode(self, rows: list[dict]) -> bytes:
        from .evaluate.runfiles import passage_ranking, trec_lines

        lines = [line for row in rows
                 for line in trec_lines(row["id"], passage_ranking(row["doc_ids"], row["scores"]), self.tag)]
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def rows(self) -> Iterator[Any]:
        raise ResumeMismatchError(f"{self.path}: a TREC run cannot be resumed; {HINT}")


#: the temporary name of a part write in outputs of earlier versions
_EARLIER_TMP = re.compile(r"part-\d{6}\.tmp")


class ParquetSink:
    """A folder of Parquet part files, one per write, each written atomically (`atomic.py`)."""

    def __init__(self, path: Path):
        self.path = path
        self.kept_rows = 0  # rows in complete parts: those found by `rows`, then those written

    def parts(self) -> list[Path]:
        return sorted(self.path.glob("part-*.parquet")) if self.path.is_dir() else []

    def has_content(self) -> bool:
        """Whether the folder holds anything, parts or not (then only its own sidecar lets a resume continue
        it, and trim nothing there before): a folder of someone else's files is never written into."""
        return self.path.is_dir() and any(self.path.iterdir())

    def rows(self) -> Iterator[Any]:
        """The rows (index, id, query, chunk_ids) of the parts already written."""
        pq = _pyarrow_parquet("Parquet outputs")
        self.kept_rows = 0
        for part in self.parts():
            if part.is_symlink():
                raise ResumeMismatchError(f"{part}: a symbolic link, not a result part; {HINT}")
            try:
                table = pq.read_table(part, columns=["index", "id", "query", "chunk_ids"])
            except (OSError, ValueError, KeyError) as exc:
                raise ResumeMismatchError(f"{part}: not a readable result part ({exc}); {HINT}") from None
            for row in table.to_pylist():
                yield row
                self.kept_rows += 1

    def _part(self, number: int) -> Path:
        return self.path / f"part-{number:06d}.parquet"

    def trim(self, done: int) -> None:
        """Remove the temporary file of a part write that was killed (and, from outputs of earlier
        versions, their `part-NNNNNN.tmp`): only those exact names, only regular files (a link or a
        folder so named is left alone). Called after `check_meta` found the run's own sidecar."""
        if not self.path.is_dir():
            return
        earlier = (p for p in self.path.iterdir() if _EARLIER_TMP.fullmatch(p.name))
        for stale in (*stale_siblings(self._part(len(self.parts()))), *earlier):
            if stat.S_ISREG(os.lstat(stale).st_mode):
                stale.unlink()

    def __enter__(self) -> "ParquetSink":
        _pyarrow_parquet("Parquet outputs (--format parquet)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot write ({describe_os_error(exc)})") from None
        self.next_part = len(self.parts())
        return self

    def write(self, rows: list[dict]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows)
        try:
            atomic_write(self._part(self.next_part), lambda tmp: pq.write_table(table, tmp))
        except OutputError as exc:
            raise OutputError(f"{exc}; the {self.kept_rows:,} rows of the parts before it are kept, and "
                              f"{RESUME_NOTE}") from None
        self.next_part += 1
        self.kept_rows += len(rows)

    def __exit__(self, *exc) -> None:
        pass


#: the output formats of `tigrag run`
FORMATS = ("jsonl", "trec", "parquet")
#: the output names that imply a format when --format is not given
FORMAT_SUFFIXES = {".parquet": "parquet", ".trec": "trec", ".run": "trec", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def output_format(output: str | Path, fmt: str | None = None) -> str:
    """The format of a run's output: `fmt`, else the one its name implies (`FORMAT_SUFFIXES`), else JSONL.
    A name implying another format than `fmt` is an error (e.g. `-o run.parquet --format jsonl`)."""
    implied = FORMAT_SUFFIXES.get(Path(output).suffix.lower())
    if fmt is None:
        return implied or "jsonl"
    if fmt not in FORMATS:
        raise TigragError(f"unknown output format {fmt!r}; choose from {', '.join(FORMATS)}")
    if implied is not None and implied != fmt:
        raise TigragError(f"-o {output}: the name says {implied} but --format is {fmt}; rename the output or "
                          "change --format")
    return fmt


def check_resumable(fmt: str, resume: bool) -> None:
    """`--resume` of a TREC run is refused (a clear error, before any work)."""
    if resume and fmt == "trec":
        raise TigragError("--resume works with --format jsonl or parquet, not trec: a TREC run file does not record "
                          "which query an interrupted write stopped in. Write JSONL (resumable) and convert it when "
                          "it is complete: `tigrag trec OUT.jsonl -o RUN.trec`")


def open_sink(output: str | Path, fmt: str | None = None, tag: str = "tigrag"):
    """The sink of `output` in format `fmt` (default: by its name, `output_format`): a JSONL file, a TREC
    run file with tag `tag`, or a folder of Parquet parts."""
    output = Path(output)
    fmt = output_format(output, fmt)
    if fmt == "parquet":
        return ParquetSink(output)
    return TrecSink(output, tag) if fmt == "trec" else JsonlSink(output)


def _batches(records: Iterator[QueryRecord], size: int) -> Iterator[list[QueryRecord]]:
    while batch := list(islice(records, size)):
        yield batch


#: the phrase a competing writer of a run's output sees in the lock error
RUN_WRITE = "another run writing this output"


@contextmanager
def open_run(queries_path: str | Path | QuerySource, output: str | Path, resume: bool, index: str, config: dict[str, Any],
             k: int, fmt: str | None = None, tag: str = "tigrag") -> Iterator[tuple[Any, int, Iterator[QueryRecord]]]:
    """(open sink, queries already answered, the records still to answer) of a run of `queries_path`
    on the index with fingerprint `index` (see `index_fingerprint`) with retrieval `config` and `k`,
    written in format `fmt` (`output_format`; a TREC run is tagged `tag`).

    Holds the output's writer lock for the block. A resume is refused, before anything is
    changed, unless the output belongs to this run (`run_resume.py`); a TREC run is never resumed.
    """
    output = Path(output)
    fmt = output_format(output, fmt)
    check_resumable(fmt, resume)
    if output.is_symlink():  # appending (or creating parts) through it would write where it points
        raise TigragError(f"{output}: a symbolic link (to {os.readlink(output)}); refusing to write through it: "
                          "remove it or choose another output")
    check_outside_indexes(output, f"-o {output}")
    if output.exists() and not (output.is_dir() if fmt == "parquet" else output.is_file()):
        raise TigragError(f"-o {output}: exists and is not {'a folder' if fmt == 'parquet' else 'a regular file'}, "
                          f"which a {fmt} output must be; nothing was written: choose another output")
    with writer_lock(output, RUN_WRITE):
        if output.exists() and not resume:
            raise TigragError(f"{output}: exists; pass --resume to continue it or choose another output")
        if not output.exists() and (meta_path(output).exists() or meta_path(output).is_symlink()):
            check_own_meta(meta_path(output))
        identity = run_identity(queries_path, index, config, k)
        sink = open_sink(output, fmt, tag)
        records = stream_queries(queries_path)
        done = 0
        if resume and output.exists():
            check_meta(output, identity, sink.has_content())
            done = check_rows(output, sink.rows(), records, k)
            sink.trim(done)
            log.info("%s: %d queries already answered; continuing with query %d", output, done, done)
        write_meta(output, identity)
        with sink:
            yield sink, done, records
        if fmt == "trec":  # complete: its record lets a later write replace it, and says what it holds
            from .evaluate.runfiles import TREC_RUN
            from .outputs import record_file

            record_file(output, TREC_RUN, queries=sink.kept_rows, expected_queries=identity["queries"],
                        complete=sink.kept_rows == identity["queries"])


def run_queries(retriever: Retriever, queries_path: str | Path | QuerySource, output: str | Path, k: int = 5,
                resume: bool = False, show_progress: bool = False, fmt: str | None = None,
                tag: str = "tigrag") -> dict[str, float]:
    """Stream every query of `queries_path` through `retriever` into `output` (JSONL, a TREC run tagged
    `tag`, or Parquet parts: `fmt`, default by the output's name)."""
    from .index.store import index_fingerprint

    with open_run(queries_path, output, resume, index_fingerprint(retriever.index),
                  config_to_dict(retriever.config), k, fmt, tag) as (sink, done, records):
        return _run_local(retriever, sink, done, records, k, show_progress)


def _run_local(retriever: Retriever, sink: Any, done: int, records: Iterator[QueryRecord], k: int,
               show_progress: bool) -> dict[str, float]:
    size = retriever.batch_size()
    log.debug("micro-batches of %d queries", size)
    bar = counter(0, "run", show_progress, unit="query")
    written, start = 0, time.perf_counter()
    with ThreadPoolExecutor(max_workers=1) as helper:
        batches = _batches(records, size)
        pending = None
        first = next(batches, None)
        if first is not None:
            pending = (first, helper.submit(retriever.prepare, [r.text for r in first]))
        while pending is not None:
            batch, future = pending
            following = next(batches, None)
            prepared = future.result()
            pending = (following, helper.submit(retriever.prepare, [r.text for r in following])) if following else None
            results = retriever.run_prepared(prepared, k)
            sink.write([result_record(record, result) for record, result in zip(batch, results)])
            written += len(batch)
            bar.update(len(batch))
    bar.close()
    elapsed = time.perf_counter() - start
    return {"skipped_done": done, "written": written, "seconds": elapsed,
            "queries_per_second": written / elapsed if elapsed else 0.0}
