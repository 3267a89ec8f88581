"""Query files with gold evidence titles, in the formats of the evaluation data
(docs/design-notes.md#evaluation-data).

Gold evidence: 2Wiki `supporting_titles` (or the titles of
`supporting_facts`), MuSiQue the titles of `paragraphs[*].is_supporting`, HotpotQA the
titles in `supporting_facts`, or a plain `gold_titles` list (the example corpus); or `gold_ids`, the
corpus's own ids of the gold passages (then the whole file names gold by id: `gold_match`).
Accepts a JSON list or JSONL. A query's id and text are read as `records.py` says (the same keys
and precedence as `tigrag run`): `_id`, then `id`, then `qid`, else its position in the file.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..corpus import iter_jsonl
from ..errors import CorpusError
from ..records import UniqueQueryIds, as_record, id_text, parse_json, query_id, query_text, valid_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Query:
    """A question, its gold passages (titles, or BEIR corpus ids) and their relevance grades."""

    qid: str
    text: str
    gold: tuple[str, ...]
    answer: str = ""
    qtype: str = ""
    gold_grades: tuple[int, ...] = ()  # empty: every gold passage has grade 1
    gold_by: str = "title"  # how `gold` names passages: "title", or "doc_id" (the corpus's own passage ids)

    def grades(self) -> dict[str, int]:
        return dict(zip(self.gold, self.gold_grades or (1,) * len(self.gold)))


def _gold_titles(record: dict[str, Any], where: str) -> tuple[str, ...]:
    if "gold_titles" in record:
        titles = record["gold_titles"]
    elif "supporting_titles" in record:
        titles = record["supporting_titles"]
    elif "paragraphs" in record:
        titles = [p["title"] for p in record["paragraphs"] if p.get("is_supporting")]
    elif "supporting_facts" in record:
        titles = [fact[0] for fact in record["supporting_facts"]]
    else:
        raise CorpusError(
            f"{where}: no gold evidence (expected 'gold_ids', 'gold_titles', 'supporting_titles', "
            "'paragraphs[*].is_supporting' or 'supporting_facts')"
        )
    if not isinstance(titles, list) or not all(isinstance(t, str) for t in titles):
        raise CorpusError(f"{where}: gold titles must be a list of strings")
    return tuple(dict.fromkeys(valid_text(t, where, "gold title").strip() for t in titles))


def _gold_ids(record: dict[str, Any], where: str) -> tuple[str, ...]:
    """`gold_ids`: the passage ids of the gold passages (the corpus's `_id`/`id`/`idx`), strings or numbers."""
    ids = record["gold_ids"]
    if not isinstance(ids, list):
        raise CorpusError(f"{where}: 'gold_ids' must be a list of passage ids, got {type(ids).__name__}")
    return tuple(dict.fromkeys(id_text(value, where, "gold_ids") for value in ids))


def _query(data: Any, where: str, position: int) -> Query:
    record = as_record(data, where, "'question' and gold evidence")
    text = query_text(record, where)
    if not text.strip():
        raise CorpusError(f"{where}: missing field 'question' (a non-empty string)")
    qid = query_id(record, where, position)
    answer = record.get("answer", "")
    if "gold_ids" in record:
        if "gold_titles" in record:
            raise CorpusError(f"{where}: both 'gold_ids' and 'gold_titles' are given; give the gold passages one way "
                              "(ids name them as runs and qrels do)")
        gold, by = _gold_ids(record, where), "doc_id"
    else:
        gold, by = _gold_titles(record, where), "title"
    return Query(qid, text.strip(), gold, answer if isinstance(answer, str) else str(answer),
                 str(record.get("type", "")), gold_by=by)


def gold_match(path: str | Path, queries: Sequence[Query]) -> str:
    """How the gold of a query file names passages: "doc_id" when every query gives `gold_ids`, "title"
    when none does; a file that mixes the two is an error naming the first query of each kind."""
    kinds = {q.gold_by for q in queries}
    if len(kinds) > 1:
        by_id = next(q.qid for q in queries if q.gold_by == "doc_id")
        by_title = next(q.qid for q in queries if q.gold_by == "title")
        raise CorpusError(f"{path}: query {by_id!r} gives its gold as 'gold_ids' (passage ids) and query {by_title!r} "
                          "by title; one file names gold passages one way: give every query 'gold_ids', or none")
    return kinds.pop() if kinds else "title"


def load_queries(path: str | Path) -> list[Query]:
    """Queries with gold titles from a JSON list or a JSONL file; two queries with one id are an error
    naming both records."""
    path = Path(path)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        records = [(r, f"{path}: line {n}") for n, r in iter_jsonl(path)]
    else:
        try:
            raw = path.read_bytes().decode("utf-8")
        except FileNotFoundError:
            raise CorpusError(f"{path}: no such file") from None
        except UnicodeDecodeError as exc:
            raise CorpusError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
        data = parse_json(raw, str(path))
        if not isinstance(data, list):
            raise CorpusError(f"{path}: expected a JSON list of queries")
        records = [(r, f"{path}: record {i}") for i, r in enumerate(data)]
    queries = [_query(r, where, i) for i, (r, where) in enumerate(records)]
    ids = UniqueQueryIds()
    for query, (_, where) in zip(queries, records):
        ids.add(query.qid, where)
    if not queries:
        raise CorpusError(f"{path}: no queries found")
    check_gold_present(path, queries)
    return queries


#: query ids named in the warning about queries without gold passages
SHOWN_IDS = 5


def check_gold_present(path: Path, queries: list[Query]) -> None:
    """Queries with an empty gold list (`gold_titles: []`) score 0 on every metric: a warning naming
    the file and their ids, or an error when no query has gold (as `datasets.check_gold` treats gold
    passages missing from the index)."""
    empty = [q.qid for q in queries if not q.gold]
    if not empty:
        return
    if len(empty) == len(queries):
        raise CorpusError(f"{path}: none of the {len(queries):,} queries has a gold passage (empty gold lists, e.g. "
                          "'gold_titles': []): recall cannot be measured")
    shown = ", ".join(repr(qid) for qid in empty[:SHOWN_IDS]) + (", …" if len(empty) > SHOWN_IDS else "")
    log.warning("%s: %d of the %d queries have no gold passage (empty gold list; ids %s); each counts as a miss",
                path, len(empty), len(queries), shown)
