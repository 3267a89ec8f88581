"""Sentence-window chunking, eq. 3.1: chunk k holds sentences (k-1)l+1 .. (k-1)l+s, l = s - o.

A passage of at most s sentences is one chunk. A longer one gets windows starting every l
sentences, kept while the start lies inside the passage, so no tail is dropped (a last
window may be shorter than s). Measured: on the 2Wiki corpus (6,119 passages) this yields
exactly the paper's 7,870 chunks (Table 1); starting windows in short passages too would
give 8,431, and stopping once the end is covered 7,553.
"""

from __future__ import annotations

from typing import Sequence


def window_starts(n_sentences: int, size: int, stride: int) -> range:
    """Start offsets of the sentence windows of a passage of `n_sentences` sentences."""
    if n_sentences <= 0:
        return range(0)
    if n_sentences <= size:
        return range(0, 1)
    return range(0, n_sentences, stride)


def chunk_sentences(sentences: Sequence[str], size: int, overlap: int) -> list[str]:
    """The chunk texts of one passage: windows of `size` sentences overlapping by `overlap`."""
    stride = size - overlap
    return [" ".join(sentences[start : start + size]) for start in window_starts(len(sentences), size, stride)]
