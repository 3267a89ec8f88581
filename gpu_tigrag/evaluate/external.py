"""Runs made elsewhere (pyserini, bm25s, another engine) evaluated as systems: `tigrag eval --run NAME=FILE`.

A TREC run file (`qid Q0 docid rank score tag`) names passages by doc id. Its doc ids are matched to the
index's passage ids as the engine's own run files write them (`runfiles.trec_id`: an id without
whitespace or `%` as it is), so a run scored here is scored in the one doc-id space of every run and
qrels file the engine writes. Each query's passages are ranked by score, best first, ties in file
order (as trec_eval would see them, up to its docid tie-break); a passage named twice keeps its first
line. The ranking becomes a chunk ranking of each passage's first chunk, so every metric is computed by
the same functions as the engine's systems: a passage run's chunk-level `recall@k` is its passage recall.

A run that shares no doc id with the index is an error (it was made on another corpus, or names
passages another way, e.g. titles against corpus ids: every measure would be 0); doc ids the index
lacks, queries of the run that the dataset lacks, and dataset queries the run lacks are warnings with
counts (each missing query scores 0).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import CorpusError, TigragError
from ..retrieve.results import QueryResult
from .runfiles import trec_id

log = logging.getLogger(__name__)


def parse_run_spec(spec: str) -> tuple[str, Path]:
    """(name, file) of `--run NAME=FILE`."""
    name, sep, path = spec.partition("=")
    name = " ".join(name.split())
    if not sep or not name or not path.strip():
        raise TigragError(f"--run {spec!r}: expected NAME=FILE (a TREC run: qid Q0 docid rank score tag)")
    path = Path(path.strip())
    if not path.is_file():
        raise TigragError(f"--run {spec!r}: {path} is not a file")
    return name, path


def read_trec_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """{qid: [(docid, score)] best first} of a TREC run file; a malformed line is an error naming it."""
    lines: dict[str, list[tuple[float, int, str]]] = {}
    try:
        with open(path, encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                fields = line.split()
                if not fields:
                    continue
                if len(fields) != 6:
                    raise CorpusError(f"{path}: line {lineno}: expected 6 fields (qid Q0 docid rank score tag), got "
                                      f"{len(fields)}")
                try:
                    score = float(fields[4])
                except ValueError:
                    raise CorpusError(f"{path}: line {lineno}: score {fields[4]!r} is not a number") from None
                if not np.isfinite(score):
                    raise CorpusError(f"{path}: line {lineno}: score {fields[4]!r} is not finite")
                lines.setdefault(fields[0], []).append((-score, lineno, fields[2]))
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
    out: dict[str, list[tuple[str, float]]] = {}
    for qid, rows in lines.items():
        seen: dict[str, float] = {}
        for negative, _, doc in sorted(rows):
            seen.setdefault(doc, -negative)
        out[qid] = list(seen.items())
    return out


def external_results(index: Any, queries: Sequence[Any], path: str | Path, depth: int) -> list[QueryResult]:
    """Each dataset query's ranking from the run file at `path`, at most `depth` passages, as QueryResults
    of the passages' first chunks (module notes)."""
    from ..methods.baselines.passage_bm25 import first_chunks

    run = read_trec_run(path)
    position = {trec_id(doc_id): p for p, doc_id in enumerate(index.passage_ids)}
    docs = {doc for ranking in run.values() for doc, _ in ranking}
    known = docs & set(position)
    if docs and not known:
        example = next(iter(sorted(docs)))
        raise TigragError(f"{path}: none of its {len(docs):,} doc ids is a passage id of the index (e.g. {example!r}; "
                          f"the index names passages like {trec_id(index.passage_ids[0])!r}): it was made on another "
                          "corpus or names passages another way, and would score 0 on every measure")
    if len(known) < len(docs):
        log.warning("%s: %d of its %d doc ids are not passage ids of the index; they are left out", path,
                    len(docs) - len(known), len(docs))
    qids = {trec_id(q.qid) for q in queries}
    extra = [qid for qid in run if qid not in qids]
    missing = sum(trec_id(q.qid) not in run for q in queries)
    if extra:
        log.warning("%s: %d of its queries are not in the dataset (e.g. %r); they are left out", path, len(extra),
                    extra[0])
    if missing:
        log.warning("%s: %d of the dataset's %d queries are not in the run; each scores 0", path, missing, len(queries))
    first = first_chunks(index.chunk_passage, len(index.passage_titles))
    out = []
    for q in queries:
        ranking = [(position[doc], score) for doc, score in run.get(trec_id(q.qid), []) if doc in position][:depth]
        passages = [p for p, _ in ranking]
        out.append(QueryResult(query=q.text, chunk_ids=[int(first[p]) for p in passages],
                               scores=[float(s) for _, s in ranking], titles=[index.passage_titles[p] for p in passages],
                               passage_ids=passages, dense_fallback=False,
                               doc_ids=[index.passage_ids[p] for p in passages]))
    return out
