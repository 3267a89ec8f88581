"""SpectRAG's title-link lift: its utility-question edges, directed, from the query's most relevant seeds (issue 35).

    python bench/studies/spectrag_lift.py [--datasets musique_train100 2wikimultihopqa beir_scifact] [--encoders e5 MiniLM]

An LLM's utility question for a chunk asks about what the chunk names ("who is the director it names?"); on a
Wikipedia-style corpus the chunk that answers it is the passage with that title. `spectrag.link_seeds` r and
`spectrag.link_lift` λ use those edges directed (chunk_signals.forward_title_links): the query's r most relevant
seeds and every chunk of each passage they name join the candidates and score λ more. Before the lift, the same
pairs as an undirected graph signal (spectrag_links.md) changed R@5 by about a point: PPR restarting uniformly at
all 20 seeds spreads the lift over every passage any seed names, and symmetric edges add every passage that names
a seed.

Rows: the grid r × λ on top of `SpectRAG best` without the lift (chosen on the developer queries: MuSiQue-100 and
2Wiki's first half, mean R@2/5/10, on the default e5 index; 2Wiki's second half is held back), then the registered
systems: the paper's behaviour, the paper's plus the lift alone, `SpectRAG best` and each of its mechanisms
removed. e5: the engine's default index (multilingual-e5-small, onnx-int8, default chunks); MiniLM: the benchmark
indexes (all-MiniLM-L6-v2, one chunk per passage). R@5 is tested against Hybrid's on the same queries (paired
randomisation test, two-sided). Writes bench/results/spectrag_lift.{json,md}.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.studies.encoders import base_index  # noqa: E402
from bench.studies.spectrag_default_index import e5_index  # noqa: E402
from bench.studies.lift_study import DEVELOPER, run_study  # noqa: E402


def registered() -> dict[str, tuple[str, dict]]:
    """{row: (system, settings)}: Hybrid, NaiveRAG and the SpectRAG systems that hold the lift or its ablations."""
    from gpu_tigrag.methods.spectrag import BEST_ABLATIONS

    rows = {name: (name, {}) for name in ("Hybrid", "NaiveRAG", "SpectRAG", "SpectRAG + title-link lift",
                                          "SpectRAG best")}
    rows.update({name: (name, {}) for name in BEST_ABLATIONS})
    return rows


def reach(index, dataset, settings: dict) -> dict:
    """Where the gold passages `SpectRAG` with `settings` misses at 5 are: how many, how many the run's first two
    passages name by title (text/titles.forward_title_links, any chunk of the passage), and how many passages those
    two name that are not among its first five (the lift's cost)."""
    import numpy as np

    from gpu_tigrag.evaluate.experiment import Experiment, system_config
    from gpu_tigrag.methods.registry import System
    from gpu_tigrag.text.titles import forward_title_links

    links = forward_title_links(index.chunk_texts, index.chunk_passage, index.passage_titles,
                                index.config.chunk.title_in_chunk).tocoo()
    passage = np.asarray(index.chunk_passage, dtype=np.int64)
    names = {}
    for a, b in zip(passage[links.row], passage[links.col]):
        names.setdefault(int(a), set()).add(int(b))
    experiment = Experiment(index, dataset, backend="numpy")
    run = experiment.run_config("probe", system_config(System("probe", "spectrag", settings), experiment.base, {}))
    key = {title: p for p, title in enumerate(index.passage_titles)}
    gold = missed = named = 0
    extra = []
    for query, chunk_ids in zip(dataset.queries, run.chunk_ids):
        ranked = list(dict.fromkeys(int(passage[c]) for c in chunk_ids))
        first = set(ranked[:5])
        reached = set().union(*(names.get(p, set()) for p in ranked[:2]))
        extra.append(len(reached - first))
        for title in query.gold:
            gold += 1
            if key.get(title) not in first:
                missed += 1
                named += key.get(title) in reached
    return {"gold": gold, "missed_at_5": missed, "named_by_first_two": named,
            "named_not_in_first_five": float(np.mean(extra))}


def reach_lines(name: str, dataset, encoders: list[str], payload: dict) -> list[str]:
    """On the developer datasets' e5 index: where `SpectRAG best` without the lift misses gold (`reach`)."""
    from gpu_tigrag.index.build import add_method
    from gpu_tigrag.methods.spectrag import BEST_WITHOUT_LIFT

    if name not in DEVELOPER or "e5" not in encoders:
        return []
    found = reach(add_method(e5_index(name), "spectrag"), dataset, BEST_WITHOUT_LIFT)
    payload.setdefault("reach", {})[name] = found
    return [f"`SpectRAG best` without the lift on the e5 index of {name}: of {found['gold']:,} gold passages it "
            f"misses {found['missed_at_5']:,} at 5, of which {found['named_by_first_two']:,} are named by title "
            f"in its first two passages; those two name {found['named_not_in_first_five']:.1f} passages on "
            "average that are not among its first five.", ""]


def main() -> int:
    from gpu_tigrag.index.build import add_method
    from gpu_tigrag.methods.spectrag import BEST_WITHOUT_LIFT

    return run_study("spectrag_lift.py", "SpectRAG's title-link lift", __doc__, "spectrag", "SpectRAG", registered(),
                     BEST_WITHOUT_LIFT, lambda name, encoder: add_method(
                         e5_index(name) if encoder == "e5" else base_index(name), "spectrag"), reach_lines)

if __name__ == "__main__":
    sys.exit(main())
