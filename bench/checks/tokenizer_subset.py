"""The subset tokenizer gives the whole tokenizer's ids on every text of the bundled datasets, and loads faster.

    python bench/checks/tokenizer_subset.py [--model multilingual-e5-small] [--rounds 5]
    python bench/checks/tokenizer_subset.py --smoke     # the bundled example and the probes, writes nothing

Every passage (title and text, as the index embeds them, with the model's passage prompt) and every question
(with its query prompt) of 2Wiki, MuSiQue-100, the HotpotQA sample and SciFact, plus probes in other scripts
(Cyrillic, Greek, CJK, Arabic, emoji, ligatures, full-width forms, combining accents, no-break and zero-width
spaces), are tokenised by `SubsetTokenizer` and by tokenizers.Tokenizer on the whole file: the ids must be
equal for every text (else exit status 1). Also: the share of texts the subset answers, and the load time of
each (medians of interleaved rounds, fresh processes). Writes bench/results/tokenizer_subset.json and .md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.common import DATA, ROOT, write_results  # noqa: E402

PROBES = ("Москва — столица России", "Αθήνα", "東京は日本の首都です", "القاهرة", "rocket 🚀 launch", "ﬁnal ﬂow",
          "ＦＵＬＬ ｗｉｄｔｈ １２３", "Cafe\u0301 de\u0301ja\u0300", "no\u00a0break\u2009thin", "zero\u200bwidth",
          "Łódź, Ærøskøbing, Þingvellir, Ğ, ǅ", "“quotes” – dashes — and … ellipsis", "<mask> and <s> literal",
          "Dvořák's Symphony No. 9", "x" * 3000)
COMMAND = "python bench/checks/tokenizer_subset.py"


def dataset_texts() -> dict[str, list[str]]:
    """Passages ("title text") and questions of each bundled dataset that is present."""
    from gpu_tigrag.corpus import load_corpus

    found: dict[str, list[str]] = {}
    corpora = {"2wikimultihopqa": ("2wikimultihopqa/2wikimultihopqa_corpus.json", "2wikimultihopqa/2wikimultihopqa_dev500.json"),
               "musique_train100": ("musique_train100/musique_train_corpus.json", "musique_train100/musique_train.json"),
               "hotpotqa_train_sample": ("hotpotqa_train_sample/hotpotqa_train_corpus.json",
                                         "hotpotqa_train_sample/hotpotqa_train_sample10.json")}
    for name, (corpus, questions) in corpora.items():
        if not (DATA / corpus).is_file():
            continue
        found[name + " passages"] = [f"{p.title} {p.text}" for p in load_corpus(DATA / corpus)]
        found[name + " questions"] = [q["question"] for q in json.loads((DATA / questions).read_text())]
    scifact = DATA / "beir_scifact"
    if (scifact / "corpus.jsonl").is_file():
        found["beir_scifact passages"] = [f"{p.title} {p.text}" for p in load_corpus(scifact / "corpus.jsonl")]
        rows = [json.loads(line) for line in (scifact / "queries.jsonl").read_text().splitlines() if line.strip()]
        found["beir_scifact questions"] = [r["text"] for r in rows]
    return found


def load_seconds(model: str, subset: bool) -> float:
    """Seconds to load the model's tokenizer in a fresh process (the subset cached already)."""
    code = ("import time, sys; from pathlib import Path; from gpu_tigrag.encoders.models import resolve_model;"
            "from gpu_tigrag.encoders.onnx_int8 import read_pipeline, cache_folder;"
            "from gpu_tigrag.encoders.tokenizer_subset import load_tokenizer;"
            f"r = resolve_model({model!r}); p = read_pipeline(r.folder); f = p.transformer / 'tokenizer.json';"
            f"cache = cache_folder(r).parent if {subset} else None;"
            "t = time.perf_counter(); load_tokenizer(f, p.max_seq_length, cache); print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="multilingual-e5-small")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    from gpu_tigrag.encoders.models import resolve_model
    from gpu_tigrag.encoders.onnx_int8 import read_pipeline
    from gpu_tigrag.encoders.tokenizer_subset import _load_file, load_tokenizer

    resolved = resolve_model(args.model)
    pipeline = read_pipeline(resolved.folder)
    path = pipeline.transformer / "tokenizer.json"
    with tempfile.TemporaryDirectory() as tmp:
        subset = load_tokenizer(path, pipeline.max_seq_length, Path(tmp))
        if not subset.uses_subset:
            raise SystemExit(f"{args.model}: its tokenizer gets no subset (not a large Unigram vocabulary)")
        whole = _load_file(path, pipeline.max_seq_length)
        if args.smoke:
            corpus = json.loads((ROOT / "examples" / "corpus.json").read_text())
            texts = {"example passages": [f"{p.get('title', '')} {p['text']}" for p in corpus]}
        else:
            texts = dataset_texts()
        texts["probes"] = list(PROBES)
        rows, failed = [], 0
        for name, group in texts.items():
            for kind in ("query", "passage"):
                prompt = resolved.prompt(kind)
                batch = [prompt + t for t in group]
                ours = subset.encode_batch(batch)
                reference = whole.encode_batch(batch)
                differ = sum(list(a.ids) != b.ids or a.special_tokens_mask != b.special_tokens_mask
                             or list(a.offsets) != list(b.offsets) for a, b in zip(ours, reference))
                inside = sum(subset._fits(t) for t in batch)
                failed += differ
                rows.append({"texts": name, "prompt": kind, "n": len(batch), "subset answers": inside,
                             "ids differ": differ})
                print(rows[-1], flush=True)
        whole_built = subset._whole is not None
        # the first text outside the subset in a fresh process's tokenizer: the cached vocabulary read, a model made
        fresh = load_tokenizer(path, pipeline.max_seq_length, Path(tmp))
        start = time.perf_counter()
        fresh.encode_batch([resolved.prompt("query") + PROBES[0]])
        first_outside = time.perf_counter() - start
        start = time.perf_counter()
        fresh.encode_batch([resolved.prompt("query") + PROBES[1]])
        next_outside = time.perf_counter() - start
    rounds = 1 if args.smoke else args.rounds
    times: dict[str, list[float]] = {"whole": [], "subset": []}
    load_seconds(args.model, True)  # derives the subset into the default cache, once
    for _ in range(rounds):
        times["whole"].append(load_seconds(args.model, False))
        times["subset"].append(load_seconds(args.model, True))
    print(times, {"first outside text": first_outside, "next": next_outside, "whole built": whole_built})
    if args.smoke:
        return 1 if failed else 0
    whole_s, subset_s = statistics.median(times["whole"]), statistics.median(times["subset"])
    markdown = "\n".join([
        "# The subset tokenizer against the whole one",
        "",
        f"Command: `{COMMAND} --model {args.model} --rounds {rounds}`. Every text with each prompt (the model's "
        "query and passage prompts), tokenised by `SubsetTokenizer` (gpu_tigrag/encoders/tokenizer_subset.py) and "
        "by tokenizers.Tokenizer on the whole tokenizer.json; the texts of a call that the subset cannot answer are "
        "segmented by a model of the pieces in their words (plus the lowest-scoring piece and the specials), so "
        "'ids differ' (ids, special-token marks or offsets) must be 0 everywhere.",
        "",
        "| texts | prompt | texts | answered by the subset | ids differ |",
        "|---|---|---|---|---|",
        *[f"| {r['texts']} | {r['prompt']} | {r['n']:,} | {r['subset answers']:,} | {r['ids differ']} |" for r in rows],
        "",
        f"Load time, fresh process, median of {rounds} interleaved rounds: whole {whole_s:.3f} s, subset "
        f"{subset_s:.3f} s (**{whole_s / subset_s:.2f}×** faster; {len(subset._full_ids):,} of "
        f"{len(whole.get_vocab()):,} pieces).",
        "",
        f"The first text outside the subset in a fresh tokenizer took {first_outside:.3f} s (the cached whole "
        f"vocabulary read, a model of its pieces made), the next {next_outside:.3f} s, against the whole tokenizer's "
        f"{whole_s:.3f} s load that such a text cost before; the whole tokenizer was built during the check: "
        f"{'yes' if whole_built else 'no'}.",
    ])
    write_results("tokenizer_subset", {"command": COMMAND, "model": args.model, "rows": rows, "times": times,
                                       "pieces": int(len(subset._full_ids)), "first_outside_seconds": first_outside,
                                       "next_outside_seconds": next_outside, "whole_built": whole_built}, markdown)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
