"""Can one encoder pass per question give the vectors of all its expanded queries "question entity_i"?

`best` embeds each μ ⊕ e text in its own pass (7-8 texts per question). Two ways to share one pass over
"question e1 e2 … en" are measured against it on MuSiQue-100 with the default encoder's index:

* pooled: the onnx-int8 encoder's token states of the joint text, mean-pooled over the question's
  tokens and e_i's tokens only (special tokens kept), one vector per entity;
* block mask: the same joint text through torch fp32 with a 4-D attention mask — the question attends
  to itself, each e_i to the question and itself, positions as in "question e_i" — pooled the same way;
  its baseline is torch fp32's own per-text vectors (so the runtime is not what differs).

Reported: the cosine of each shared vector to its own pass's vector, and R@2/5/10 of `best` with the
shared vectors in place of the per-text ones (everything else unchanged).

Usage: python bench/studies/expansion_shared_pass.py [--smoke]
Writes bench/results/expansion_shared_pass.{json,md} (not with --smoke).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, DATA, DATASETS, write_results


def e5_index(smoke: bool):
    """MuSiQue-100 indexed with the engine's defaults on the onnx-int8 runtime, whose graph the joint pass runs
    (the default CPU runtime when the study was run; built once under .cache/bench/e5_onnx_musique_train100)."""
    from gpu_tigrag.config import EncoderConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import load_index, save_index

    path = CACHE / ("e5_onnx_musique_train100" + ("_smoke" if smoke else ""))
    if not (path / "manifest.json").is_file():
        corpus = load_corpus(DATA / DATASETS["musique_train100"][0])
        config = IndexConfig(encoder=EncoderConfig(backend="onnx-int8"))
        save_index(build_index(corpus[:60] if smoke else corpus, config, show_progress=True), path)
    return load_index(path)


def joint_layout(tokenizer: Any, prompt: str, question: str, entities: Sequence[str]) -> tuple[list[int], list[int], list[int]]:
    """(ids, positions, group) of "[CLS] prompt+question | e_1 [SEP] | e_2 [SEP] | …": group -1 for the
    shared prefix, i for e_i and its [SEP]; e_i's positions continue the question's, as in "question e_i"."""
    base = tokenizer(prompt + question, add_special_tokens=False)["input_ids"]
    ids, positions, group = [tokenizer.cls_token_id, *base], list(range(len(base) + 1)), [-1] * (len(base) + 1)
    for i, entity in enumerate(entities):
        piece = tokenizer(" " + entity, add_special_tokens=False)["input_ids"] + [tokenizer.sep_token_id]
        ids += piece
        positions += list(range(len(base) + 1, len(base) + 1 + len(piece)))
        group += [i] * len(piece)
    return ids, positions, group


class TorchVectors:
    """torch fp32 vectors of the index's model: one pass per text, or one block-masked pass per question."""

    def __init__(self, folder: Path, prompt: str):
        import torch
        from transformers import AutoModel, AutoTokenizer

        self.torch, self.prompt = torch, prompt
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()

    def per_text(self, texts: list[str]) -> np.ndarray:
        torch = self.torch
        batch = self.tokenizer([self.prompt + t for t in texts], padding=True, return_tensors="pt")
        with torch.no_grad():
            hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"].unsqueeze(-1).float()
        return torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1).numpy()

    def block(self, question: str, entities: Sequence[str]) -> np.ndarray:
        torch = self.torch
        ids, positions, group = joint_layout(self.tokenizer, self.prompt, question, entities)
        g = np.asarray(group)
        allow = torch.from_numpy((g[None, :] == -1) | (g[:, None] == g[None, :]))[None, None]
        with torch.no_grad():
            hidden = self.model(input_ids=torch.tensor([ids]), attention_mask=allow,
                                position_ids=torch.tensor([positions])).last_hidden_state[0]
        rows = [hidden[torch.from_numpy((g == -1) | (g == i))].mean(0) for i in range(len(entities))]
        return torch.nn.functional.normalize(torch.stack(rows), dim=-1).numpy()


def onnx_pooled(encoder: Any, question: str, entities: Sequence[str]) -> np.ndarray:
    """The onnx-int8 encoder's states of "prompt question e1 e2 …", pooled per entity (module doc)."""
    prompt = encoder.resolved.prompt("query")
    text, spans = prompt + question, []
    for entity in entities:
        text += " "
        spans.append((len(text), len(text) + len(entity)))
        text += entity
    encoding = encoder.tokenizer.encode(text.lower() if encoder.pipeline.lower_case else text)
    ids = np.array([encoding.ids])
    feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    hidden = encoder.session.run(None, {name: feeds[name] for name in encoder.inputs})[0]
    offsets, special = np.array(encoding.offsets), np.array(encoding.special_tokens_mask, bool)
    shared = special | ((offsets[:, 0] < len(prompt) + len(question)) & (offsets[:, 1] > 0))
    masks = np.array([(shared | ((offsets[:, 0] >= s) & (offsets[:, 1] <= e) & (offsets[:, 1] > offsets[:, 0])))
                      for s, e in spans], dtype=np.int64)
    return encoder._pool(np.repeat(hidden, len(entities), axis=0), masks)


def run_variant(index: Any, queries: list, make: Callable[[list[str], list[list[str]]], np.ndarray] | None,
                reference: Callable[[list[str], list[list[str]]], np.ndarray] | None) -> dict[str, Any]:
    """R@2/5/10 of `best` with the expanded vectors from `make` (None: the engine's own), and the cosines of
    `make`'s vectors to `reference`'s."""
    import gpu_tigrag.methods.tigrag.retriever as tigrag_retriever
    from gpu_tigrag.evaluate.experiment import passage_keys, query_dataset
    from gpu_tigrag.evaluate.metrics import score_rankings
    from gpu_tigrag.presets import preset

    original = tigrag_retriever.expanded_query_vectors
    cosines: list[np.ndarray] = []

    def patched(retriever, questions, entity_texts, *_ignored):  # the pairs' other facts: every text embedded
        vectors, owner = original(retriever, questions, entity_texts)
        if make is None:
            return vectors, owner
        kept = [(q, e) for q, e in zip(questions, entity_texts) if e]
        shared = np.concatenate([make([q], [e]) for q, e in kept]) if kept else np.zeros((0, vectors.shape[1]))
        own = (np.concatenate([reference([q], [e]) for q, e in kept]) if reference else retriever.be.to_host(vectors))
        cosines.append(np.sum(own * shared, axis=1))
        return retriever.be.asarray(shared.astype(np.float32)), owner

    tigrag_retriever.expanded_query_vectors = patched
    try:
        retriever = tigrag_retriever.TigragRetriever(index, preset("best"))
        results = retriever.retrieve([q.text for q in queries], k=10)
    finally:
        tigrag_retriever.expanded_query_vectors = original
    dataset = query_dataset("musique_train100", queries)
    metrics = score_rankings([passage_keys(index, r.chunk_ids, dataset.match) for r in results], dataset.queries,
                             [5] * len(results))
    out = {f"R@{k}": 100 * metrics[f"recall@{k}"] for k in (2, 5, 10)}
    if cosines:
        c = np.concatenate(cosines)
        out.update(cosine_mean=float(c.mean()), cosine_p5=float(np.percentile(c, 5)), cosine_min=float(c.min()))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="60 passages, 10 questions, no result file")
    args = parser.parse_args()
    from gpu_tigrag.encoders import index_encoder_config, load_encoder
    from gpu_tigrag.evaluate.queries import load_queries

    index = e5_index(args.smoke)
    queries = load_queries(DATA / DATASETS["musique_train100"][1])[: 10 if args.smoke else None]
    encoder = load_encoder(index_encoder_config(index))
    torch_side = TorchVectors(encoder.resolved.folder, encoder.resolved.prompt("query"))

    def texts_of(questions, entity_lists):
        return [f"{q} {e}" for q, entities in zip(questions, entity_lists) for e in entities]

    variants = {
        "per text (onnx-int8, best as it is)": (None, None),
        "pooled from one joint pass (onnx-int8)": (lambda q, e: onnx_pooled(encoder, q[0], e[0]), None),
        "per text (torch fp32)": (lambda q, e: torch_side.per_text(texts_of(q, e)), None),
        "block-masked joint pass (torch fp32)": (lambda q, e: torch_side.block(q[0], e[0]),
                                                 lambda q, e: torch_side.per_text(texts_of(q, e))),
    }
    rows = {}
    for name, (make, reference) in variants.items():
        rows[name] = run_variant(index, queries, make, reference)
        print(name, {k: round(v, 4) for k, v in rows[name].items()}, file=sys.stderr, flush=True)
    lines = ["# One encoder pass for all of a question's expanded queries?", "",
             f"`python bench/studies/expansion_shared_pass.py` — MuSiQue-100 ({len(queries)} questions), the engine's default "
             "index (multilingual-e5-small, onnx-int8), preset `best` with its expanded-query vectors replaced; "
             "cosine: of each shared vector to the same text's own pass (onnx-int8 per text for the pooled "
             "variant, torch fp32 per text for the block mask); for torch fp32 per text, to onnx-int8 per text.", "",
             "| expanded-query vectors | encoder texts per question | cosine to own pass (mean / p5 / min) | R@2 | R@5 | R@10 |",
             "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        shared = "pooled" in name or "block" in name
        cos = (f"{row['cosine_mean']:.4f} / {row['cosine_p5']:.4f} / {row['cosine_min']:.4f}"
               if "cosine_mean" in row else "1 (itself)")
        lines.append(f"| {name} | {'2 (question, joint text)' if shared else '1 + one per entity'} | {cos} | "
                     f"{row['R@2']:.2f} | {row['R@5']:.2f} | {row['R@10']:.2f} |")
    lines += ["", "Neither shared pass keeps `best`'s recall: a question's tokens take a different meaning with "
              "each entity beside it (mean pooling is dominated by the question's tokens), so the entity cannot "
              "be added after the fact. `best` keeps one pass per expanded text."]
    print("\n".join(lines))
    if not args.smoke:
        write_results("expansion_shared_pass", {"questions": len(queries), "rows": rows}, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
