"""Which expanded queries earn their encoder pass: each pair left out alone (issue 31, item 3).

    python bench/studies/expansion_value.py [--datasets musique_train100 2wikimultihopqa]

`best` with every expansion embedded (`expansion_passes=0`) on each dataset's e5 index is the reference. Round j
gives the j-th pair of every question's bridging order the question's hop-1 vector instead of its own (a query's
ranking depends on its own pairs only, so one batch leaves out one pair of every question at once), and a pair's
value is its question's R@5 (R@2) with it left out minus the reference's. Pairs that `best` already answers with
the question's vector (named, repeated or contained entities) have no value to lose and are not counted. Rows: by
place in the bridging order, by whether the entity names a passage, and by whether the question has such an
entity at all. A negative total is recall that a cap on passes would lose if it dropped exactly those pairs; the
pairs left out together can lose less (another pair's vector finds the same passage). Writes
bench/results/expansion_value.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, write_results  # noqa: E402
from bench.studies.named_expansions import index_label  # noqa: E402
from bench.studies.spectrag_default_index import e5_index  # noqa: E402

import numpy as np  # noqa: E402

UNCAPPED = {"tigrag.fusion.expansion_passes": 0}


@contextmanager
def choosing(keep, record: list | None = None):
    """Expanded-query vectors as the engine makes them, except that a pair (question, entity, place) for which
    `keep` is False takes the question's hop-1 vector (keep None: every pair as the engine makes it); `record` gets
    one dict per pair (question, entity, place, linked: whether the entity names a passage, embedded: whether the
    pair ends with a vector of its own)."""
    from gpu_tigrag.methods.tigrag import retriever as tigrag_retriever

    engine = tigrag_retriever.expanded_query_vectors

    def patched(retriever, questions, entity_texts, question_vectors=None, entity_links=None, entity_ranks=None,
                entity_repeats=None):
        vectors, owner = engine(retriever, questions, entity_texts, question_vectors, entity_links, entity_ranks,
                                entity_repeats)
        host = retriever.be.to_host(vectors).copy()
        own = retriever.be.to_host(retriever.be.asarray(question_vectors))
        flat = [(q, e, int(r), bool(linked)) for q, (entities, ranks, links)
                in enumerate(zip(entity_texts, entity_ranks, entity_links)) for e, r, linked in zip(entities, ranks, links)]
        for i, (q, entity, place, linked) in enumerate(flat):
            if keep is not None and not keep(questions[q], entity, place):
                host[i] = own[q]
            if record is not None:
                record.append({"question": questions[q], "entity": entity, "place": place, "linked": linked,
                               "embedded": not np.array_equal(host[i], own[q])})
        return retriever.be.asarray(host), owner

    tigrag_retriever.expanded_query_vectors = patched
    try:
        yield
    finally:
        tigrag_retriever.expanded_query_vectors = engine


def leaving_out(place: int | None, record: list | None = None):
    """`choosing` with each question's pair at `place` of its bridging order given the question's hop-1 vector
    (None: every pair as the engine makes it)."""
    return choosing(None if place is None else (lambda question, entity, at: at != place), record)


def pair_values(index, dataset) -> dict:
    """The reference's R@2 / R@5 per query and every embedded pair with its value (module doc)."""
    from gpu_tigrag.encoders import CachingEncoder, index_encoder_config, load_encoder
    from gpu_tigrag.evaluate.metrics import per_query_metrics
    from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
    from gpu_tigrag.presets import preset_with

    encoder = CachingEncoder(load_encoder(index_encoder_config(index)))  # each text encoded once over the rounds
    queries = dataset.queries
    questions = [q.text for q in queries]
    position = {text: i for i, text in enumerate(questions)}

    def run(place, record=None):
        with leaving_out(place, record):
            results = TigragRetriever(index, preset_with("best", UNCAPPED), encoder=encoder,
                                      backend="numpy").retrieve(questions, k=10)
        values = per_query_metrics([r.titles for r in results], queries)
        return {k: np.asarray(values[f"recall_dedup@{k}"]) for k in (2, 5)}

    pairs: list[dict] = []
    reference = run(None, pairs)
    pairs = [p for p in pairs if p["embedded"]]
    for place in sorted({p["place"] for p in pairs}):
        left_out = run(place)
        for p in pairs:
            if p["place"] == place:
                q = position[p["question"]]
                p["d_r2"], p["d_r5"] = (float(left_out[k][q] - reference[k][q]) for k in (2, 5))
    with_link = {p["question"] for p in pairs if p["linked"]}
    for p in pairs:
        p["question_has_linked"] = p["question"] in with_link
    return {"queries": len(queries), "reference_r2": float(reference[2].mean()), "reference_r5": float(reference[5].mean()),
            "pairs": pairs}


def table(name: str, values: dict) -> list[str]:
    n, pairs = values["queries"], values["pairs"]
    groups: dict[str, list[dict]] = defaultdict(list)
    for p in pairs:
        groups["every embedded pair"].append(p)
        groups[f"place {p['place'] + 1} of the bridging order"].append(p)
        groups["names a passage" if p["linked"] else "names no passage"].append(p)
        if not p["linked"]:
            groups["names no passage, beside one that does" if p["question_has_linked"]
                   else "names no passage, none of its question's does"].append(p)
    lines = [f"## {name} ({n} queries)", "",
             f"Reference (`best`, every expansion embedded): R@2 {100 * values['reference_r2']:.2f}, R@5 "
             f"{100 * values['reference_r5']:.2f}; {len(pairs) / n:.2f} embedded pairs per question.", "",
             "| pairs | count | per question | lowering R@5 alone | ΣΔR@5 (points) | ΣΔR@2 (points) |",
             "|---|---|---|---|---|---|"]
    order = ["every embedded pair", *sorted(k for k in groups if k.startswith("place")),
             "names a passage", "names no passage", "names no passage, beside one that does",
             "names no passage, none of its question's does"]
    for label in order:
        rows = groups.get(label, [])
        lines.append(f"| {label} | {len(rows)} | {len(rows) / n:.2f} | {sum(p['d_r5'] < 0 for p in rows)} | "
                     f"{100 * sum(p['d_r5'] for p in rows) / n:+.2f} | {100 * sum(p['d_r2'] for p in rows) / n:+.2f} |")
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = "python bench/studies/expansion_value.py --datasets " + " ".join(args.datasets)
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`. Each dataset's e5 index; a pair's value: "
             "its question's R@5 (R@2) with the pair's vector replaced by the question's, minus the reference's, "
             "summed over the pairs of a row and given in points of the dataset's mean.", ""]
    for name in args.datasets:
        index = e5_index(name)
        values = payload["datasets"][name] = pair_values(index, load_dataset(DATA / name))
        lines += [f"Index: {index_label(index)}.", ""] + table(name, values)
    text = "\n".join(lines)
    print(text)
    write_results("expansion_value", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
