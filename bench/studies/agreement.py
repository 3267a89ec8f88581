"""How far two rankings of the same queries agree: the faithfulness benchmarks compare the engine's
rankings with a method's public code on the same passages, query by query.

Rankings are lists of passage keys (any hashable: corpus index, title), best first, one list per
query, in the same query order on both sides.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Hashable, Sequence

Ranking = Sequence[Hashable]


def jaccard_at(a: Ranking, b: Ranking, k: int) -> float:
    """|top-k(a) ∩ top-k(b)| / |top-k(a) ∪ top-k(b)| (1.0 when both are empty)."""
    left, right = set(a[:k]), set(b[:k])
    union = left | right
    return len(left & right) / len(union) if union else 1.0


@dataclass(frozen=True)
class Agreement:
    """Agreement of two sets of rankings over the same queries."""

    queries: int
    jaccard_at_10: float  # mean over queries
    same_top1: int  # queries whose first result is the same
    identical_top10: int  # queries whose top-10 lists are equal, order included

    def as_dict(self) -> dict:
        return asdict(self)


def agreement(left: Sequence[Ranking], right: Sequence[Ranking]) -> Agreement:
    """Compare two sets of rankings query by query (they must cover the same queries)."""
    if len(left) != len(right):
        raise ValueError(f"rankings of {len(left)} and {len(right)} queries cannot be compared")
    n = len(left)
    return Agreement(
        queries=n,
        jaccard_at_10=sum(jaccard_at(a, b, 10) for a, b in zip(left, right)) / n if n else 1.0,
        same_top1=sum(bool(a) and bool(b) and a[0] == b[0] for a, b in zip(left, right)),
        identical_top10=sum(list(a[:10]) == list(b[:10]) for a, b in zip(left, right)),
    )
