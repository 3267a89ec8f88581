"""SpectRAG's token-budgeted context selection (public code: `query/cluster_selection.py`,
`_token_budget_select`), for a block of queries on the host.

Per query, over its candidates ranked by score (best first, equal scores in chunk-id order):

    top = the best score
    order: repeatedly take, among the remaining candidates scoring at least
           best_remaining − (1 − tie_band)·|best_remaining|, the best one of a passage not yet
           covered (the best remaining one when every passage there is covered)
    for x in order:
        floor = core_floor·top while fewer than core_size are selected, else tail_floor·top
        below the floor: set x aside (gated); continue
        if something is selected and used + tokens(x) > budget: the budget is full; stop
        select x
    if the budget is not full: add the gated ones, best first, while they score at least
        core_floor·top and fit the budget

The band is tie_band·best for a positive best (the code's `best − 0.02·best`); written with
|best| it also holds the best remaining candidate when scores are negative. tie_band = 1 keeps
the plain ranking (the code skips the coverage order when its band is 0).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _select_one(scores, tokens, passages, count, budget, core_size, core_floor, tail_floor, tie_band, out):
    """Selection for one query; `scores` ranked best first. Writes positions into `out`, returns how many."""
    if count == 0:
        return 0
    top = scores[0]
    head = core_floor * top
    tail = tail_floor * top
    order = np.arange(count)
    if tie_band < 1.0:
        # passages numbered 0..m-1 locally, so "covered" is a flag array
        by_passage = np.argsort(passages[:count], kind="mergesort")
        local = np.empty(count, dtype=np.int64)
        group = -1
        previous = -1
        for r in range(count):
            p = passages[by_passage[r]]
            if r == 0 or p != previous:
                group += 1
                previous = p
            local[by_passage[r]] = group
        covered = np.zeros(group + 1, dtype=np.bool_)
        taken = np.zeros(count, dtype=np.bool_)
        first = 0
        for t in range(count):
            while taken[first]:
                first += 1
            best = scores[first]
            cutoff = best - (1.0 - tie_band) * abs(best)
            pick = first
            q = first
            while q < count and scores[q] >= cutoff:
                if not taken[q] and not covered[local[q]]:
                    pick = q
                    break
                q += 1
            order[t] = pick
            taken[pick] = True
            covered[local[pick]] = True
    selected = 0
    used = 0
    gated = np.empty(count, dtype=np.int64)
    n_gated = 0
    full = False
    for t in range(count):
        x = order[t]
        floor = head if selected < core_size else tail
        if scores[x] < floor:
            gated[n_gated] = x
            n_gated += 1
            continue
        if selected > 0 and used + tokens[x] > budget:
            full = True
            break
        out[selected] = x
        selected += 1
        used += tokens[x]
    if not full and n_gated > 0:
        gated = gated[:n_gated]
        by_score = np.argsort(-scores[gated], kind="mergesort")  # stable: equal scores keep the gated order
        for r in range(n_gated):
            x = gated[by_score[r]]
            if scores[x] < head:
                break
            if selected > 0 and used + tokens[x] > budget:
                break
            out[selected] = x
            selected += 1
            used += tokens[x]
    return selected


@njit(parallel=True, cache=True)
def select_context(scores, tokens, passages, counts, budget, core_size, core_floor, tail_floor, tie_band, out,
                   n_selected):
    """All queries of a block: row b of `scores` (float64, B × m, ranked best first), `tokens` and
    `passages` (int64) holds its first counts[b] candidates. Writes into row b of `out` the ranked
    positions of the context in selection order, and their number into n_selected[b]."""
    for b in prange(scores.shape[0]):
        n_selected[b] = _select_one(scores[b], tokens[b], passages[b], counts[b], budget, core_size, core_floor,
                                    tail_floor, tie_band, out[b])


def select_contexts(scores: np.ndarray, tokens: np.ndarray, passages: np.ndarray, counts: np.ndarray, budget: int,
                    core_size: int, core_floor: float, tail_floor: float, tie_band: float) -> tuple[np.ndarray, np.ndarray]:
    """(positions B × m int64, -1 past each context; context sizes B) for ranked host arrays."""
    b, m = scores.shape
    out = np.full((b, m), -1, dtype=np.int64)
    n_selected = np.zeros(b, dtype=np.int64)
    if b and m:
        select_context(np.ascontiguousarray(scores, dtype=np.float64), np.ascontiguousarray(tokens, dtype=np.int64),
                       np.ascontiguousarray(passages, dtype=np.int64), np.ascontiguousarray(counts, dtype=np.int64),
                       int(budget), int(core_size), float(core_floor), float(tail_floor), float(tie_band), out,
                       n_selected)
    return out, n_selected
