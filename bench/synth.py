"""Synthetic Zipf corpora of N passages, reproducible from a seed, as real text (so the whole
pipeline runs: punkt, Treebank, graph, BM25, encoder, NER).

Words are drawn from a Zipf(s) law over a synthetic vocabulary of pronounceable tokens;
sentences hold 6-20 words and end with a period; passages hold 2-8 sentences; each passage
is titled with two capitalised pseudo-names, which also appear in its text as
entity-like spans.

Usage: python bench/synth.py N [--seed 0] [--vocab 200000] [--zipf 1.1] -o corpus.jsonl|.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Iterator

import numpy as np

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, help="number of passages")
    parser.add_argument("-o", "--output", type=Path, required=True, help=".jsonl or .parquet")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=200_000)
    parser.add_argument("--zipf", type=float, default=1.1)
    args = parser.parse_args()
    records = passages(args.n, args.seed, args.vocab, args.zipf)
    if args.output.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = pa.schema([("title", pa.string()), ("text", pa.string())])
        with pq.ParquetWriter(args.output, schema) as writer:
            batch: list[dict] = []
            for record in records:
                batch.append(record)
                if len(batch) == 50_000:
                    writer.write_table(pa.Table.from_pylist(batch, schema))
                    batch = []
            if batch:
                writer.write_table(pa.Table.from_pylist(batch, schema))
    else:
        with open(args.output, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record) + "\n")
    print(f"wrote {args.n:,} passages to {args.output}", file=sys.stderr)


if __name__ == "__main__":
    main()
