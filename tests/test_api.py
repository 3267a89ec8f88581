"""The package's public API: every name of `gpu_tigrag.__all__` resolves, lazily, and importing the
package alone loads none of the heavy libraries."""

import subprocess
import sys

import gpu_tigrag
from conftest import ROOT

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
    for queries, message in [("a question", "wrap a single query in a list"), (["film", "  "], "query 2 is empty"),
                             (["film", 7], "query 2 is a int, not a string"), (42, "sequence .* got int")]:
        with pytest.raises(TigragError, match=message):
            retriever.retrieve(queries)
    for passages, message in [([], "no passage has any text"), ([Passage("", " ", "x")], "no passage has any text"),
                              ([{"title": "t", "text": "x"}], "passage 1 is a dict, not a gpu_tigrag.Passage"),
                              ("corpus.json", "sequence .* got str")]:
        with pytest.raises(TigragError, match=message):
            build_index(passages)
