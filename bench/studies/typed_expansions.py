"""Three expansion passes in answer-type order: the expanded queries a question needs, at ≤ 4 encoder texts (issue 31,
item 3).

    python bench/studies/typed_expansions.py [--datasets musique_train100 2wikimultihopqa] [--index e5|minilm]
        [--speed] [--pairs]

`best` embedded "question entity" for the first 5 of a question's bridging entities in the bridging order (an
earlier hop first, then entities naming a passage, then by the hop's PPR mass on their tokens): 5.2-5.4 encoder
texts per question. Three passes in that order cost MuSiQue-100 1.5 points of R@2 and 1.7 of R@5
(bench/results/expansion_tail.md): the pair a compositional question needs is the answer of its inner clause
("the city where the performers of Brother were formed"), and its place in the PPR order is anywhere from 1 to 7
(bench/results/expansion_oracle.md). `tigrag.fusion.expansion_order=typed` gives the passes first to entities
naming a passage, then to those whose NER label is a type the question names (gpu_tigrag/text/answer_types.py:
"city" → GPE/LOC/FAC/NORP, "performers" → PERSON), then the bridging order. Rows: `best` before (5 passes, bridging
order) is the reference; every expansion embedded; 3 passes in each order; `best` now (3 passes, typed); 2 and 4
typed passes. The order and the lexicon were chosen on the developer data (MuSiQue-100, 2Wiki's first half);
2Wiki's second half is held back. Each row's R@5 is tested against the reference (paired randomisation test).
`--speed` also times `best` end to end before and after; `--pairs` adds, per dataset, how the pairs whose loss
alone lowers a question's recall (bench/studies/expansion_value.py) split by answer type. Writes
bench/results/typed_expansions[_minilm].{json,md}.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.studies.named_expansions import BRIDGE_FIVE, variant_study  # noqa: E402

PASSES = "tigrag.fusion.expansion_passes"
ORDER = "tigrag.fusion.expansion_order"
REFERENCE = "best before (5 passes, bridging order)"
VARIANTS = {  # label -> (preset, settings)
    REFERENCE: ("TIGRAG best", BRIDGE_FIVE),
    "best, every expansion embedded": ("TIGRAG best", {PASSES: 0}),
    "3 passes, bridging order": ("TIGRAG best", {ORDER: "bridge"}),
    "**best** (3 passes, typed order)": ("TIGRAG best", {}),
    "2 passes, typed order": ("TIGRAG best", {PASSES: 2}),
    "4 passes, typed order": ("TIGRAG best", {PASSES: 4}),
}


def typed_pairs(index, dataset) -> dict:
    """The pairs `best` embeds uncapped, and those whose loss alone lowers their question's R@2 or R@5
    (`expansion_value.pair_values`), split by whether the entity names a passage and whether its NER labels
    (anywhere in the corpus) meet the types its question names."""
    from bench.studies.expansion_value import pair_values
    from gpu_tigrag.config_types import ENTITY_LABELS
    from gpu_tigrag.methods.tigrag.entity_source import IndexEntities
    from gpu_tigrag.text.answer_types import expected_label_mask

    entities = IndexEntities(index, ENTITY_LABELS)  # the labels the engine's typed order reads
    by_text: dict[str, int] = {}
    for entity, text in enumerate(index.entities.texts):
        by_text[text] = by_text.get(text, 0) | entities.labels(entity)
    counts: dict[str, list[int]] = {}
    for pair in pair_values(index, dataset)["pairs"]:
        typed = bool(by_text.get(pair["entity"], 0) & expected_label_mask(pair["question"]))
        group = "names a passage" if pair["linked"] else ("of a type the question names" if typed else "other")
        valued = pair["d_r5"] < 0 or pair["d_r2"] < 0
        for label in ("every embedded pair", group):
            counts.setdefault(label, [0, 0])
            counts[label][0] += 1
            counts[label][1] += valued
    return counts


def pairs_lines(name: str, counts: dict) -> list[str]:
    lines = [f"Pairs of `best` uncapped ({name}), by answer type; of value: its loss alone lowers its question's R@2 "
             "or R@5:", "", "| pairs | count | of value |", "|---|---|---|"]
    for label in ("every embedded pair", "names a passage", "of a type the question names", "other"):
        count, valued = counts.get(label, [0, 0])
        lines.append(f"| {label} | {count} | {valued} |")
    return lines + [""]


if __name__ == "__main__":
    sys.exit(variant_study(__doc__, "bench/studies/typed_expansions.py", VARIANTS, REFERENCE,
                           {"`best` before": BRIDGE_FIVE, "`best`": {}}, "typed_expansions",
                           pairs=(typed_pairs, pairs_lines)))
