"""Batch scheduler: stream any number of queries through a Retriever and stream results out.

Queries are read lazily (JSONL or Parquet record batches, never all in memory) and cut into
micro-batches sized by `Retriever.batch_size()` (free device memory or the memory budget).
A helper thread tokenises and embeds batch i+1 while batch i runs the graph stages, and
results are appended to a JSONL file in input order, one line per query carrying its input
position and id. The file is flushed and fsync'ed after every batch, so `resume=True`
counts the complete lines already written (a torn last line is cut off) and continues
with the next query: no query is lost or written twice.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Iterator

from .errors import CorpusError, TigragError
from .progress import counter
from .retrieve.retriever import Retriever

ID_KEYS = ("id", "_id", "qid")
TEXT_KEYS = ("question", "text", "query")


@dataclass(frozen=True)
class QueryRecord:
    position: int
    qid: str
    text: str


def _record(data: object, position: int, where: str) -> QueryRecord:
    if isinstance(data, str):
        return QueryRecord(position, str(position), data)
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: expected an object with 'question' (or 'text'), got {type(data).__name__}")
    text = next((data[k] for k in TEXT_KEYS if isinstance(data.get(k), str)), None)
    if text is None:
        raise CorpusError(f"{where}: missing field 'question' (or 'text')")
    qid = next((str(data[k]) for k in ID_KEYS if k in data), str(position))
    return QueryRecord(position, qid, text)


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
    position = 0
    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{path}: line {lineno}: malformed JSON ({exc.msg})") from None
            yield _record(data, position, f"{path}: line {lineno}")
            position += 1


def completed_lines(path: Path) -> int:
    """Complete result lines in `path`; a torn last line (no newline) is truncated away."""
    if not path.is_file():
        return 0
    with open(path, "rb+") as handle:
        data = handle.read()
        keep = data.rfind(b"\n") + 1
        if keep != len(data):
            handle.truncate(keep)
    return data[:keep].count(b"\n")


def result_line(record: QueryRecord, result) -> str:
    """The JSONL line of one answered query (shared by local and distributed runs)."""
    return json.dumps({"index": record.position, "id": record.qid, "query": record.text,
                       "chunk_ids": result.chunk_ids, "scores": result.scores, "titles": result.titles,
                       "dense_fallback": result.dense_fallback, "hops": len(result.hops)}, ensure_ascii=False)


def _batches(records: Iterator[QueryRecord], size: int) -> Iterator[list[QueryRecord]]:
    while batch := list(islice(records, size)):
        yield batch


def run_queries(retriever: Retriever, queries_path: str | Path, output: str | Path, k: int = 5,
                resume: bool = False, show_progress: bool = False) -> dict[str, float]:
    """Stream every query of `queries_path` through `retriever` into JSONL `output`."""
    output = Path(output)
    if output.exists() and not resume:
        raise TigragError(f"{output}: exists; pass --resume to continue it or choose another output")
    done = completed_lines(output) if resume else 0
    records = islice(stream_queries(queries_path), done, None)
    size = retriever.batch_size()
    output.parent.mkdir(parents=True, exist_ok=True)
    bar = counter(0, "run", show_progress, unit="query")
    written, start = 0, time.perf_counter()
    with open(output, "a", encoding="utf-8") as sink, ThreadPoolExecutor(max_workers=1) as helper:
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
            for record, result in zip(batch, results):
                sink.write(result_line(record, result) + "\n")
            sink.flush()
            os.fsync(sink.fileno())
            written += len(batch)
            bar.update(len(batch))
    bar.close()
    elapsed = time.perf_counter() - start
    return {"skipped_done": done, "written": written, "seconds": elapsed,
            "queries_per_second": written / elapsed if elapsed else 0.0}
