"""Where the bridging entities of a hop come from (eq. 3.10, N = NER(H)).

`IndexEntities` looks them up in the table the index build filled by running NER once per
chunk: the default, and what keeps multi-hop a lookup. `QueryTimeEntities` runs NER on the
top-ι chunks of each hop while retrieving, as the paper describes it, to check that the two
agree (`entities_at="query"`). Both give entity ids of the index's table, so the expanded
queries, and hence the results, can be compared one to one; an entity that query-time NER
finds and the table lacks gets a fresh id after the table's.

The table keeps every occurrence with the label NER gave it there, so with a deterministic
NER the two give the same entities in the same order (bench/studies/ner_equivalence.py measures it).
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...index.entities import entities_from_lists, extract_entities, label_mask, normalise_entity
from ...index.index import Index

EntityExtractor = Callable[[Sequence[str]], list[list[tuple[str, str]]]]


class IndexEntities:
    """Entities of each chunk from the index's table, filtered by the configured labels."""

    def __init__(self, index: Index, labels: Sequence[str]):
        self.table = index.entities
        self.mask = label_mask(labels)
        self._labels: np.ndarray | None = None

    def of_chunks(self, chunk_lists: Sequence[Sequence[int]]) -> list[list[int]]:
        """Per list of chunks: ids of the entities tagged with an allowed label, in reading order."""
        return [[e for c in chunks for e in self.table.of_chunk(c, self.mask)] for chunks in chunk_lists]

    def text(self, entity: int) -> str:
        return self.table.texts[entity]

    def tokens_of(self, entity: int) -> np.ndarray:
        return self.table.tokens_of(entity)

    def labels(self, entity: int) -> int:
        """Bit mask of every label NER gave the entity anywhere in the corpus (`label_mask`'s bits): the
        answer-type order of the expansion passes reads it (text/answer_types.py). Built on first use, one
        pass over the table's occurrences."""
        if self._labels is None:
            masks = np.zeros(len(self.table.texts), dtype=np.int64)
            np.bitwise_or.at(masks, self.table.chunk_ids.astype(np.int64), self.table.chunk_masks.astype(np.int64))
            self._labels = masks
        return int(self._labels[entity])


class QueryTimeEntities(IndexEntities):
    """NER on the chunk texts at query time, one batched call per hop; ids shared with the table."""

    def __init__(self, index: Index, labels: Sequence[str], extractor: EntityExtractor | None = None):
        super().__init__(index, labels)
        self.index = index
        self.extract = extractor or (lambda texts: extract_entities(texts, index.config.entities))
        self.ids = {name.lower(): e for e, name in enumerate(self.table.texts)}
        self.extra: list[tuple[str, np.ndarray]] = []  # entities the table lacks: (text, token ids)
        self.extra_labels: list[int] = []  # the labels query-time NER gave each of them

    def of_chunks(self, chunk_lists: Sequence[Sequence[int]]) -> list[list[int]]:
        flat = [c for chunks in chunk_lists for c in chunks]
        found = iter(self.extract([self.index.chunk_texts[c] for c in flat]))
        out = []
        for chunks in chunk_lists:
            ids: list[int] = []
            for names in (next(found) for _ in chunks):  # per chunk: distinct, as the table's lookup
                tagged = [(normalise_entity(name), label_mask([label])) for name, label in names
                          if label_mask([label]) & self.mask]
                ids.extend(dict.fromkeys(self._id(name, mask) for name, mask in tagged if name))
            out.append(ids)
        return out

    def _id(self, name: str, mask: int = 0) -> int:
        key = name.lower()
        n = len(self.table.texts)
        if key not in self.ids:
            self.ids[key] = n + len(self.extra)
            tokens = entities_from_lists([[name]], self.index.vocab, self.index.config.tokens).token_ids
            self.extra.append((name, tokens))
            self.extra_labels.append(0)
        entity = self.ids[key]
        if entity >= n:
            self.extra_labels[entity - n] |= mask
        return entity

    def text(self, entity: int) -> str:
        n = len(self.table.texts)
        return self.table.texts[entity] if entity < n else self.extra[entity - n][0]

    def tokens_of(self, entity: int) -> np.ndarray:
        n = len(self.table.texts)
        return self.table.tokens_of(entity) if entity < n else self.extra[entity - n][1]

    def labels(self, entity: int) -> int:
        n = len(self.table.texts)
        return super().labels(entity) if entity < n else self.extra_labels[entity - n]
