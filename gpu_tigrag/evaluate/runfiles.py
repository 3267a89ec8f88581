"""Run files and relevance judgements (qrels) for external scorers: trec_eval, pytrec_eval,
ir_measures, ranx.

A TREC run has one line per (query, passage): `qid Q0 docid rank score tag`. The engine ranks
chunks; a run file holds the passage ranking they give, each passage once, at the rank and score
of its best chunk (`passage_ranking`), ranks 1..n. That is the ranking the engine's passage-level
metrics are computed on (`recall_dedup@k`, `mrr@k`, `ndcg@k` in `metrics.py`), so an external
scorer reproduces them from the run file and the qrels written here (`R@k`, `RR@k`, `nDCG@k`).
The engine's `recall@k` (HippoRAG's, over the top-k chunks) has no equivalent in a passage run.

Keys. Every run and qrels file the engine writes names a passage by its passage id: the corpus's own
id (`_id`, `id`, `idx` as `records.py` reads it, else the title), in `tigrag run`, `tigrag trec` and
`tigrag eval --save-runs` alike; gold given by title is written as the ids of the passages of that
title (`experiment.gold_as_passage_ids`), so runs and qrels share one doc-id space. TREC files are whitespace-separated, so an id is written
with every whitespace character, `%` and control character percent-encoded as UTF-8 bytes
(`The Glass Orchard` -> `The%20Glass%20Orchard`; `urllib.parse.unquote` reverses it) and an empty
id as `%00`; ids without such characters (BEIR's) are written as they are. Runs and qrels are
encoded alike, so they always match each other.

Scores. Scorers re-sort a run by score and break ties by docid (trec_eval, pytrec_eval), not by
the rank column, and trec_eval and pytrec_eval hold scores as float32. So the scores are written as
float32 values (the engine's are float32 already, except fused ones), and where they tie or are
not strictly decreasing down the engine's ranking, each later score is lowered to the next float32
below the one above it (`np.nextafter`, skipping subnormals), which keeps the engine's order in
every scorer. Each value is printed exactly (the float64 `repr` of the float32).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..atomic import atomic_write_text
from ..errors import TigragError
from .queries import Query

#: what needs encoding in a TREC field: whitespace, '%', control characters (C0, DEL, C1)
_UNSAFE = re.compile(r"[\s%\x00-\x1f\x7f-\x9f]")
#: characters kept in file names derived from system names
_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: the kinds of artefact these writers record (`outputs.py`)
TREC_RUN, QRELS, RUNS_FOLDER = "a TREC run", "qrels", "TREC runs and qrels"


def trec_id(value: str) -> str:
    """`value` as one whitespace-free TREC field (see the module's notes)."""
    value = str(value)
    if not value:
        return "%00"
    return _UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), value)


def passage_ranking(keys: Sequence[str], scores: Sequence[float]) -> list[tuple[str, float]]:
    """(key, score) of each distinct passage key in rank order, at its best (first) chunk."""
    seen: dict[str, float] = {}
    for key, score in zip(keys, scores):
        if key not in seen:
            seen[key] = float(score)
    return list(seen.items())


_FLT_MIN = np.float32(np.finfo(np.float32).tiny)  # the smallest normal float32


def _below(x: np.float32) -> np.float32:
    """The next float32 below `x`, skipping subnormals (some scorers flush them to zero)."""
    y = np.nextafter(x, np.float32(-np.inf), dtype=np.float32)
    if 0 < abs(y) < _FLT_MIN:
        return np.float32(0.0) if x > 0 else -_FLT_MIN
    return y


def strictly_decreasing(scores: Sequence[float]) -> list[float]:
    """`scores` as float32 values (trec_eval and pytrec_eval keep a run's scores as float32), each lowered,
    where needed, to the next float32 below the one before it, so that no two tie."""
    out: list[np.float32] = []
    for score in scores:
        value = np.float32(score) if np.isfinite(score) else (out[-1] if out else np.float32(0.0))
        if 0 < abs(value) < _FLT_MIN:
            value = np.float32(0.0)
        if out and value >= out[-1]:
            value = _below(out[-1])
        out.append(value)
    return [float(v) for v in out]


def trec_lines(qid: str, ranking: Sequence[tuple[str, float]], tag: str) -> list[str]:
    """The TREC run lines of one query's passage ranking."""
    qid, tag = trec_id(qid), trec_id(tag)
    scores = strictly_decreasing([score for _, score in ranking])
    return [f"{qid} Q0 {trec_id(key)} {rank} {score!r} {tag}"
            for rank, ((key, _), score) in enumerate(zip(ranking, scores), start=1)]


def run_tag(name: str) -> str:
    """The TREC tag (last column) of a system: its name with every run of other characters than
    letters, digits, '.', '_' and '-' replaced by '_'."""
    return _NAME_UNSAFE.sub("_", name).strip("_") or "run"


def run_file_names(systems: Iterable[str]) -> dict[str, str]:
    """{system: file name of its TREC run}: `run_tag(system).trec`, made unique regardless of case."""
    names: dict[str, str] = {}
    taken: set[str] = {"qrels"}
    for system in systems:
        stem = run_tag(system)
        candidate, n = stem, 2
        while candidate.lower() in taken:
            candidate, n = f"{stem}_{n}", n + 1
        taken.add(candidate.lower())
        names[system] = f"{candidate}.trec"
    return names


def check_unique_ids(qids: Sequence[str], what: str) -> None:
    """A run file names queries by id: two queries with one id would merge in any scorer."""
    seen: set[str] = set()
    for qid in qids:
        key = trec_id(qid)
        if key in seen:
            raise TigragError(f"{what}: the query id {qid!r} is used twice; a run file names each query by its id, "
                              "so the ids must be unique")
        seen.add(key)


def trec_run_text(qids: Sequence[str], rankings: Sequence[Sequence[tuple[str, float]]], tag: str) -> str:
    lines = [line for qid, ranking in zip(qids, rankings) for line in trec_lines(qid, ranking, tag)]
    return "".join(line + "\n" for line in lines)


def qrels_beir(queries: Sequence[Query]) -> str:
    """BEIR qrels (`query-id\\tcorpus-id\\tscore` with a header line) of the queries' gold passages."""
    rows = ["query-id\tcorpus-id\tscore"]
    rows += [f"{trec_id(q.qid)}\t{trec_id(key)}\t{grade}" for q in queries for key, grade in q.grades().items()]
    return "\n".join(rows) + "\n"


def qrels_trec(queries: Sequence[Query]) -> str:
    """TREC qrels (`qid 0 docid relevance`) of the queries' gold passages."""
    return "".join(f"{trec_id(q.qid)} 0 {trec_id(key)} {grade}\n" for q in queries for key, grade in q.grades().items())


def write_qrels(path: str | Path, queries: Sequence[Query], record: bool = True, force: bool = False,
                doc_ids: str = "") -> Path:
    """Write the gold of `queries` as qrels: BEIR TSV for a `.tsv` name, TREC qrels otherwise, each gold
    passage named as the queries name it (`experiment.gold_as_passage_ids` gives them the run files' passage
    ids; `doc_ids` says which, in the record). With `record` (a file of its own, not one of a folder the caller
    records), it follows `outputs.py`'s rule (an existing file not written by the engine is refused unless
    `force`) and gets its record beside it."""
    from ..outputs import check_file_output, record_file

    path = Path(path)
    check_unique_ids([q.qid for q in queries], str(path))
    if record:
        check_file_output(path, QRELS, str(path), force=force)
    atomic_write_text(path, qrels_beir(queries) if path.suffix.lower() == ".tsv" else qrels_trec(queries))
    if record:
        record_file(path, QRELS, queries=len(queries), **({"doc_ids": doc_ids} if doc_ids else {}))
    return path


def write_trec_run(path: str | Path, qids: Sequence[str], rankings: Sequence[Sequence[tuple[str, float]]],
                   tag: str, record: bool = True, force: bool = False) -> Path:
    """Write one system's passage rankings as a TREC run (atomically). With `record`, as `write_qrels`:
    the rule of `outputs.py`, then its record (the queries it holds, complete)."""
    from ..outputs import check_file_output, record_file

    path = Path(path)
    check_unique_ids(qids, str(path))
    if record:
        check_file_output(path, TREC_RUN, str(path), force=force)
    atomic_write_text(path, trec_run_text(qids, rankings, tag))
    if record:
        record_file(path, TREC_RUN, queries=len(qids), complete=True)
    return path




@dataclass(frozen=True)
class Conversion:
    """What `jsonl_to_trec` wrote: lines, queries, and the queries the run must hold (None: unknown)."""

    lines: int
    queries: int
    expected: int | None
    complete: bool
    writer: str | None  # "PID N" when a `tigrag run` was still writing the input


def _run_sidecar(results: Path) -> dict:
    import json

    from ..run_resume import FORMAT, meta_path

    try:
        saved = json.loads(meta_path(results).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) and saved.get("format") == FORMAT else {}


def jsonl_to_trec(results: str | Path, output: str | Path, tag: str | None = None, partial: bool = False,
                  force: bool = False) -> Conversion:
    """Write the TREC run of a complete JSONL output of `tigrag run` (rows with `id`, `scores` and
    `doc_ids`); `tag` defaults to the run's method (from its `.meta.json` sidecar).

    A run still being written (its writer lock held), or holding fewer rows than the query count its
    sidecar records (a killed run), or whose sidecar records no count, is refused unless `partial`:
    then its complete lines are converted and the TREC run's record says it is partial. The output
    follows `outputs.py`'s rule (never the input, never a foreign file unless `force`)."""
    import json

    from ..locking import writer_of
    from ..outputs import check_file_output, record_file
    from ..run_resume import meta_path

    results, output = Path(results), Path(output)
    if not results.is_file():
        raise TigragError(f"{results}: no such file" if not results.exists() else f"{results}: not a file")
    check_file_output(output, TREC_RUN, f"-o {output}", inputs=[results, meta_path(results)], force=force)
    sidecar = _run_sidecar(results)
    if tag is None:
        try:
            tag = sidecar["retrieval_config"]["method"]
        except (KeyError, TypeError):
            tag = "tigrag"
    writer = writer_of(results)
    if writer is not None and not partial:
        raise TigragError(f"{results}: still being written by `tigrag run` ({writer}); convert it when the run has "
                          "finished, or pass --partial to convert the queries it holds now (nothing was written)")
    qids, rankings, torn = [], [], False
    with open(results, "rb") as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                if not partial:
                    raise TigragError(f"{results}: line {lineno} is cut short (an interrupted run): finish it with "
                                      "`tigrag run ... --resume` first, or pass --partial to convert the complete "
                                      "lines")
                torn = True
                break
            try:
                row = json.loads(line)
                qids.append(str(row["id"]))
                rankings.append(passage_ranking(row["doc_ids"], row["scores"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise TigragError(f"{results}: line {lineno} is not a result row of `tigrag run` with corpus "
                                  f"passage ids ({type(exc).__name__}: {exc})") from None
    expected = sidecar.get("queries")
    expected = expected if isinstance(expected, int) and not isinstance(expected, bool) else None
    complete = writer is None and not torn and expected is not None and len(qids) == expected
    if not complete and not partial:
        if expected is None:
            reason = (f"its record {meta_path(results).name} is missing or does not say how many queries the run "
                      "must hold (a run of an older version, or not a `tigrag run` output)")
        else:
            reason = f"it holds {len(qids):,} of the {expected:,} queries of its run (unfinished or killed)"
        raise TigragError(f"{results}: {reason}; finish it with `tigrag run ... --resume`, or pass --partial to "
                          "convert what it holds (the TREC run's record then says it is partial); nothing was written")
    write_trec_run(output, qids, rankings, run_tag(tag), record=False)  # checked above, recorded below
    record_file(output, TREC_RUN, queries=len(qids), expected_queries=expected, complete=complete,
                source=str(results.resolve()))
    return Conversion(sum(len(r) for r in rankings), len(qids), expected, complete, writer)
