"""Expanded queries whose entity repeats the question's tokens: the question's vector instead of a pass
(issue 31, item 3).

    python bench/studies/repeated_expansions.py [--datasets musique_train100 2wikimultihopqa] [--index e5|minilm]
        [--speed]

Many bridging entities only say the question's subject again in another form: "Jonathan Douglass Reid" or "Peter
Phillip Bonetti" for a question about "Jonathan Reid" or "Peter Bonetti", a NER duplicate "Harris W. Fawell
Fawell". `tigrag.fusion.named_expansions=repeats` gives such an entity the question's hop-1 vector instead of an
encoder pass over "question entity" when its graph tokens are all the question's, or all but one with at least two
shared (`repeats_question` in gpu_tigrag/methods/tigrag/expansion.py; its tokens still seed the hop). Under the cap
on passes the passes it saves go to the next entities of the bridging order. Rows: `best` with and without it,
uncapped and under 5, 4 and 3 passes. 2Wiki's first half is the developer half, its second half held back;
MuSiQue-100 whole. Each row's R@5 is tested against `best` before it (named_expansions=question, 5 passes; paired
randomisation test). `--speed` also times `best` end to end with and without it. Writes
bench/results/repeated_expansions[_minilm].{json,md}.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.studies.named_expansions import BRIDGE_FIVE, variant_study  # noqa: E402

SETTING = "tigrag.fusion.named_expansions"
PASSES = "tigrag.fusion.expansion_passes"
REFERENCE = "best before (named from the question, 5 passes)"
VARIANTS = {  # label -> (preset, settings)
    REFERENCE: ("TIGRAG best", {SETTING: "question", PASSES: 5}),
    "**best** (repeats from the question, 5 passes)": ("TIGRAG best", {PASSES: 5}),
    "best before, uncapped": ("TIGRAG best", {SETTING: "question", PASSES: 0}),
    "best, repeats, uncapped": ("TIGRAG best", {PASSES: 0}),
    "best before, 4 passes": ("TIGRAG best", {SETTING: "question", PASSES: 4}),
    "best, repeats, 4 passes": ("TIGRAG best", {PASSES: 4}),
    "best, repeats, 3 passes": ("TIGRAG best", {PASSES: 3}),
}


if __name__ == "__main__":
    sys.exit(variant_study(__doc__, "bench/studies/repeated_expansions.py", VARIANTS, REFERENCE,
                           {"`best` before": {SETTING: "question"}, "`best`": {}}, "repeated_expansions",
                           best_base=BRIDGE_FIVE))
