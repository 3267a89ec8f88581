"""A tokenizer that loads in a third of the time and gives the same token ids (issue 31, item 5).

multilingual-e5-small's tokenizer is a Unigram model of 250,002 pieces; building its trie takes
0.6-0.9 s, a quarter of a one-question process. A Unigram segmentation only ever uses pieces that
occur in the (normalised, pre-tokenised) text, and its scores do not depend on the other pieces but
through the lowest score (the unknown character's penalty). So a model of the pieces written in
`SUBSET` (Latin scripts, general punctuation, the word-boundary mark; 110k pieces of e5's) plus the
lowest-scoring piece and the special tokens segments every text whose normalised characters lie in
`SUBSET` exactly as the whole model does; its ids map back to the whole model's through `full_ids`.
Ties go the same way: the lattice visits a position's pieces in the order of their length, which the
subset does not change.

`SubsetTokenizer` checks every text (normalised by the same normaliser). The texts of a call with a character
outside `SUBSET` are segmented by a model made for them alone, by the same argument: the pieces that occur in
their pre-tokenised words (every substring of a word up to the longest piece, looked up in the whole
vocabulary), plus the lowest-scoring piece and the specials. It builds in milliseconds, where the whole
model's 250k-piece trie takes 0.6-0.9 s (one outside text in a 2Wiki evaluation, say a Cyrillic name among
the bridging entities, cost that much before). The whole vocabulary (pieces, scores, the tokenizer's JSON
without it) is cached beside the subset and read on the first outside text (about 0.1 s). Ids are the whole
model's in every case (tests/unit/test_tokenizer_subset.py; bench/checks/tokenizer_subset.py over the
bundled datasets and probes in other scripts). The subset is derived once per tokenizer file (keyed by its
sha256) into the encoder's cache folder, written atomically and checked when read; a damaged copy is
derived again, and where the cached vocabulary cannot be read the whole tokenizer answers the outside texts.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..atomic import atomic_directory
from ..checksums import sha256_file_once
from ..errors import ModelError, TigragError

log = logging.getLogger(__name__)

#: bump when the subset's rule or the cached files change: copies of another version are derived again
VERSION = 2
#: characters (after normalisation and pre-tokenisation) the subset model covers
SUBSET = r"\x00-\u024f\u2000-\u206f\u2581"
_OUTSIDE = re.compile(f"[^{SUBSET}]")
#: derive a subset only where it keeps at most this share of the pieces (a small vocabulary loads fast)
MAX_SHARE = 0.6
#: tokenizer files smaller than this load fast whole (MiniLM's WordPiece: 0.7 MB); e5's is 17 MB
MIN_FILE_BYTES = 4 << 20
TOKENIZER_FILE, IDS_FILE, META_FILE = "tokenizer.json", "full_ids.npy", "subset.json"
#: the whole vocabulary, for the texts outside the subset: its pieces (JSON list), scores (float64) and the
#: tokenizer's JSON without its vocabulary
PIECES_FILE, SCORES_FILE, TEMPLATE_FILE = "pieces.json", "scores.npy", "template.json"


@dataclass(frozen=True)
class Encoded:
    """One text's token ids (the whole model's), which of them are special tokens, and each token's
    (start, end) characters in the text."""

    ids: np.ndarray
    special_tokens_mask: list[int]
    offsets: list[tuple[int, int]]


def _outside(text: str) -> bool:
    return _OUTSIDE.search(text) is not None


def derive_subset(spec: dict) -> tuple[dict, list[int]] | None:
    """(the subset tokenizer's JSON, the whole model's id of each subset piece) of a Unigram
    tokenizer's JSON, or None where the model is not Unigram or the subset saves little."""
    model = spec.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "Unigram" or not isinstance(vocab, list) or not vocab or model.get("byte_fallback"):
        return None
    specials = {int(token["id"]) for token in spec.get("added_tokens") or []}
    unk = model.get("unk_id")
    if unk is not None:
        specials.add(int(unk))
    lowest = min(range(len(vocab)), key=lambda i: vocab[i][1])  # keeps the unknown character's penalty
    keep = [i for i, (piece, _) in enumerate(vocab) if i in specials or i == lowest or not _outside(piece)]
    if len(keep) > MAX_SHARE * len(vocab):
        return None
    return restrict(spec, [vocab[i] for i in keep], keep), keep


def restrict(spec: dict, entries: list, keep: list[int]) -> dict:
    """A copy of the Unigram tokenizer JSON `spec` (its own vocabulary ignored) whose vocabulary is `entries`, the
    whole model's pieces `keep` (ascending ids) with their scores, special tokens' ids mapped into it."""
    to_subset = {full: sub for sub, full in enumerate(keep)}
    model = spec.get("model") or {}
    derived = json.loads(json.dumps({**spec, "model": {**model, "vocab": []}}))  # a deep copy without the vocabulary
    derived["model"]["vocab"] = [list(entry) for entry in entries]
    unk = model.get("unk_id")
    if unk is not None:
        derived["model"]["unk_id"] = to_subset[int(unk)]
    for token in derived.get("added_tokens") or []:
        token["id"] = to_subset[int(token["id"])]
    post = derived.get("post_processor") or {}
    for special in (post.get("special_tokens") or {}).values():
        special["ids"] = [to_subset[int(i)] for i in special["ids"]]
    for key in ("sep", "cls"):  # RobertaProcessing / BertProcessing: [token, id]
        if isinstance(post.get(key), list) and len(post[key]) == 2:
            post[key] = [post[key][0], to_subset[int(post[key][1])]]
    return derived


class WholeVocabulary:
    """The whole model's pieces and scores and its JSON without them: what a model for the texts outside the
    subset is made from (`model_for`)."""

    def __init__(self, template: dict, pieces: list[str], scores: np.ndarray):
        if len(pieces) != len(scores) or not pieces:
            raise ValueError(f"{len(pieces)} pieces and {len(scores)} scores")
        self.template, self.pieces, self.scores = template, pieces, scores
        self.ids = {piece: i for i, piece in enumerate(pieces)}
        self.longest = max(len(piece) for piece in pieces)
        model = template.get("model") or {}
        fixed = {int(token["id"]) for token in template.get("added_tokens") or []}
        if model.get("unk_id") is not None:
            fixed.add(int(model["unk_id"]))
        fixed.add(int(np.argmin(scores)))  # the lowest-scoring piece: the unknown character's penalty
        if max(fixed) >= len(pieces):
            raise ValueError("a special token's id lies beyond the vocabulary")
        self.fixed = fixed

    @classmethod
    def of_spec(cls, spec: dict) -> "WholeVocabulary":
        vocab = spec["model"]["vocab"]
        template = {**spec, "model": {**spec["model"], "vocab": []}}
        return cls(template, [piece for piece, _ in vocab], np.array([score for _, score in vocab], dtype=np.float64))

    def model_for(self, words: Sequence[str]) -> tuple[dict, np.ndarray]:
        """(a tokenizer JSON, the whole model's id of each of its pieces) whose vocabulary is every piece that
        occurs in `words` (pre-tokenised, normalised) plus the fixed ones: a Unigram segmentation of those words
        only uses such pieces, so its ids are the whole model's (module doc)."""
        keep = set(self.fixed)
        for word in words:
            for start in range(len(word)):
                for end in range(start + 1, min(len(word), start + self.longest) + 1):
                    found = self.ids.get(word[start:end])
                    if found is not None:
                        keep.add(found)
        ordered = sorted(keep)
        entries = [[self.pieces[i], float(self.scores[i])] for i in ordered]
        return restrict(self.template, entries, ordered), np.asarray(ordered, dtype=np.int64)


def _read_vocabulary(folder: Path, source_sha256: str) -> WholeVocabulary | None:
    """The cached whole vocabulary, or None when a file is missing, damaged or not what the meta says."""
    try:
        meta = json.loads((folder / META_FILE).read_text())
        if not isinstance(meta, dict) or meta.get("version") != VERSION or meta.get("source_sha256") != source_sha256:
            return None
        raw = {name: (folder / name).read_bytes() for name in (PIECES_FILE, SCORES_FILE, TEMPLATE_FILE)}
        for name, key in ((PIECES_FILE, "pieces_sha256"), (SCORES_FILE, "scores_sha256"), (TEMPLATE_FILE, "template_sha256")):
            if meta.get(key) != hashlib.sha256(raw[name]).hexdigest():
                return None
        pieces = json.loads(raw[PIECES_FILE].decode("utf-8"))
        scores = np.load(io.BytesIO(raw[SCORES_FILE]), allow_pickle=False)
        template = json.loads(raw[TEMPLATE_FILE].decode("utf-8"))
        if not (isinstance(pieces, list) and all(isinstance(piece, str) for piece in pieces) and isinstance(template, dict)
                and scores.ndim == 1 and scores.dtype == np.float64 and np.isfinite(scores).all()):
            return None
        return WholeVocabulary(template, pieces, scores)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _read_subset(folder: Path, source_sha256: str) -> tuple[str, np.ndarray] | None:
    """The cached subset's JSON text and id map, or None when absent, damaged or of another source."""
    try:
        meta = json.loads((folder / META_FILE).read_text())
        text = (folder / TOKENIZER_FILE).read_text(encoding="utf-8")
        raw = (folder / IDS_FILE).read_bytes()
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("version") != VERSION or meta.get("source_sha256") != source_sha256:
        return None
    if (meta.get("tokenizer_sha256") != hashlib.sha256(text.encode("utf-8")).hexdigest()
            or meta.get("ids_sha256") != hashlib.sha256(raw).hexdigest()):
        return None
    try:
        ids = np.load(io.BytesIO(raw), allow_pickle=False)
    except ValueError:
        return None
    if ids.ndim != 1 or ids.dtype != np.int64 or not ids.size or int(ids.min()) < 0:
        return None
    return text, ids


def _write_subset(folder: Path, source_sha256: str, derived: dict, keep: list[int], whole: WholeVocabulary) -> str:
    text = json.dumps(derived, ensure_ascii=False)
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(keep, dtype=np.int64), allow_pickle=False)
    scores = io.BytesIO()
    np.save(scores, whole.scores, allow_pickle=False)
    files = {TOKENIZER_FILE: text.encode("utf-8"), IDS_FILE: buffer.getvalue(),
             PIECES_FILE: json.dumps(whole.pieces, ensure_ascii=False).encode("utf-8"), SCORES_FILE: scores.getvalue(),
             TEMPLATE_FILE: json.dumps(whole.template, ensure_ascii=False).encode("utf-8")}
    meta = {"version": VERSION, "source_sha256": source_sha256, "subset": SUBSET, "pieces": len(keep),
            "tokenizer_sha256": hashlib.sha256(files[TOKENIZER_FILE]).hexdigest(),
            "ids_sha256": hashlib.sha256(files[IDS_FILE]).hexdigest(),
            "pieces_sha256": hashlib.sha256(files[PIECES_FILE]).hexdigest(),
            "scores_sha256": hashlib.sha256(files[SCORES_FILE]).hexdigest(),
            "template_sha256": hashlib.sha256(files[TEMPLATE_FILE]).hexdigest()}
    with atomic_directory(folder, replaceable_if=META_FILE) as tmp:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / META_FILE).write_text(json.dumps(meta, indent=1) + "\n")
    return text


def _configure(tokenizer: Any, max_length: int) -> Any:
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    return tokenizer


def _load_file(path: Path, max_length: int) -> Any:
    from tokenizers import Tokenizer

    try:
        return _configure(Tokenizer.from_file(str(path)), max_length)
    except Exception as exc:
        raise ModelError(f"{path}: cannot load the tokenizer: {exc}") from None


class SubsetTokenizer:
    """Token ids of the tokenizer in `path` (a tokenizer.json), from the subset model where a text
    allows it, else from the whole one (module doc). `encode` and `encode_batch` answer like
    tokenizers.Tokenizer's for what the encoder reads (`ids`, `special_tokens_mask`)."""

    def __init__(self, path: Path | None, max_length: int, subset: tuple[str, np.ndarray] | None,
                 whole: Any = None, vocabulary: Callable[[], WholeVocabulary | None] | None = None):
        """`vocabulary`: reads the whole vocabulary for the texts outside the subset (called once, on the first
        such text); None, or a reader that finds none, sends those texts to the whole tokenizer."""
        self.path, self.max_length = path, max_length
        self._whole: Any = _configure(whole, max_length) if whole is not None else None
        self._vocabulary_reader = vocabulary
        self._vocabulary: WholeVocabulary | None = None
        self._lock = threading.Lock()
        self._sub: Any = None
        self._full_ids: np.ndarray | None = None
        if subset is not None:
            from tokenizers import Tokenizer

            text, self._full_ids = subset
            self._sub = _configure(Tokenizer.from_str(text), max_length)
        elif self._whole is None:
            self._whole = _load_file(Path(path), max_length)

    @property
    def uses_subset(self) -> bool:
        return self._sub is not None

    def whole(self) -> Any:
        """The whole tokenizer, loaded on first need."""
        with self._lock:
            if self._whole is None:
                self._whole = _load_file(Path(self.path), self.max_length)
            return self._whole

    def _normalized(self, text: str) -> str:
        normalizer = self._sub.normalizer
        return normalizer.normalize_str(text) if normalizer is not None else text

    def _fits(self, text: str) -> bool:
        return not _outside(self._normalized(text))

    def whole_vocabulary(self) -> WholeVocabulary | None:
        """The whole vocabulary, read on first need; None where it cannot be read (said once)."""
        with self._lock:
            if self._vocabulary_reader is not None:
                reader, self._vocabulary_reader = self._vocabulary_reader, None
                self._vocabulary = reader()
                if self._vocabulary is None:
                    log.warning("%s: the cached whole vocabulary cannot be read; texts outside the tokenizer subset "
                                "go to the whole tokenizer", self.path)
            return self._vocabulary

    def _encode_outside(self, texts: list[str]) -> list[Encoded]:
        """Texts with a character outside the subset: a model of their own pieces (module doc), else the whole one."""
        vocabulary = self.whole_vocabulary()
        if vocabulary is None:
            return [self._from_whole(e) for e in self.whole().encode_batch(texts)]
        from tokenizers import Tokenizer

        pre_tokenizer = self._sub.pre_tokenizer
        words = []
        for text in texts:
            normalized = self._normalized(text)
            words += [w for w, _ in pre_tokenizer.pre_tokenize_str(normalized)] if pre_tokenizer is not None else [normalized]
        spec, full_ids = vocabulary.model_for(words)
        model = _configure(Tokenizer.from_str(json.dumps(spec, ensure_ascii=False)), self.max_length)
        return [Encoded(full_ids[np.asarray(e.ids, dtype=np.int64)], list(e.special_tokens_mask), list(e.offsets))
                for e in model.encode_batch(texts)]

    def _from_sub(self, encoding: Any) -> Encoded:
        return Encoded(self._full_ids[np.asarray(encoding.ids, dtype=np.int64)], list(encoding.special_tokens_mask),
                       list(encoding.offsets))

    @staticmethod
    def _from_whole(encoding: Any) -> Encoded:
        return Encoded(np.asarray(encoding.ids, dtype=np.int64), list(encoding.special_tokens_mask),
                       list(encoding.offsets))

    def encode_batch(self, texts: Sequence[str]) -> list[Encoded]:
        if self._sub is None:
            return [self._from_whole(e) for e in self._whole.encode_batch(list(texts))]
        fits = [self._fits(text) for text in texts]
        out: list[Encoded | None] = [None] * len(texts)
        inside = [i for i, ok in enumerate(fits) if ok]
        outside = [i for i, ok in enumerate(fits) if not ok]
        for i, encoding in zip(inside, self._sub.encode_batch([texts[i] for i in inside])):
            out[i] = self._from_sub(encoding)
        if outside:
            for i, encoded in zip(outside, self._encode_outside([texts[i] for i in outside])):
                out[i] = encoded
        return out  # type: ignore[return-value]

    def encode(self, text: str) -> Encoded:
        return self.encode_batch([text])[0]


def load_tokenizer(path: Path, max_length: int, cache: Path | None) -> SubsetTokenizer:
    """The tokenizer of `path` (a tokenizer.json), through its subset where one applies, derived into
    the folder `cache` (None: no subset) on first use."""
    try:
        if cache is None or path.stat().st_size < MIN_FILE_BYTES:
            return SubsetTokenizer(path, max_length, None)
        source = sha256_file_once(path)
    except OSError as exc:
        raise ModelError(f"{path}: cannot read the tokenizer: {exc}") from None
    folder = cache / f"tokenizer-{source[:32]}-subset{VERSION}"
    found = _read_subset(folder, source)
    vocabulary: Callable[[], WholeVocabulary | None] = lambda: _read_vocabulary(folder, source)  # noqa: E731
    if found is None and not (folder / META_FILE).is_file():
        found, vocabulary = _derive(path, folder, source)
    elif found is None:
        log.warning("%s: cached tokenizer subset is damaged or outdated; deriving it again", folder)
        found, vocabulary = _derive(path, folder, source)
    try:
        return SubsetTokenizer(path, max_length, found, vocabulary=vocabulary)
    except Exception as exc:  # noqa: BLE001 - a subset this tokenizers version cannot read: the whole one, said
        log.warning("%s: the tokenizer subset cannot be loaded (%s); using the whole tokenizer", folder, exc)
        return SubsetTokenizer(path, max_length, None)


def _derive(path: Path, folder: Path, source: str) -> tuple[tuple[str, np.ndarray] | None,
                                                          Callable[[], WholeVocabulary | None]]:
    """(the subset's JSON and id map, or None where no subset applies; the reader of the whole vocabulary), the
    subset derived from `path` and cached in `folder` (kept in memory where the folder cannot be written)."""
    try:
        spec = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path}: cannot read the tokenizer: {exc}") from None
    derived = derive_subset(spec) if isinstance(spec, dict) else None
    if derived is None:
        return None, lambda: None
    whole = WholeVocabulary.of_spec(spec)
    try:
        text = _write_subset(folder, source, *derived, whole)
    except TigragError as exc:
        log.info("tokenizer subset not cached (%s); using it from memory this time", exc)
        return (json.dumps(derived[0], ensure_ascii=False), np.asarray(derived[1], dtype=np.int64)), lambda: whole
    return (text, np.asarray(derived[1], dtype=np.int64)), lambda: _read_vocabulary(folder, source)
