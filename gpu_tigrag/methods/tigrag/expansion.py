"""The vectors of the expanded queries μ ⊕ e (eq. 3.15) that rerank an expanded hop's pool.

The paper embeds each text "question entity" in its own encoder pass; a hop's max-cosine rerank
(`rerank.masked_max_cosine`) then takes, per question, the best of its vectors.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def expanded_query_vectors(retriever: Any, questions: Sequence[str],
                           entity_texts: Sequence[Sequence[str]]) -> tuple[Any, np.ndarray]:
    """(vectors on the backend, owner): one vector per (question, entity), `owner[i]` the position in
    `questions` of vector i's question; each vector embeds "question entity" (eq. 3.15)."""
    texts = [f"{question} {entity}" for question, entities in zip(questions, entity_texts) for entity in entities]
    owner = np.repeat(np.arange(len(questions), dtype=np.int64), [len(entities) for entities in entity_texts])
    return retriever.encode(texts), owner
