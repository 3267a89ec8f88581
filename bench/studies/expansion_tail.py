"""What the expanded queries past the pass cap get, and in which order the cap keeps them (issue 31, item 3).

    python bench/studies/expansion_tail.py [--datasets musique_train100 2wikimultihopqa] [--index e5|minilm]

`best` embeds "question entity" for the first `expansion_passes` (5) entities of the bridging order; the pairs past
the cap take the question's hop-1 vector (`expansion._named_from_question`). Three cheaper ways to keep what the
cut pairs carry, each at 2-3 passes (≤ 4 encoder texts per question, the issue's target):

* `joint tail`: one more pass per question, over "question e_a e_b …" of its cut entities in bridging order, the
  vector every cut pair takes;
* `sum tail`: normalize(vec(question) + 0.5·vec(entity)) for each cut pair; the entity texts are not counted
  (they stand for vectors an index could hold for its entities: query-independent);
* another bridging order for the cap (and for `bridge_entities`): the entities' tokens by mean IDF in the corpus
  (specific names first) or in reading order, instead of their mean PPR mass (`bridging.rank_bridges`).

Each is set in by patching the engine for the run; `best` and its settings are unchanged. Chosen on the
developer data (MuSiQue-100, 2Wiki's first half), reported with 2Wiki's second half; Δ against `best`.
Writes bench/results/expansion_tail[_minilm].{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, dataset_index, write_results  # noqa: E402
from bench.studies.named_expansions import BRIDGE_FIVE, delta_table, index_label, run_halves  # noqa: E402
from bench.studies.spectrag_default_index import e5_index  # noqa: E402

PASSES = "tigrag.fusion.expansion_passes"
REFERENCE = "best (5 passes, question tail)"
#: label: (passes, tail: "question" | "joint" | "sum", order: "mass" | "idf" | "reading")
VARIANTS = {
    REFERENCE: (5, "question", "mass"),
    "3 passes, question tail": (3, "question", "mass"),
    "2 passes, joint tail": (2, "joint", "mass"),
    "3 passes, joint tail": (3, "joint", "mass"),
    "3 passes, sum tail (w 0.5)": (3, "sum", "mass"),
    "3 passes, IDF order": (3, "question", "idf"),
    "3 passes, reading order": (3, "question", "reading"),
}
SUM_WEIGHT = 0.5


@contextmanager
def tail(kind: str):
    """The engine with the pairs its pass cap cuts given `kind`'s vector (module doc) instead of the question's."""
    from gpu_tigrag.methods.tigrag import expansion

    engine = expansion._named_from_question

    def patched(retriever, questions, entity_texts, texts, owner, question_vectors, links=None, ranks=None,
                repeats=None):
        capped = retriever.settings.fusion.expansion_passes
        vectors = engine(retriever, questions, entity_texts, texts, owner, question_vectors, links, ranks, repeats)
        if not capped or not texts:
            return vectors
        marked = _embedded(engine, retriever, questions, entity_texts, texts, owner, question_vectors, links, ranks,
                           repeats)
        kept = expansion.first_passes(owner, marked, ranks, capped)
        cut = np.flatnonzero(marked & ~kept)
        if cut.size == 0:
            return vectors
        xp = retriever.be.xp
        rank = ranks if ranks is not None else np.arange(len(texts))
        flat = [e for entities in entity_texts for e in entities]
        if kind == "joint":
            groups: dict[int, list[int]] = {}
            for i in sorted(cut.tolist(), key=lambda i: (owner[i], rank[i])):
                groups.setdefault(int(owner[i]), []).append(i)
            joint = retriever.encode([" ".join([questions[q], *(flat[i] for i in pairs)]) for q, pairs in groups.items()])
            for row, pairs in enumerate(groups.values()):
                vectors[xp.asarray(np.asarray(pairs))] = joint[row].astype(xp.float32)
        else:
            distinct: dict[str, int] = {}
            rows = np.array([distinct.setdefault(flat[i], len(distinct)) for i in cut], dtype=np.int64)
            counted = retriever.timer.encoded_texts
            entity_vectors = retriever.encode(list(distinct))
            retriever.timer.encoded_texts = counted  # vectors an index could hold: not the query's texts
            vectors[xp.asarray(cut)] = expansion.combine(retriever.be, retriever.be.asarray(question_vectors),
                                                         entity_vectors, owner[cut], rows, SUM_WEIGHT)
        return vectors

    if kind != "question":
        expansion._named_from_question = patched
    try:
        yield
    finally:
        expansion._named_from_question = engine


def _embedded(engine, retriever, questions, entity_texts, texts, owner, question_vectors, links, ranks, repeats):
    """bool per pair: whether the engine without the cap embeds the pair (it is not named, contained or a repeat),
    found by running its choice with the cap off and an encoder stand-in that records the texts and computes
    nothing (so nothing is counted)."""
    from gpu_tigrag.config import replace_path

    settings, encode, asked = retriever.settings, retriever.encode, set()
    xp = retriever.be.xp

    def record(batch):
        asked.update(batch)
        return xp.zeros((len(batch), question_vectors.shape[1]), dtype=xp.float32)

    retriever.settings, retriever.encode = replace_path(settings, "fusion.expansion_passes", 0), record
    try:
        engine(retriever, questions, entity_texts, texts, owner, question_vectors, links, ranks, repeats)
    finally:
        retriever.settings, retriever.encode = settings, encode
    return np.array([text in asked for text in texts], dtype=bool)


@contextmanager
def order(kind: str, index):
    """The engine with `rank_bridges` ordering a hop's candidates (after "names a passage first") by `kind`."""
    from gpu_tigrag.methods.tigrag import retriever as tigrag_retriever

    engine = tigrag_retriever.rank_bridges
    counts = np.diff(index.bm25.tocsc().indptr).astype(np.float64)
    idf = np.log((index.bm25.shape[0] - counts + 0.5) / (counts + 0.5) + 1.0)

    def patched(be, ppr_scores, columns, lists, limit):
        out = []
        for bridges in lists:
            def key(i: int, bridges=bridges):
                b = bridges[i]
                specific = float(idf[b.tokens].mean()) if b.tokens.size else 0.0
                return (bool(b.passages), specific if kind == "idf" else 0.0, -i)
            out.append([bridges[i] for i in sorted(range(len(bridges)), key=key, reverse=True)[:limit]])
        return out

    if kind != "mass":
        tigrag_retriever.rank_bridges = patched
    try:
        yield
    finally:
        tigrag_retriever.rank_bridges = engine


def main() -> int:
    indexes = {"e5": e5_index, "minilm": dataset_index}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--index", choices=list(indexes), default="e5")
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = "python bench/studies/expansion_tail.py --datasets " + " ".join(args.datasets) + f" --index {args.index}"
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`. Recall@2/5/10 (passage-level) in points; texts: "
             "encoder texts per question (the question, its expanded queries and the joint tails; not the sum tail's "
             f"entity texts); Δ against `{REFERENCE}`, R@5 with the paired randomisation test's p-value. Variants: "
             "the module doc of bench/studies/expansion_tail.py.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        index = indexes[args.index](name)
        rows = {}
        for label, (passes, kind, ranking) in VARIANTS.items():
            with tail(kind), order(ranking, index):
                rows[label] = run_halves(name, label, index, dataset, "TIGRAG best",
                                         {**BRIDGE_FIVE, PASSES: passes})
        payload["datasets"][name] = {"index": index_label(index), **rows}
        lines += [f"Index: {index_label(index)}.", ""] + delta_table(name, dataset, rows, REFERENCE)
    text = "\n".join(lines)
    print(text)
    write_results("expansion_tail" + ("" if args.index == "e5" else f"_{args.index}"), payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
