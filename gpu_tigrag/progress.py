"""Progress bars (tqdm on stderr), shown only when the caller asks for them."""

from __future__ import annotations

import sys
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, enabled: bool, total: int | None = None, unit: str = "it") -> Iterator[T]:
    if not enabled:
        yield from items
        return
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, total=total, unit=unit, file=sys.stderr, dynamic_ncols=True)


class _NullBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def counter(total: int, desc: str, enabled: bool, unit: str = "it"):
    """A manually advanced bar (`.update(n)`, `.close()`), e.g. queries done per batch."""
    if not enabled:
        return _NullBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True)
