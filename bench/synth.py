"""Synthetic Zipf corpora of N passages, reproducible from a seed, as real text (so the whole
pipeline runs: punkt, Treebank, graph, BM25, encoder, NER). The generator is
`gpu_tigrag.synth.passages` (its docstring describes the text); this is its command line.

Usage: python bench/synth.py N [--seed 0] [--vocab 200000] [--zipf 1.1] -o corpus.jsonl|.parquet
       python -m bench run synth N -o FILE
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpu_tigrag.errors import TigragError
from gpu_tigrag.synth import passages, write_corpus


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int, help="number of passages")
    parser.add_argument("-o", "--output", type=Path, required=True, help=".jsonl or .parquet")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab", type=int, default=200_000)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--force", action="store_true", help="replace an existing file at --output")
    args = parser.parse_args(argv)
    try:
        written = write_corpus(args.output, passages(args.n, args.seed, args.vocab, args.zipf), force=args.force)
    except TigragError as exc:
        print(f"synth: error: {exc} (on this command line: --force)", file=sys.stderr)
        return 2
    print(f"wrote {written:,} passages to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
