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
