"""The package's public API: every name of `gpu_tigrag.__all__` resolves, lazily, and importing the
package alone loads none of the heavy libraries."""

import subprocess
import sys

import gpu_tigrag
from helpers import ROOT

HEAVY = ("torch", "numba", "numpy", "scipy", "pyarrow", "cupy", "sentence_transformers", "spacy")


def test_all_names_resolve_to_their_defining_modules():
    assert set(gpu_tigrag.__all__) == set(gpu_tigrag._EXPORTS) | {"__version__"}
    for name in gpu_tigrag.__all__:
        value = getattr(gpu_tigrag, name)
        assert value is not None, name
        if name in gpu_tigrag._EXPORTS:
            module = gpu_tigrag._EXPORTS[name]
            assert getattr(sys.modules["gpu_tigrag" + module], name) is value
    for name in ("Retriever", "RetrievalConfig", "IndexConfig", "preset", "PRESETS", "build_index",
                 "build_index_streaming", "add_passages", "load_index", "save_index", "load_corpus", "Passage",
                 "get_backend", "run_queries", "load_queries"):
        assert name in gpu_tigrag.__all__, name
    assert "Retriever" in dir(gpu_tigrag)


def test_an_unknown_name_is_an_attribute_error():
    try:
        gpu_tigrag.no_such_name
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("gpu_tigrag.no_such_name resolved")


def test_import_gpu_tigrag_loads_no_heavy_library():
    code = ("import sys, gpu_tigrag\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
            "gpu_tigrag.RetrievalConfig\n"
            "print(','.join(m for m in ('torch', 'numba') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    after_import, after_config = proc.stdout.splitlines()
    assert after_import == "", f"import gpu_tigrag loaded {after_import}"
    assert after_config == "", f"gpu_tigrag.RetrievalConfig loaded {after_config}"


def test_public_entry_points_check_their_arguments(example_index):
    """Wrong arguments at the Python API's entry points are the project's error, naming what was
    expected and where, as the CLI's are (never an AttributeError deep inside)."""
    import pytest

    from gpu_tigrag import Passage, TigragError, build_index, make_retriever, preset

    retriever = make_retriever(example_index.index, preset("paper"), backend="numpy")
    for queries, message in [(b"a question", "not bytes"), (["film", "  "], "query 2 is empty"),
                             (["film", 7], "query 2 is a int, not a string"), (42, "sequence .* got int")]:
        with pytest.raises(TigragError, match=message):
            retriever.retrieve(queries)
    for passages, message in [([], "no passage has any text"), ([Passage("", " ", "x")], "no passage has any text"),
                              ([["t", "x"]], "passage 0 is a list; give Passage records, dicts"),
                              ([{"title": "t"}], "passage 0: missing field 'text'"),
                              ("corpus.json", "sequence .* got str")]:
        with pytest.raises(TigragError, match=message):
            build_index(passages)


def test_the_api_takes_what_a_user_has(example_index):
    """`retrieve` takes one string (a list of one result, the same as in a list); `build_index` takes dicts and
    (title, text) pairs; `to_run` gives {qid: {doc id: score}} for ranx and ir_measures, each passage once."""
    import json

    from helpers import EXAMPLES, QUESTIONS, EXAMPLE_ENCODER, string_entities

    from gpu_tigrag import IndexConfig, build_index, make_retriever, preset, to_run
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import load_encoder

    retriever = make_retriever(example_index.index, preset("paper"), backend="numpy")
    one = retriever.retrieve(QUESTIONS[0], k=5)
    assert len(one) == 1 and one[0].chunk_ids == retriever.retrieve([QUESTIONS[0]], k=5)[0].chunk_ids
    records = json.loads((EXAMPLES / "corpus.json").read_text())
    config = IndexConfig(encoder=EncoderConfig(model=EXAMPLE_ENCODER))
    encoder = load_encoder(config.encoder)
    by_dict = build_index(records, config, encoder=encoder, entity_extractor=string_entities)
    by_pair = build_index([(r["title"], r["text"]) for r in records], config, encoder=encoder,
                          entity_extractor=string_entities)
    assert by_dict.chunk_texts == by_pair.chunk_texts == example_index.index.chunk_texts
    results = retriever.retrieve(QUESTIONS[:2], k=10)
    run = to_run(results, ["q1", "q2"])
    assert list(run) == ["q1", "q2"] and len(run["q1"]) == len(set(results[0].doc_ids))
    assert next(iter(run["q1"])) == results[0].doc_ids[0] and run["q1"][results[0].doc_ids[0]] == results[0].scores[0]
