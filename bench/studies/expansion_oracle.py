"""How few expanded queries could suffice: an in-sample oracle picks each question's pairs (issue 31, item 3).

    python bench/studies/expansion_oracle.py [--datasets musique_train100 2wikimultihopqa] [--caps 2 3]

Every order the earlier studies tried (bench/results/expansion_passes.md, expansion_tail.md) keeps the first n pairs
of a rule and loses recall on MuSiQue-100 at n = 3. This study asks whether any rule could do better: `best`
(5 passes) is the reference; each of its embedded pairs is left out alone (the question's hop-1 vector instead of
its own, one round per place of the bridging order, as bench/studies/expansion_value.py does) and its value is its
question's ΔR@5 + ΔR@2. The oracle then embeds, per question, only the pairs whose value is negative, the most
valuable first, at most `cap` of them; every other pair takes the question's vector. It knows each question's gold,
so it is an in-sample bound on what a rule choosing single pairs could reach (not a strict one: two pairs that
find the same passage each show no value alone). A last row adds to each question's valued pairs the others in
bridging order until its R@2 and R@5 are best's: the pairs it needs. Texts: 1 + the pairs embedded, per question. Writes
bench/results/expansion_oracle.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, write_results  # noqa: E402
from bench.studies.named_expansions import BRIDGE_FIVE, index_label  # noqa: E402
from bench.studies.expansion_value import choosing  # noqa: E402
from bench.studies.spectrag_default_index import e5_index, halves  # noqa: E402


def study(name: str, index, dataset, caps: list[int]) -> dict:
    """Rows {variant: {part: recall, per-query R@2/R@5, texts per question}} (module doc)."""
    from gpu_tigrag.encoders import CachingEncoder, index_encoder_config, load_encoder
    from gpu_tigrag.evaluate.metrics import per_query_metrics
    from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
    from gpu_tigrag.presets import preset_with

    encoder = CachingEncoder(load_encoder(index_encoder_config(index)))  # each text encoded once over the rounds
    queries = dataset.queries
    questions = [q.text for q in queries]
    position = {text: i for i, text in enumerate(questions)}

    def run(keep, record=None) -> dict[int, np.ndarray]:
        with choosing(keep, record):
            results = TigragRetriever(index, preset_with("best", BRIDGE_FIVE), encoder=encoder,
                                      backend="numpy").retrieve(questions, k=10)
        values = per_query_metrics([r.titles for r in results], queries)
        return {k: np.asarray(values[f"recall_dedup@{k}"]) for k in (2, 5, 10)}

    pairs: list[dict] = []
    reference = run(None, pairs)
    pairs = [p for p in pairs if p["embedded"]]
    for place in sorted({p["place"] for p in pairs}):
        left_out = run(lambda question, entity, at, place=place: at != place)
        for p in pairs:
            if p["place"] == place:
                q = position[p["question"]]
                p["value"] = float(left_out[5][q] - reference[5][q] + left_out[2][q] - reference[2][q])
        print(f"place {place}: {sum(p['value'] < 0 for p in pairs if p['place'] == place)} pairs of value",
              file=sys.stderr, flush=True)
    texts_reference = np.ones(len(questions))
    for p in pairs:
        texts_reference[position[p["question"]]] += 1
    rows = {"best (5 passes)": (reference, texts_reference)}
    for cap in [*caps, None]:
        chosen: dict[str, list[dict]] = {}
        for p in sorted((p for p in pairs if p["value"] < 0), key=lambda p: (p["value"], p["place"])):
            if cap is None or len(chosen.setdefault(p["question"], [])) < cap:
                chosen.setdefault(p["question"], []).append(p)
        kept = {(q, p["entity"], p["place"]) for q, ps in chosen.items() for p in ps}
        record: list[dict] = []
        measured = run(lambda question, entity, at, kept=kept: (question, entity, at) in kept, record)
        texts = np.ones(len(questions))
        for p in record:
            texts[position[p["question"]]] += p["embedded"]
        label = f"oracle, at most {cap} pairs" if cap is not None else "oracle, every pair of value"
        rows[label] = (measured, texts)
    # the pairs a question needs: its valued pairs, then the rest in bridging order until its R@2 and R@5 are best's
    needed = {(p["question"], p["entity"], p["place"]) for p in pairs if p["value"] < 0}
    queue: dict[str, list[tuple]] = {}
    for p in sorted(pairs, key=lambda p: p["place"]):
        if (p["question"], p["entity"], p["place"]) not in needed:
            queue.setdefault(p["question"], []).append((p["question"], p["entity"], p["place"]))
    for _ in range(1 + max((len(v) for v in queue.values()), default=0)):
        record = []
        measured = run(lambda question, entity, at: (question, entity, at) in needed, record)
        short = [q for q in questions if any(measured[k][position[q]] < reference[k][position[q]] for k in (2, 5))
                 and queue.get(q)]
        if not short:
            break
        needed |= {queue[q].pop(0) for q in short}
    texts = np.ones(len(questions))
    for p in record:
        texts[position[p["question"]]] += p["embedded"]
    rows["oracle, the pairs each question needs"] = (measured, texts)
    linked = {(p["question"], p["entity"], p["place"]): p["linked"] for p in pairs}
    needs = {"pairs": len(needed), "questions": len({q for q, _, _ in needed}),
             "by_place": {str(place): sum(1 for n in needed if n[2] == place) for place in sorted({n[2] for n in needed})},
             "naming_a_passage": sum(linked.get(n, False) for n in needed),
             "best_pairs_by_place": {str(place): sum(1 for p in pairs if p["place"] == place)
                                     for place in sorted({p["place"] for p in pairs})},
             "best_pairs_naming_a_passage": sum(p["linked"] for p in pairs)}
    print(needs, file=sys.stderr, flush=True)
    parts = {}
    for part, part_queries in halves(name, dataset).items():
        ids = np.array([position[q.text] for q in part_queries])
        parts[part] = {label: {"recall": [100 * float(r[k][ids].mean()) for k in (2, 5, 10)],
                               "r2": r[2][ids].tolist(), "r5": r[5][ids].tolist(),
                               "texts_per_query": float(texts[ids].mean())}
                       for label, (r, texts) in rows.items()}
    return {"queries": len(questions), "pairs_embedded_by_best": len(pairs),
            "pairs_of_value": sum(p["value"] < 0 for p in pairs), "needed": needs, "parts": parts}


def table(name: str, values: dict) -> list[str]:
    from gpu_tigrag.evaluate.significance import randomization_test

    lines = [f"## {name} ({values['queries']} queries; best embeds {values['pairs_embedded_by_best']} pairs, "
             f"{values['pairs_of_value']} of them of value alone)", ""]
    needs = values["needed"]
    places = ", ".join(f"{int(place) + 1}: {count} of {needs['best_pairs_by_place'].get(place, 0)}"
                       for place, count in needs["by_place"].items())
    lines += [f"The pairs the questions need: {needs['pairs']} in {needs['questions']} questions; "
              f"{needs['naming_a_passage']} of them name a passage (of best's {values['pairs_embedded_by_best']} "
              f"pairs, {needs['best_pairs_naming_a_passage']} do); by place of the bridging order (needed of "
              f"best's): {places}.", ""]
    for part, rows in values["parts"].items():
        reference = rows["best (5 passes)"]
        lines += [f"{part}:", "", "| variant | R@2 / R@5 / R@10 | texts | Δ R@2 | Δ R@5 |", "|---|---|---|---|---|"]
        for label, row in rows.items():
            delta = " | " if row is reference else (
                f"{row['recall'][0] - reference['recall'][0]:+.2f} | {row['recall'][1] - reference['recall'][1]:+.2f} "
                f"(p {randomization_test(row['r5'], reference['r5']):.3f})")
            lines.append(f"| {label} | {' / '.join(f'{v:.2f}' for v in row['recall'])} | "
                         f"{row['texts_per_query']:.2f} | {delta} |")
        lines.append("")
    return lines


def reading(datasets: dict) -> list[str]:
    """What the rows say, in numbers of this run."""
    lines = ["## Reading", ""]
    for name, values in datasets.items():
        needs, parts = values["needed"], values["parts"]
        texts = ", ".join(f"{part} {rows['oracle, the pairs each question needs']['texts_per_query']:.2f}"
                          for part, rows in parts.items())
        reference = ", ".join(f"{part} {rows['best (5 passes)']['texts_per_query']:.2f}" for part, rows in parts.items())
        early = sum(count for place, count in needs["by_place"].items() if int(place) < 3)
        lines.append(f"- {name}: with its own pairs chosen in hindsight a question keeps best's R@2 and R@5 at "
                     f"{texts} texts per question (best: {reference}); {needs['pairs']} pairs are needed, "
                     f"{needs['naming_a_passage']} of them name a passage and {early} sit in the first three places "
                     f"of the bridging order.")
    return lines + ["", "So the cap is not short of capacity: about 0.4 pairs per question carry what best's five "
                    "carry. What is missing is a rule that tells those pairs apart before retrieval; the order by "
                    "mean PPR mass finds 2Wiki's (they name passages and come first) but not MuSiQue's, which spread "
                    "over the order and mostly name no passage.", ""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--caps", nargs="*", type=int, default=[],
                        help="also rows of the valued pairs, at most CAP per question")
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = "python bench/studies/expansion_oracle.py --datasets " + " ".join(args.datasets) + (
        " --caps " + " ".join(map(str, args.caps)) if args.caps else "")
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`. Each dataset's e5 index (the engine's "
             "default), preset `best`; recall@2/5/10 (passage-level) in points; texts: encoder texts per question "
             "(the question and its embedded pairs); Δ against `best`, R@5 with the paired randomisation test's "
             "p-value. The oracle is chosen on the very queries it is scored on (module doc).", ""]
    for name in args.datasets:
        index = e5_index(name)
        values = payload["datasets"][name] = study(name, index, load_dataset(DATA / name), args.caps)
        lines += [f"Index: {index_label(index)}.", ""] + table(name, values)
    lines += reading(payload["datasets"])
    text = "\n".join(lines)
    print(text)
    write_results("expansion_oracle", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
