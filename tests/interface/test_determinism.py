"""A query's ranking does not depend on how it reached the engine: single calls (as `tigrag query`),
batches of any size, shuffled batch orders, `eval`'s runner, `tigrag run` and `tigrag run --workers 2`
give identical rankings, with the default encoder (multilingual-e5-small on onnx-int8 on a CPU) and
every method (TIGRAG `best` and `paper`, in the dense and the sparse mode, SpectRAG, LiteSemRAG, the
baselines).

The encoder's int8 activations are quantised per row (gpu_tigrag/encoders/onnx_rows.py), so a
query's vector is bit-identical in any batch; the methods score each query on its own column.
`test_per_tensor_scales_would_fail_this` rebuilds the model with the per-tensor (per-batch) scales
of plain dynamic quantisation and shows that its vectors change with the batch: the check here can
fail. Slow tier (one e5 export and one LiteSemRAG stage, ~2-4 min on 2 cores).
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from helpers import EXAMPLES, string_entities

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (pip install onnxruntime onnx)")

pytestmark = [pytest.mark.slow]

#: (system label, method, preset or None)
SYSTEMS = [("best", "tigrag", "best"), ("paper", "tigrag", "paper"), ("SpectRAG", "spectrag", None),
           ("LiteSemRAG", "litesemrag", None), ("Hybrid", "hybrid", None), ("best sparse", "tigrag", "best"),
           ("paper sparse", "tigrag", "paper"), ("best unlinked", "tigrag", "best")]
#: settings of a system beyond its preset: the sparse mode (per-query candidates, push PPR; issue 24); only the
#: entities that name a passage embedded (named_expansions=unlinked: which vectors a pair gets is its own business)
OVERRIDES = {**{label: {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"} for label in ("best sparse", "paper sparse")},
             "best unlinked": {"tigrag.fusion.named_expansions": "unlinked"}}
TEMPLATES = ["Who is {}?", "{}", "What is known about {} and where did it happen?",
             "Tell me about {} and the people connected with it, and when each of them was born",
             "{} film director birthplace", "Which country is {} in, and what is it famous for today?",
             "history of {}"]
N_QUERIES = 200


def make_queries(titles: list[str]) -> list[dict]:
    """200 questions of many lengths (so batches pad differently), each with a gold title."""
    out = []
    for i in range(N_QUERIES):
        title = titles[i % len(titles)]
        out.append({"id": f"q{i}", "question": TEMPLATES[(i // len(titles)) % len(TEMPLATES)].format(title),
                    "gold_titles": [title]})
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from gpu_tigrag.config import IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.index.build import add_method, build_index
    from gpu_tigrag.index.store import save_index

    config = IndexConfig()  # the default encoder: multilingual-e5-small, numba-int8 or onnx-int8 on a CPU
    if config.encoder.model != "multilingual-e5-small":
        pytest.fail("the default encoder changed: update this test's docstring and expectations")
    encoder = load_encoder(config.encoder)
    if encoder.backend not in ("onnx-int8", "numba-int8"):
        pytest.skip(f"the default CPU runtime here is {encoder.backend}, not onnx-int8 or numba-int8")
    passages = load_corpus(EXAMPLES / "corpus.json")
    index = build_index(passages, config, encoder=encoder, entity_extractor=string_entities)
    for method in ("spectrag", "litesemrag"):
        index = add_method(index, method)
    folder = tmp_path_factory.mktemp("determinism")
    save_index(index, folder / "index")
    queries = make_queries(sorted({p.title for p in passages}))
    path = folder / "queries.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in queries))
    return index, folder / "index", queries, path, encoder


def config_of(method: str, preset_name: str | None, label: str = ""):
    from gpu_tigrag.config import RetrievalConfig
    from gpu_tigrag.presets import preset_with

    return preset_with(preset_name, OVERRIDES.get(label, {})) if preset_name else RetrievalConfig(method=method)


def python_api(index, encoder, config, texts, batch_size, k=10):
    import dataclasses

    from gpu_tigrag.retrieve.factory import make_retriever

    retriever = make_retriever(index, dataclasses.replace(config, batch_size=batch_size), encoder=encoder,
                               backend="numpy")
    return [r.chunk_ids for r in retriever.retrieve(texts, k=k)]


@pytest.mark.parametrize("label, method, preset_name", SYSTEMS, ids=[s[0] for s in SYSTEMS])
def test_rankings_are_the_same_through_every_entry_point(setup, tmp_path, label, method, preset_name):
    from gpu_tigrag.cli import main
    from gpu_tigrag.evaluate.experiment import Experiment, query_dataset
    from gpu_tigrag.evaluate.queries import load_queries

    index, index_path, queries, queries_path, encoder = setup
    texts = [q["question"] for q in queries]
    config = config_of(method, preset_name, label)
    reference = python_api(index, encoder, config, texts, batch_size=256)
    single = [python_api(index, encoder, config, [t], batch_size=1)[0] for t in texts[:40]]
    assert single == reference[:40], f"{label}: single-query calls differ from one batch"
    assert python_api(index, encoder, config, texts, batch_size=7) == reference, f"{label}: batch size 7 differs"
    order = list(range(len(texts)))
    random.Random(5).shuffle(order)
    shuffled = python_api(index, encoder, config, [texts[i] for i in order], batch_size=32)
    assert [shuffled[order.index(i)] for i in range(len(texts))] == reference, f"{label}: shuffled order differs"

    experiment = Experiment(index, query_dataset("determinism", load_queries(queries_path)), "numpy")
    run = experiment.run_config(label, config)
    assert [list(ids[:10]) for ids in run.chunk_ids] == reference, f"{label}: the eval runner differs"

    sets = ["--method", method] + (["--preset", preset_name] if preset_name else [])
    sets += [arg for path, value in OVERRIDES.get(label, {}).items() for arg in ("--set", f"{path}={value}")]
    for workers in ([], ["--workers", "2"]):
        out = tmp_path / f"run{len(workers)}.jsonl"
        assert main(["run", str(index_path), str(queries_path), "-o", str(out), "-k", "10", "-q",
                     "--backend", "numpy", *sets, *workers]) == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [row["chunk_ids"] for row in rows] == reference, f"{label}: tigrag run {' '.join(workers)} differs"


def test_query_vectors_are_bit_identical_in_any_batch(setup):
    from gpu_tigrag.encoders.base import QUERY

    _, _, queries, _, encoder = setup
    texts = [q["question"] for q in queries]
    alone = np.stack([encoder.encode([t], kind=QUERY)[0] for t in texts[:30]])
    for batch_size in (2, 16, 64):
        encoder.batch_size = batch_size
        assert np.array_equal(encoder.encode(texts, kind=QUERY)[:30], alone), batch_size


def test_per_tensor_scales_would_fail_this(setup, tmp_path, monkeypatch):
    """The same encoder without the per-row rewrite (plain dynamic quantisation: one activation scale
    per batch tensor) gives a query another vector in another batch."""
    from gpu_tigrag.config import IndexConfig
    from gpu_tigrag.encoders import onnx_rows
    from gpu_tigrag.encoders.base import QUERY
    from gpu_tigrag.encoders.onnx_int8 import OnnxInt8Encoder

    _, _, queries, _, _ = setup
    monkeypatch.setattr(onnx_rows, "per_row_activation_scales", lambda model: 0)
    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(tmp_path))
    per_tensor = OnnxInt8Encoder(IndexConfig().encoder)
    texts = [q["question"] for q in queries]
    alone = np.stack([per_tensor.encode([t], kind=QUERY)[0] for t in texts[:30]])
    per_tensor.batch_size = 64
    batched = per_tensor.encode(texts, kind=QUERY)[:30]
    assert not np.array_equal(batched, alone)
    assert np.abs(batched - alone).max() > 1e-4
