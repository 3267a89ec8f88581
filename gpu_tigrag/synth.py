"""Synthetic Zipf corpora, reproducible from a seed: real text for the whole pipeline, and token-id
arrays for the index stages alone.

`passages` yields text (so punkt, Treebank, token graph, BM25, encoder and NER all run): words are drawn
from a Zipf(s) law over a synthetic vocabulary of pronounceable tokens; sentences hold 6-20 words
and end with a period; passages hold 2-8 sentences; each passage is titled with two capitalised
pseudo-names, which also appear in its text as entity-like spans. `write_corpus` writes them as
JSONL or Parquet (`python bench/synth.py N -o FILE` is its command line).

`zipf_token_csr` skips the text: the token-id CSR of a Zipf corpus generated with the backend's
array module (NumPy or CuPy, no host round trip), the input of the token-graph and BM25 stages in the
GPU check and the pair-count benchmark.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from .atomic import atomic_path
from .errors import TigragError
from .outputs import check_outside_indexes, check_replaceable

SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]  # 70 syllables


def word(rank: int) -> str:
    """A pronounceable token, unique per rank (base-70 syllables, at least two syllables)."""
    out = []
    rank += 70  # two syllables minimum: every token has >= 4 letters
    while rank:
        rank, digit = divmod(rank, 70)
        out.append(SYLLABLES[digit])
    return "".join(out)


def passages(n: int, seed: int = 0, vocab: int = 200_000, zipf: float = 1.1, block: int = 10_000) -> Iterator[dict]:
    """`n` passages {title, text}, generated block by block (bounded memory)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, vocab + 1, dtype=np.float64) ** zipf
    cdf = np.cumsum(weights / weights.sum())
    lexicon = [word(r) for r in range(vocab)]
    names = [w.capitalize() for w in lexicon[1000:6000]]
    made = 0
    while made < n:
        count = min(block, n - made)
        n_sentences = rng.integers(2, 9, size=count)
        lengths = rng.integers(6, 21, size=int(n_sentences.sum()))
        ranks = np.searchsorted(cdf, rng.random(int(lengths.sum())))
        title_ids = rng.integers(0, len(names), size=(count, 2))
        pos = sent = 0
        for i in range(count):
            title = f"{names[title_ids[i, 0]]} {names[title_ids[i, 1]]}"
            sentences = []
            for _ in range(n_sentences[i]):
                words = [lexicon[r] for r in ranks[pos : pos + lengths[sent]]]
                pos += lengths[sent]
                sent += 1
                sentences.append(" ".join(words).capitalize() + ".")
            sentences[0] = f"{title} {sentences[0][0].lower()}{sentences[0][1:]}"
            yield {"title": title, "text": " ".join(sentences)}
        made += count


def write_corpus(path: str | Path, records: Iterable[dict], force: bool = False) -> int:
    """Write {title, text} records to `path`: Parquet if it ends in .parquet, else JSONL. Returns the count.

    Written atomically (a reader or a killed write never leaves half a corpus). An existing file is replaced
    only with `force`; a link, folder, FIFO or device there, or a path inside an index, never (TigragError,
    nothing written)."""
    path = Path(path)
    check_outside_indexes(path, "write_corpus")
    check_replaceable(path)
    if path.exists() and not force:
        raise TigragError(f"write_corpus: {path} exists; refusing to overwrite it (nothing was written): choose "
                          "another path, or pass force=True to replace it")
    written = 0
    with atomic_path(path) as tmp:
        if path.suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            schema = pa.schema([("title", pa.string()), ("text", pa.string())])
            with pq.ParquetWriter(str(tmp), schema) as writer:
                batch: list[dict] = []
                for record in records:
                    batch.append(record)
                    if len(batch) == 50_000:
                        writer.write_table(pa.Table.from_pylist(batch, schema))
                        written += len(batch)
                        batch = []
                if batch:
                    writer.write_table(pa.Table.from_pylist(batch, schema))
                    written += len(batch)
        else:
            with open(tmp, "w", encoding="utf-8") as handle:
                for record in records:
                    handle.write(json.dumps(record) + "\n")
                    written += 1
    return written


def zipf_token_csr(xp: Any, n_chunks: int, n_vocab: int, mean_length: int, seed: int) -> tuple[Any, Any]:
    """Token-id CSR (indptr int64, ids int32) of a Zipf(1.1) corpus generated with the array module `xp`
    (numpy or cupy): Poisson(`mean_length`) tokens per chunk (at least one), ids below `n_vocab`."""
    rng = xp.random.RandomState(seed)
    lengths = xp.clip(rng.poisson(mean_length, n_chunks), 1, None).astype(xp.int64)
    indptr = xp.zeros(n_chunks + 1, dtype=xp.int64)
    indptr[1:] = xp.cumsum(lengths)
    weights = 1.0 / xp.arange(1, n_vocab + 1, dtype=xp.float64) ** 1.1
    cdf = xp.cumsum(weights)
    cdf /= cdf[-1]
    ids = xp.searchsorted(cdf, rng.random_sample(int(indptr[-1]))).astype(xp.int32)
    return indptr, xp.minimum(ids, n_vocab - 1)
