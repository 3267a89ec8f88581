"""Evaluation datasets: a corpus plus queries with gold passages.

Two layouts are read:
  * HippoRAG protocol: a folder with `*_corpus.json` (passages) and one query file (2Wiki
    `supporting_titles`/`supporting_facts`, MuSiQue `paragraphs[*].is_supporting`, HotpotQA
    `supporting_facts`, or `gold_titles`); gold passages are matched by title.
  * BEIR: a folder with `corpus.jsonl`, `queries.jsonl` and `qrels/<split>.tsv`; gold are the
    qrels' corpus ids with their grades, matched by passage id. A query's id and text are read
    as `records.py` says (`_id` first); a BEIR query must have an id.
A single query file (JSON/JSONL) with a separate corpus is also a dataset, matched by title, or by
passage id where its queries give `gold_ids`.
"""

from __future__ import annotations

import csv
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..checksums import sha256_file
from ..corpus import iter_jsonl
from ..errors import CorpusError
from ..records import UniqueQueryIds, as_record, query_id, query_text
from .queries import Query, gold_match, load_queries

log = logging.getLogger(__name__)


@dataclass
class Dataset:
    name: str
    corpus_paths: list[Path]
    queries: list[Query]
    match: str = "title"  # how gold is matched to passages: "title" or "doc_id"
    checksums: dict[str, str] = field(default_factory=dict)  # file name -> sha256


def _checksums(paths: list[Path]) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in paths}


def is_beir(folder: Path) -> bool:
    return (folder / "corpus.jsonl").is_file() and (folder / "queries.jsonl").is_file() and (folder / "qrels").is_dir()


def qrels_file(folder: Path, split: str) -> Path:
    """`qrels/SPLIT.tsv` of a BEIR folder; a split without one is an error naming those there are."""
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        raise CorpusError(f"{qrels_path}: no qrels for split {split!r} (available: {', '.join(splits) or 'none'})")
    return qrels_path


def read_qrels(folder: Path, split: str) -> dict[str, dict[str, int]]:
    """{query id: {corpus id: grade}} of a BEIR folder's split, positive grades only."""
    qrels_path = qrels_file(folder, split)
    grades: dict[str, dict[str, int]] = {}
    with open(qrels_path, encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for lineno, row in enumerate(reader, start=1):
            if lineno == 1 and row and row[0] == "query-id":
                continue
            if len(row) < 3:
                raise CorpusError(f"{qrels_path}: line {lineno}: expected query-id, corpus-id, score")
            try:
                grade = int(row[2])
            except ValueError:
                raise CorpusError(f"{qrels_path}: line {lineno}: score {row[2]!r} is not an integer") from None
            if grade > 0:
                grades.setdefault(row[0], {})[row[1]] = grade
    return grades


def load_beir(folder: Path, split: str = "test") -> Dataset:
    grades = read_qrels(folder, split)
    qrels_path = qrels_file(folder, split)
    queries: list[Query] = []
    path = folder / "queries.jsonl"
    ids = UniqueQueryIds()
    for lineno, data in iter_jsonl(path):
        where = f"{path}: line {lineno}"
        record = as_record(data, where, "'_id' and 'text'")
        qid = query_id(record, where, None)
        ids.add(qid, where)  # two queries of one id would share its qrels and merge in any scorer
        if qid in grades:
            gold = grades[qid]
            text = query_text(record, where).strip()
            if not text:
                raise CorpusError(f"{path}: line {lineno}: query {qid!r} is empty (an empty query cannot be evaluated)")
            queries.append(Query(qid, text, tuple(gold), gold_grades=tuple(gold.values())))
    if not queries:
        raise CorpusError(f"{folder}: no query of {path.name} has relevance judgements in {qrels_path.name}")
    files = [folder / "corpus.jsonl", path, qrels_path]
    return Dataset(folder.name, [folder / "corpus.jsonl"], queries, match="doc_id", checksums=_checksums(files))


def load_hipporag(folder: Path) -> Dataset:
    corpora = sorted(folder.glob("*_corpus.json"))
    query_files = sorted(p for p in folder.glob("*.json") if p not in corpora)
    if len(corpora) != 1 or len(query_files) != 1:
        raise CorpusError(
            f"{folder}: expected one *_corpus.json and one query .json file, found corpora "
            f"{[p.name for p in corpora]} and query files {[p.name for p in query_files]}"
        )
    queries = load_queries(query_files[0])
    return Dataset(folder.name, corpora, queries, gold_match(query_files[0], queries),
                   _checksums(corpora + query_files))


def query_file(path: str | Path) -> Path:
    """The file holding the queries of `path`: the file itself, `queries.jsonl` of a BEIR folder, or the
    query file of a HippoRAG-protocol folder (its one `*.json` that is not `*_corpus.json`)."""
    path = Path(path)
    if not path.is_dir():
        return path
    if is_beir(path):
        return path / "queries.jsonl"
    corpora = sorted(path.glob("*_corpus.json"))
    query_files = sorted(p for p in path.glob("*.json") if p not in corpora)
    if len(query_files) != 1:
        raise CorpusError(f"{path}: expected a BEIR folder (corpus.jsonl, queries.jsonl, qrels/) or one query .json "
                          f"file beside *_corpus.json, found query files {[p.name for p in query_files]}")
    return query_files[0]


def load_dataset(path: str | Path, split: str = "test") -> Dataset:
    """A dataset folder (BEIR or HippoRAG protocol) or a single query file."""
    path = Path(path)
    if path.is_dir():
        return load_beir(path, split) if is_beir(path) else load_hipporag(path)
    if not path.exists():
        raise CorpusError(f"{path}: no such dataset folder or query file")
    queries = load_queries(path)
    return Dataset(path.stem, [], queries, gold_match(path, queries), _checksums([path]))


def check_gold(passage_keys: Iterable[str], queries: Sequence[Query], match: str = "title") -> int:
    """Gold passages of `queries` that are not among `passage_keys` (the index's titles or ids, as
    `match` says): a warning with the count, an error when none of the gold is there. Returns the count."""
    keys = set(passage_keys)
    gold = {g for q in queries for g in q.gold}
    missing = gold - keys
    if gold and missing == gold:
        raise CorpusError(f"none of the {len(gold):,} gold passages of the queries is in the index (matched by "
                          f"{match}): is the index built from this dataset's corpus?")
    if missing:
        affected = sum(any(g in missing for g in q.gold) for q in queries)
        log.warning("%d of %d gold passages (of %d of the %d queries) are not in the index (matched by %s); they "
                    "count as misses", len(missing), len(gold), affected, len(queries), match)
    return len(missing)


#: ir_datasets' ids of the BEIR sets, `beir/NAME` or `beir/NAME/SPLIT` (e.g. beir/scifact/test)
IR_DATASETS_BEIR = re.compile(r"beir/(?P<name>[a-z0-9-]+)(?:/(?P<split>train|dev|test))?")


def dataset_id(spec: str | Path) -> tuple[str | Path, str | None]:
    """(name or path, split) of a dataset given as a path, a registry name or an ir_datasets id of a BEIR
    set (`beir/scifact/test` -> ("scifact", "test")): the data itself is read from disk, as `tigrag
    datasets fetch` left it; an existing path always wins."""
    if Path(spec).exists():
        return spec, None
    found = IR_DATASETS_BEIR.fullmatch(str(spec))
    if found is None:
        return spec, None
    return found["name"], found["split"]


def dataset_path(name_or_path: str | Path, data_dir: str | Path | None = None) -> Path:
    """Where the dataset `name_or_path` is: the path itself when it exists; else, with `data_dir`, the folder
    `tigrag datasets fetch NAME --to DATA_DIR` made (DATA_DIR/NAME, or DATA_DIR/NAME/NAME where a BEIR zip
    holds its own folder). A registry name found nowhere is an error saying how to fetch it. An ir_datasets
    id of a BEIR set (`beir/scifact`, `beir/scifact/test`) names that set (`dataset_id`)."""
    name_or_path = dataset_id(name_or_path)[0]
    path = Path(name_or_path)
    if path.exists():
        return path
    name = str(name_or_path)
    if data_dir is not None:
        for candidate in (Path(data_dir) / name / name, Path(data_dir) / name):
            if candidate.is_dir() and (is_beir(candidate) or any(candidate.glob("*_corpus.json"))):
                return candidate
        if (Path(data_dir) / name).exists():
            return Path(data_dir) / name
    from .fetch import REGISTRY

    if name in REGISTRY:
        where = f" in --data-dir {data_dir}" if data_dir is not None else ""
        raise CorpusError(f"{name}: a dataset of the registry, not found here{where}; fetch it with `tigrag datasets "
                          f"fetch {name} --to DIR` and pass `--data-dir DIR` (or give its folder)")
    return path


@dataclass(frozen=True)
class QuerySource:
    """What `tigrag run` and `tigrag bench` read queries from: a query file or a dataset folder and, for
    a BEIR folder, optionally one split: then only the queries its qrels judge, in the query file's order
    (the queries `eval` answers for that split)."""

    path: Path
    split: str | None = None

    def __str__(self) -> str:
        return f"{self.path} ({self.split} split)" if self.split else str(self.path)

    def judged(self) -> set[str] | None:
        """The ids of the split's judged queries; None where every query of the file is read."""
        return None if self.split is None else set(read_qrels(self.path, self.split))


def choose_split(spec: str | Path, split: str | None) -> str | None:
    """The split to read: `split` (the user's --split, None: not given) or the one an ir_datasets id names;
    both, and different, is an error."""
    named = dataset_id(spec)[1]
    if split is not None and named is not None and split != named:
        raise CorpusError(f"{spec} names the {named} split, --split says {split}; give one of them")
    return split or named


def query_source(spec: str | Path, data_dir: str | Path | None = None, split: str | None = None) -> QuerySource:
    """The queries named by `spec`: a query file, a dataset folder, a registry name found under `data_dir`
    or an ir_datasets id of a BEIR set (`beir/scifact/test` reads the test split's queries), with `split`
    choosing a BEIR folder's split (an id naming another split is an error)."""
    split = choose_split(spec, split)
    path = dataset_path(spec, data_dir)
    if split is not None and not (path.is_dir() and is_beir(path)):
        raise CorpusError(f"{path}: --split {split} picks the queries a BEIR folder's qrels judge, and this is not "
                          "a BEIR folder (corpus.jsonl, queries.jsonl, qrels/)")
    if split is not None:
        qrels_file(path, split)  # a split without qrels fails here, naming the splits there are
    return QuerySource(path, split)
