"""Corpus -> chunks -> valid-token id sequences (CSR), the input of every index stage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..config_types import ChunkConfig, TokenConfig
from ..corpus import Passage
from ..progress import progress
from .chunking import window_starts
from .sentences import split_sentences
from .tokens import Vocabulary, sentence_tokens, token_csr


@dataclass
class Chunks:
    """Chunk texts, the passage each came from, and each chunk's ordered valid-token ids."""

    texts: list[str]
    passage_of_chunk: np.ndarray  # int32, chunk -> passage index
    vocab: Vocabulary
    token_indptr: np.ndarray  # int64, CSR row pointer over chunks
    token_ids: np.ndarray  # int32, token ids in reading order

    def __len__(self) -> int:
        return len(self.texts)

    def tokens_of(self, chunk: int) -> np.ndarray:
        return self.token_ids[self.token_indptr[chunk] : self.token_indptr[chunk + 1]]


def split_passages(passages: Sequence[Passage], language: str = "english", show_progress: bool = False) -> list[list[str]]:
    """Punkt sentences of every passage body."""
    return [split_sentences(p.text, language) for p in progress(passages, "split", show_progress, unit="passage")]


def chunk_and_tokenise(
    passages: Sequence[Passage], sentences: Sequence[Sequence[str]], chunk: ChunkConfig, tokens: TokenConfig,
    show_progress: bool = False,
) -> tuple[list[str], list[int], list[list[str]]]:
    """Chunk texts, their passage index and their valid-token sequences.

    Each sentence is tokenised once, though overlapping windows hold it twice. With
    `title_in_chunk` the title heads every chunk's text and token sequence.
    """
    texts: list[str] = []
    owner: list[int] = []
    sequences: list[list[str]] = []
    size, stride = chunk.sentences_per_chunk, chunk.stride
    for p_idx in progress(range(len(passages)), "tokenise", show_progress, unit="passage"):
        passage, sents = passages[p_idx], sentences[p_idx]
        if not sents:
            continue
        sent_tokens = [sentence_tokens(s, tokens) for s in sents]
        with_title = chunk.title_in_chunk and bool(passage.title)
        title_tokens = sentence_tokens(passage.title, tokens) if with_title else []
        for start in window_starts(len(sents), size, stride):
            body = " ".join(sents[start : start + size])
            texts.append(f"{passage.title}\n{body}" if with_title else body)
            owner.append(p_idx)
            seq = list(title_tokens)
            for toks in sent_tokens[start : start + size]:
                seq.extend(toks)
            sequences.append(seq)
    return texts, owner, sequences


def assemble_chunks(texts: list[str], owner: list[int], sequences: list[list[str]]) -> Chunks:
    """Vocabulary (sorted tokens) and the CSR token-id layout of the chunks."""
    vocab = Vocabulary.from_sequences(sequences)
    indptr, ids = token_csr(sequences, vocab)
    return Chunks(texts, np.asarray(owner, dtype=np.int32), vocab, indptr, ids)


def build_chunks(
    passages: Sequence[Passage],
    chunk: ChunkConfig = ChunkConfig(),
    tokens: TokenConfig = TokenConfig(),
    show_progress: bool = False,
) -> Chunks:
    """Split, chunk and tokenise `passages` in one call."""
    sentences = split_passages(passages, chunk.language, show_progress)
    return assemble_chunks(*chunk_and_tokenise(passages, sentences, chunk, tokens, show_progress))
