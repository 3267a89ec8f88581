"""Bridging entities: what the top chunks of a hop hand to the next hop (eqs. 3.10-3.11).

The paper takes every named entity of the top-ι chunks. With title links on, two things are
added: the passage titles that the chunk's text mentions are candidates too (a film passage
names its director, whose passage carries that name as its title), and every candidate
carries the passages whose title it is, so the next hop can bring them in directly. With
`bridge_entities = n`, only the n best candidates of a query are expanded: those naming a
passage first, then by the hop's PPR mass on their tokens (the token graph's own measure of how
close an entity is to the question). Fewer expansions also mean fewer encoder calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

import numpy as np

from ...backend import Backend
from ...index.index import Index
from ...ops.push_ppr import scores_at
from ...text.tokens import valid_tokens
from .entity_source import IndexEntities
from ...text.titles import TitleIndex, entity_key


@dataclass(frozen=True)
class Bridge:
    """One candidate for the next hop: its text, its token ids (nodes of the token graph), the passages it
    names and the NER labels it carries (`index.entities.label_mask` bits; 0 for a title mention)."""

    key: Hashable  # identity across hops (entity id in the paper's mode, normalised text with titles)
    text: str
    tokens: np.ndarray
    passages: tuple[int, ...] = field(default=())
    labels: int = 0


class BridgeFinder:
    """Candidates of each query's top chunks, from the NER table and (optionally) title mentions."""

    def __init__(self, index: Index, entities: IndexEntities, titles: TitleIndex | None):
        self.index, self.entities, self.titles = index, entities, titles
        self._mentions: dict[int, list[int]] = {}
        self._titles: dict[str, np.ndarray] = {}

    def candidates(self, chunk_lists: Sequence[Sequence[int]]) -> list[list[Bridge]]:
        """Per query, its candidates in reading order (entities first), without repeats."""
        out = []
        for chunks, found in zip(chunk_lists, self.entities.of_chunks(chunk_lists)):
            if self.titles is None:
                out.append([Bridge(e, self.entities.text(e), self.entities.tokens_of(e), (), self.entities.labels(e))
                            for e in found])
                continue
            own = {int(self.index.chunk_passage[c]) for c in chunks}
            merged: dict[Hashable, Bridge] = {}
            for e in found:
                text = self.entities.text(e)
                passages = tuple(int(p) for p in self.titles.lookup(text) if int(p) not in own)
                self._add(merged, Bridge(entity_key(text), text, self.entities.tokens_of(e), passages,
                                         self.entities.labels(e)))
            for c in chunks:
                for p in self.mentions(c):
                    if p not in own:
                        title = self.index.passage_titles[p]
                        self._add(merged, Bridge(entity_key(title), title, self._title_tokens(title), (p,)))
            out.append(list(merged.values()))
        return out

    def mentions(self, chunk: int) -> list[int]:
        """Passages whose title chunk `chunk` mentions (cached: top chunks recur across queries)."""
        if chunk not in self._mentions:
            self._mentions[chunk] = self.titles.mentions(self.index.chunk_texts[chunk]) if self.titles else []
        return self._mentions[chunk]

    def _title_tokens(self, title: str) -> np.ndarray:
        """A mentioned title's graph tokens (cached: punkt and Treebank cost ~0.2 ms a title, and the titles
        top chunks mention recur across queries and hops)."""
        if title not in self._titles:
            cfg = self.index.config
            ids = self.index.vocab.encode(valid_tokens(title, cfg.tokens, cfg.chunk.language))
            ids.setflags(write=False)  # shared by every Bridge of that title
            self._titles[title] = ids
        return self._titles[title]

    @staticmethod
    def _add(merged: dict[Hashable, Bridge], bridge: Bridge) -> None:
        if not bridge.key:
            return
        if bridge.key in merged:
            old = merged[bridge.key]
            merged[bridge.key] = Bridge(old.key, old.text, old.tokens, tuple(dict.fromkeys(old.passages + bridge.passages)),
                                        old.labels | bridge.labels)
        else:
            merged[bridge.key] = bridge


def rank_bridges(be: Backend, ppr_scores: Any, columns: Sequence[int], lists: Sequence[list[Bridge]],
                 limit: int) -> list[list[Bridge]]:
    """The `limit` best of each list: candidates naming a passage first, then by the mean PPR
    score of their tokens in their query's column (one gather for the whole batch), then in
    reading order."""
    flat = [(col, bridge) for col, bridges in zip(columns, lists) for bridge in bridges]
    mass = np.zeros(len(flat), dtype=np.float64)
    sizes = np.array([bridge.tokens.size for _, bridge in flat], dtype=np.int64)
    if sizes.sum():
        rows = np.concatenate([bridge.tokens for _, bridge in flat])
        cols = np.repeat(np.array([col for col, _ in flat], dtype=np.int64), sizes)
        gathered = be.to_host(scores_at(be, ppr_scores, rows, cols)).astype(np.float64)
        owner = np.repeat(np.arange(len(flat)), sizes)
        mass = np.bincount(owner, weights=gathered, minlength=len(flat)) / np.maximum(sizes, 1)
    out: list[list[Bridge]] = []
    start = 0
    for bridges in lists:
        key = [(bool(b.passages), mass[start + i], -i) for i, b in enumerate(bridges)]
        order = sorted(range(len(bridges)), key=key.__getitem__, reverse=True)
        out.append([bridges[i] for i in order[:limit]])
        start += len(bridges)
    return out
