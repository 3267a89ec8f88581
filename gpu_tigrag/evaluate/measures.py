"""Measures of the user's choosing (`tigrag eval --metrics "AP P@5 nDCG@10 R@100 Judged@10"`), computed
by ir_measures on each system's passage run against the qrels, both in the engine's one doc-id space:
exactly what an external scorer computes from the `--save-runs` files, beside the built-in HippoRAG
recall. Each measure's per-query values join the system's per-query table, so the significance tests
and `per_query.tsv` cover them too; a query the run does not answer scores as ir_measures scores it
(0 for every measure here: each dataset query is in the run, possibly with no passage).

ir_measures is an optional dependency (`pip install ir-measures`, in the `test` and `eval` extras).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import TigragError


def _ir_measures() -> Any:
    try:
        import ir_measures
    except ImportError:
        raise TigragError("--metrics needs ir_measures (`pip install ir-measures`, or the package's `eval` extra); "
                          "the built-in metrics need nothing") from None
    return ir_measures


def parse_measures(spec: str | Sequence[str] | None) -> list[Any]:
    """The ir_measures measures of `spec` ("AP P@5 nDCG@10", spaces or commas), each checked here, before
    any work; a name ir_measures does not know is an error naming it."""
    if not spec:
        return []
    names = spec.replace(",", " ").split() if isinstance(spec, str) else [n for s in spec for n in s.replace(",", " ").split()]
    if not names:
        return []
    ir_measures = _ir_measures()
    out = []
    for name in dict.fromkeys(names):
        try:
            out.append(ir_measures.parse_measure(name))
        except Exception as exc:  # ir_measures raises NameError, ValueError, TypeError for bad names
            raise TigragError(f"--metrics: {name!r} is not a measure ir_measures knows ({exc}); e.g. AP, P@5, "
                              "nDCG@10, R@100, RR@10, Judged@10 (ir-measur.es lists them)") from None
    return out


def measure_depth(measures: Sequence[Any]) -> int:
    """The deepest cutoff among `measures` (0 when none has one): the passage runs must reach it."""
    return max((int(m.params["cutoff"]) for m in measures if m.params.get("cutoff")), default=0)


def score_measures(measures: Sequence[Any], qids: Sequence[str], rankings: Sequence[Sequence[tuple[str, float]]],
                   qrels: dict[str, dict[str, int]]) -> dict[str, list[float]]:
    """{str(measure): value per query, in `qids` order} of each measure, by ir_measures, on the passage
    rankings ([(passage id, score)] best first) against `qrels` ({qid: {passage id: grade}})."""
    if not measures:
        return {}
    from .runfiles import strictly_decreasing

    ir_measures = _ir_measures()
    run = {qid: dict(zip([doc for doc, _ in ranking], strictly_decreasing([s for _, s in ranking])))
           for qid, ranking in zip(qids, rankings)}
    values: dict[str, dict[str, float]] = {str(m): {} for m in measures}
    for row in ir_measures.iter_calc(list(measures), qrels, run):
        values[str(row.measure)][row.query_id] = float(row.value)
    return {name: [found.get(qid, 0.0) for qid in qids] for name, found in values.items()}
