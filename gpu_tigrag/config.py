"""The settings tree: `IndexConfig` and `RetrievalConfig`, each with the base sections and every
registered method's own section (`config.tigrag`, `config.spectrag`), their dict form, `--set` paths
and the settings' documentation.

The tree stands above the method registry (it asks it for the methods and their section classes);
the leaf types it is built from are in `config_types.py`, below the registry, and are importable from
here too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import config_types
from .config_types import (  # noqa: F401  (the leaf types, importable from here as before)
    ANN_KINDS, AUTO_ANN_KIND, DEFAULT_ENTITY_LABELS, DENSE_SEARCHES, ENCODER_BACKENDS, ENTITY_LABELS, INT32_MAX,
    MAX_BATCH, MAX_HOPS, MAX_K1, MAX_MEMORY_MB, MAX_MIN_LENGTH, MAX_RANKED, MAX_SWEEPS, MAX_WEIGHT, SYMBOLS,
    AnnConfig, BM25Config, Bounds, CheckedConfig, ChunkConfig, DenseSearchConfig, EncoderConfig, EntityConfig,
    GraphConfig, TokenConfig, _Checked, _field_types, _require, _type_name, is_finite, parse_value, require, setting,
    setting_bounds, setting_name,
)
from .errors import TigragError


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

    @classmethod
    def method_sections(cls) -> dict[str, type]:
        """{method: config class} of the registered methods with settings on this side."""
        return _section_classes(cls._side)


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


config_types.SETTING_ROOTS[:] = [IndexConfig, RetrievalConfig]  # errors name settings by their path


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
    live now (`cls._moved_keys`: TIGRAG's settings, once top-level, into its section) and renamed
    fields under their names now (`cls._renamed`); a key given in both places is an error."""
    renamed = getattr(cls, "_renamed", {})
    if isinstance(data, Mapping) and any(key in data for key in renamed):
        for old, new in renamed.items():
            if old in data and new in data:
                raise TigragError(f"{cls.__name__}: {old!r} (the older name) and {new!r} are both given")
        data = {renamed.get(key, key): value for key, value in data.items()}
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
        name = parts[depth] = getattr(cls, "_renamed", {}).get(name, name)  # an older name of a setting
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
    return ".".join(parts)


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
