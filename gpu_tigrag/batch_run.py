"""Batch query runs (`tigrag run`): stream any number of queries through a Retriever in
micro-batches and stream the results out, in one process (`dask_run.py` spreads them over Dask
workers).

Queries are read lazily (JSONL or Parquet record batches, never all in memory) and cut into
micro-batches sized by `Retriever.batch_size()` (free device memory or the memory budget).
A helper thread tokenises and embeds batch i+1 while batch i runs the graph stages, and
results are appended in input order, one row per query carrying its input position and id:
to a JSONL file (flushed and fsync'ed after every batch; `resume=True` counts the complete
lines, cutting off a torn last one) or, for an output named `*.parquet`, to a folder of part
files each renamed into place when complete. Resuming continues with the next query, so
no query is lost or written twice.

A run holds its output's writer lock (`OUT.lock`) throughout, so a second run onto the same
output fails at once; and a resume first checks that the output belongs to this query file,
index, configuration and k, row by row (`run_resume.py`).
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

from .config import config_to_dict
from .corpus import iter_jsonl
from .errors import CorpusError, ResumeMismatchError, TigragError
from .locking import writer_lock
from .progress import counter
from .records import as_record, query_id, query_text
from .retrieve.retriever import Retriever
from .run_resume import HINT, check_meta, check_rows, run_identity, torn_tail_ok, write_meta


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


def stream_queries(path: str | Path) -> Iterator[QueryRecord]:
    """Queries of a JSONL file (objects or bare strings) or a Parquet file, read lazily."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: no such query file")
    if path.suffix.lower() in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        position = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                yield _record(row, position, f"{path}: row {position}")
                position += 1
        return
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        raise CorpusError(f"{path}: queries must be JSONL or Parquet for streaming")
    for position, (lineno, data) in enumerate(iter_jsonl(path)):
        yield _record(data, position, f"{path}: line {lineno}")


def result_record(record: QueryRecord, result) -> dict:
    """The output row of one answered query (shared by local and Dask runs)."""
    return {"index": record.position, "id": record.qid, "query": record.text, "chunk_ids": result.chunk_ids,
            "scores": result.scores, "titles": result.titles, "dense_fallback": result.dense_fallback,
            "hops": len(result.hops)}


class JsonlSink:
    """Appends rows as JSON lines, fsync'ed per write; resumes after the last complete line."""

    def __init__(self, path: Path):
        self.path = path
        self.keep, self.tail = 0, b""

    def has_rows(self) -> bool:
        return self.path.is_file() and self.path.stat().st_size > 0

    def rows(self) -> Iterator[Any]:
        """The rows of the complete lines already written; a garbage line raises ResumeMismatchError."""
        self.keep, self.tail = 0, b""
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

    def trim(self, done: int) -> None:
        """Cut off a torn last line (after `rows`), if it is the start of row `done`."""
        if not self.tail:
            return
        if not torn_tail_ok(self.tail, done):
            raise ResumeMismatchError(f"{self.path}: the last line is cut short and is not the start of row "
                                      f"{done + 1}; {HINT}")
        os.truncate(self.path, self.keep)

    def __enter__(self) -> "JsonlSink":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "a", encoding="utf-8")
        return self

    def write(self, rows: list[dict]) -> None:
        self.handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def __exit__(self, *exc) -> None:
        self.handle.close()


class ParquetSink:
    """A folder of Parquet part files, one per write, each renamed into place when complete."""

    def __init__(self, path: Path):
        self.path = path

    def parts(self) -> list[Path]:
        return sorted(self.path.glob("part-*.parquet")) if self.path.is_dir() else []

    def has_rows(self) -> bool:
        return bool(self.parts())

    def rows(self) -> Iterator[Any]:
        """The rows (index, id, query, chunk_ids) of the parts already written."""
        import pyarrow.parquet as pq

        for part in self.parts():
            try:
                table = pq.read_table(part, columns=["index", "id", "query", "chunk_ids"])
            except (OSError, ValueError, KeyError) as exc:
                raise ResumeMismatchError(f"{part}: not a readable result part ({exc}); {HINT}") from None
            yield from table.to_pylist()

    def trim(self, done: int) -> None:
        """Remove the temporary part of a write that was killed."""
        for stale in self.path.glob("part-*.tmp") if self.path.is_dir() else []:
            stale.unlink()

    def __enter__(self) -> "ParquetSink":
        self.path.mkdir(parents=True, exist_ok=True)
        self.next_part = len(self.parts())
        return self

    def write(self, rows: list[dict]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        target = self.path / f"part-{self.next_part:06d}.parquet"
        tmp = target.with_suffix(".tmp")
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        os.replace(tmp, target)
        self.next_part += 1

    def __exit__(self, *exc) -> None:
        pass


def open_sink(output: str | Path):
    """JSONL file, or a Parquet folder when the name ends in .parquet."""
    output = Path(output)
    return ParquetSink(output) if output.suffix == ".parquet" else JsonlSink(output)


def _batches(records: Iterator[QueryRecord], size: int) -> Iterator[list[QueryRecord]]:
    while batch := list(islice(records, size)):
        yield batch


#: the phrase a competing writer of a run's output sees in the lock error
RUN_WRITE = "another run writing this output"


@contextmanager
def open_run(queries_path: str | Path, output: str | Path, resume: bool, index: str, config: dict[str, Any],
             k: int) -> Iterator[tuple[Any, int, Iterator[QueryRecord]]]:
    """(open sink, queries already answered, the records still to answer) of a run of `queries_path`
    on the index with fingerprint `index` (see `index_fingerprint`) with retrieval `config` and `k`.

    Holds the output's writer lock for the block. A resume is refused, before anything is
    changed, unless the output belongs to this run (`run_resume.py`).
    """
    output = Path(output)
    with writer_lock(output, RUN_WRITE):
        if output.exists() and not resume:
            raise TigragError(f"{output}: exists; pass --resume to continue it or choose another output")
        identity = run_identity(queries_path, index, config, k)
        sink = open_sink(output)
        records = stream_queries(queries_path)
        done = 0
        if resume and output.exists():
            check_meta(output, identity, sink.has_rows())
            done = check_rows(output, sink.rows(), records, k)
            sink.trim(done)
        write_meta(output, identity)
        with sink:
            yield sink, done, records


def run_queries(retriever: Retriever, queries_path: str | Path, output: str | Path, k: int = 5,
                resume: bool = False, show_progress: bool = False) -> dict[str, float]:
    """Stream every query of `queries_path` through `retriever` into `output` (JSONL or Parquet parts)."""
    from .index.store import index_fingerprint

    with open_run(queries_path, output, resume, index_fingerprint(retriever.index),
                  config_to_dict(retriever.config), k) as (sink, done, records):
        return _run_local(retriever, sink, done, records, k, show_progress)


def _run_local(retriever: Retriever, sink: Any, done: int, records: Iterator[QueryRecord], k: int,
               show_progress: bool) -> dict[str, float]:
    size = retriever.batch_size()
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
