"""LiteSemRAG's title-link lift: the bridging entities of its top chunks that are another passage's subject (issue 35).

    python bench/studies/litesemrag_lift.py [--datasets musique_train100 2wikimultihopqa beir_scifact] [--encoders e5 MiniLM]

LiteSemRAG's semantic graph links a query's matched spans to the chunks that hold them; what its top chunks name
and the query does not, it never follows. On a Wikipedia-style corpus such a name is often the title of the passage
the next hop needs. `litesemrag.link_seeds` r and `litesemrag.link_lift` λ: the ranking's first r chunks and every
chunk of each passage they name by title (directed title links, text/titles.forward_title_links) score λ × the
query's top score more, and the ranking is sorted again (ops/title_lift.py).

Rows: the grid r × λ on top of `LiteSemRAG best` without the lift (chosen on the developer queries: MuSiQue-100
and 2Wiki's first half, mean R@2/5/10; 2Wiki's second half is held back), then the registered systems: the paper's
behaviour, the paper's plus the lift alone, `LiteSemRAG best` and each of its mechanisms removed (SciFact, where
passages do not name each other's titles, is the check that the lift does no harm: registered systems only). e5: the default
index (multilingual-e5-small, onnx-int8, default chunks) with its LiteSemRAG stage (default settings), cached as
method_claims.py caches it; MiniLM: the benchmark index (all-MiniLM-L6-v2) with its stage, as litesemrag.py caches
it. R@5 is tested against Hybrid's on the same queries (paired randomisation test,
two-sided). Writes bench/results/litesemrag_lift.{json,md}.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.studies.lift_study import run_study  # noqa: E402


def registered() -> dict[str, tuple[str, dict]]:
    """{row: (system, settings)}: Hybrid, NaiveRAG and the LiteSemRAG systems that hold the lift or its ablations."""
    from gpu_tigrag.methods.litesemrag import BEST_ABLATIONS

    rows = {name: (name, {}) for name in ("Hybrid", "NaiveRAG", "LiteSemRAG", "LiteSemRAG + title-link lift",
                                          "LiteSemRAG best")}
    rows.update({name: (name, {}) for name in BEST_ABLATIONS})
    return rows


def main() -> int:
    from bench.litesemrag import stage_index
    from bench.method_claims import default_index
    from gpu_tigrag.methods.litesemrag import BEST_WITHOUT_LIFT

    return run_study("litesemrag_lift.py", "LiteSemRAG's title-link lift", __doc__, "litesemrag", "LiteSemRAG",
                     registered(), BEST_WITHOUT_LIFT,
                     lambda name, encoder: default_index(name) if encoder == "e5" else stage_index(name))

if __name__ == "__main__":
    sys.exit(main())
