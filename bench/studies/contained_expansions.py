"""Expanded queries whose entity another entity of the question contains: the question's vector instead of a pass
(issue 31, item 3).

    python bench/studies/contained_expansions.py [--datasets musique_train100 2wikimultihopqa] [--index e5|minilm]
        [--speed]

A hop's bridging entities often come in pairs where one name is part of the other: "Begum" beside "Ameena Begum",
a passage title "Halden" beside the entity "Royal Conservatory of Halden". The max-cosine rerank takes the best of
a question's vectors, and the pass over "question Ameena Begum" already holds the shorter name, so
`tigrag.fusion.contained_expansions=question` gives the contained entity the question's hop-1 vector instead of its
own pass (gpu_tigrag/methods/tigrag/expansion.py; its tokens still seed the hop). Under `best`'s cap of 5 passes
the passes it saves go to the next entities of the bridging order. Rows: `best` (which takes it), `best` without it,
both uncapped, and with the cap at 4 and 3 passes (the issue's ≤ 4 texts per question); `paper` with and without.
2Wiki's first half is the developer half, its second half held back; MuSiQue-100 whole. Each row's R@5 is tested
against `best` with every expansion embedded (paired randomisation test). `--speed` also times `best` end to end
with and without it. Writes bench/results/contained_expansions[_minilm].{json,md}.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.studies.named_expansions import BRIDGE_FIVE, variant_study  # noqa: E402

SETTING = "tigrag.fusion.contained_expansions"
PASSES = "tigrag.fusion.expansion_passes"
REFERENCE = "best, every expansion embedded"
VARIANTS = {  # label -> (preset, settings)
    REFERENCE: ("TIGRAG best", {SETTING: "text", PASSES: 0}),
    "best, contained from the question, uncapped": ("TIGRAG best", {PASSES: 0}),
    "best without contained (5 passes)": ("TIGRAG best", {SETTING: "text"}),
    "**best** (contained from the question, 5 passes)": ("TIGRAG best", {}),
    "best, 4 passes": ("TIGRAG best", {PASSES: 4}),
    "best, 3 passes": ("TIGRAG best", {PASSES: 3}),
    "paper": ("TIGRAG paper", {}),
    "paper + contained from the question": ("TIGRAG paper", {SETTING: "question"}),
}


if __name__ == "__main__":
    sys.exit(variant_study(__doc__, "bench/studies/contained_expansions.py", VARIANTS, REFERENCE,
                           {"`best` without contained": {SETTING: "text"}, "`best`": {}}, "contained_expansions",
                           best_base=BRIDGE_FIVE))
