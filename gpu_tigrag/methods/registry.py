"""The method registry: every retrieval method is a plug-in that declares what it needs and offers.

A `Method` names its retriever, its query settings (`RetrievalConfig.<name>`), its index stage, if
it has one (`IndexStage`: settings `IndexConfig.<name>`, build, arrays in and out), and its named
evaluation systems. The core (build, add, stream, store, CLI, evaluation) loops over `methods()`
and names no method. The built-in methods register themselves when their package is imported;
other packages register theirs with `register` or through the `gpu_tigrag.methods` entry point
group (a callable that registers, or a `Method`).
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..errors import TigragError

if TYPE_CHECKING:
    from ..index.index import Index

log = logging.getLogger(__name__)

#: the built-in methods, in the order reports list their systems
BUILTIN_PACKAGES = ("baselines", "tigrag", "spectrag", "litesemrag")
BUILTIN_METHODS = ("naiverag", "bm25", "hybrid", "bm25passages", "tigrag", "spectrag", "litesemrag")
ENTRY_POINT_GROUP = "gpu_tigrag.methods"


class LazyFunction:
    """A function named "module:attribute", imported on its first call: a method's package declares its
    stage's functions without importing the stage's modules (and their NumPy, SciPy), so reading the
    registry (`RetrievalConfig()`, `tigrag --help`) imports no array library."""

    def __init__(self, target: str):
        self.target = target
        self._function: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._function is None:
            module, _, name = self.target.partition(":")
            self._function = getattr(importlib.import_module(module), name)
        return self._function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"LazyFunction({self.target!r})"


def lazy_stage(module: str, **fields: Any) -> "IndexStage":
    """The IndexStage whose build, to_arrays, from_arrays and summary are `module`'s functions of those
    names, imported on first use (LazyFunction); `fields` are the rest (config, arrays, ...)."""
    functions = {name: LazyFunction(f"{module}:{name}") for name in ("build", "to_arrays", "from_arrays", "summary")}
    return IndexStage(**functions, **fields)


@dataclass(frozen=True)
class IndexStage:
    """A method's own arrays in the index directory (manifest section `methods.<name>`).

    `build(index, config, backend, encoder, show_progress)` computes the stage over a
    finished base index; `to_arrays(stage)` gives its `.npy` arrays and string columns (names from
    `arrays` and `strings`); `from_arrays(arrays, strings, index, config, stats, folder)` rebuilds it,
    checking every array against the index and raising IndexFormatError naming the file that does not
    fit; `summary(index, stage)` is the one line `tigrag index`/`extend` print; `rebuilt_because`
    says in the log why `add` and streamed builds rebuild it over all chunks. Float arrays must hold
finite values when loaded, except those named in `nan_padded` (NaN marks padding there)."""

    config: type
    build: Callable[..., Any]
    to_arrays: Callable[[Any], tuple[dict[str, Any], dict[str, list[str]]]]
    from_arrays: Callable[..., Any]
    arrays: tuple[str, ...]
    strings: tuple[str, ...] = ()
    summary: Callable[[Any, Any], str] = lambda index, stage: ""
    rebuilt_because: str = "it is a function of all chunks"
    nan_padded: tuple[str, ...] = ()

    @property
    def files(self) -> list[str]:
        return [f"{name}.npy" for name in self.arrays] + [f"{name}.parquet" for name in self.strings]


@dataclass(frozen=True)
class System:
    """A named evaluation system: `method` with settings paths `overrides` (as `--set` takes them) on
    top of a preset (`preset`) or, when it is None, of the evaluation's base configuration."""

    name: str
    method: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    preset: str | None = None
    headline: bool = False  # shown in the report's by-question-type table (every system's split is in results.json)
    ablation_of: str | None = None  # the full system this one removes a mechanism from (the report's ablation table)


@dataclass(frozen=True)
class Method:
    """A retrieval method: `retriever` is its class or "module:Class" (imported on first use); its
    `systems` are the named configurations `tigrag eval --systems` runs; `claims` checks its paper's
    claims on a run's metrics (the report prints them)."""

    name: str
    label: str
    description: str
    retriever: Any
    query_config: type | None = None
    stage: IndexStage | None = None
    systems: tuple[System, ...] = ()
    #: the method's published claims checked on a run: ({system: metrics}, {system: {metric: per-query values}})
    #: -> one line per claim it can check (the second may be empty: an older run kept no per-query values)
    claims: Callable[[dict[str, dict[str, Any]], dict[str, dict[str, Any]]], list[str]] | None = None
    #: where the report's ablation table of this method comes from, e.g. "Table 10 layout" (shown in its heading)
    ablation_caption: str = ""

    def retriever_class(self) -> type:
        if isinstance(self.retriever, str):
            module, _, name = self.retriever.partition(":")
            return getattr(importlib.import_module(module), name)
        return self.retriever


_REGISTRY: dict[str, Method] = {}
_LOADED = False


def _load() -> None:
    """Import the built-in method packages (each registers itself) and the entry-point plug-ins, once."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    for package in BUILTIN_PACKAGES:
        importlib.import_module(f"{__package__}.{package}")
    from importlib.metadata import entry_points

    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded = entry.load()
            if isinstance(loaded, Method):
                register(loaded)
            elif callable(loaded):
                loaded()
        except Exception as exc:  # a broken third-party plug-in must not break the built-in methods
            log.warning("method plug-in %s (%s) failed to load: %s", entry.name, entry.value, exc)


def register(method: Method, replace: bool = False) -> Method:
    """Add `method` to the registry; a second method of the same name is an error unless `replace`."""
    if not method.name.isidentifier() or method.name != method.name.lower():
        raise TigragError(f"method name {method.name!r} must be a lower-case identifier (it names settings)")
    if method.name in _REGISTRY and not replace:
        raise TigragError(f"a method named {method.name!r} is registered already")
    clash = [s.name for s in method.systems if any(s.name == t.name for m in _REGISTRY.values()
                                                    if m.name != method.name for t in m.systems)]
    if clash:
        raise TigragError(f"system name(s) {clash} of method {method.name!r} are taken by another method")
    _REGISTRY[method.name] = method
    _section_cache.clear()
    return method


def unregister(name: str) -> None:
    """Remove a method (tests register throw-away methods)."""
    _REGISTRY.pop(name, None)
    _section_cache.clear()


def methods() -> tuple[Method, ...]:
    """Every registered method: the built-ins in their fixed order (whichever was imported first),
    then the others in registration order."""
    _load()
    builtin = {name: rank for rank, name in enumerate(BUILTIN_METHODS)}
    order = {name: rank for rank, name in enumerate(_REGISTRY)}
    return tuple(sorted(_REGISTRY.values(), key=lambda m: (builtin.get(m.name, len(builtin)), order[m.name])))


def method_names() -> tuple[str, ...]:
    return tuple(m.name for m in methods())


def get_method(name: str) -> Method:
    """The method `name`; TigragError listing the registered ones otherwise."""
    _load()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise TigragError(f"unknown method {name!r}; known: {', '.join(_REGISTRY)}") from None


def stage_methods() -> tuple[Method, ...]:
    """The methods with an index stage of their own."""
    return tuple(m for m in methods() if m.stage is not None)


_section_cache: dict[str, dict[str, type]] = {}


def section_classes(side: str) -> dict[str, type]:
    """{method: config class} of the methods with settings on `side`: "index" (their stage's) or "query"."""
    if side not in _section_cache:
        chosen = {}
        for m in methods():
            cls = (m.stage.config if m.stage is not None else None) if side == "index" else m.query_config
            if cls is not None:
                chosen[m.name] = cls
        _section_cache[side] = chosen
    return _section_cache[side]


def systems() -> dict[str, System]:
    """Every named evaluation system of every method, in registry order."""
    return {s.name: s for m in methods() for s in m.systems}


def check_methods(names: Any) -> tuple[str, ...]:
    """The method names of `names` (a sequence, or one comma-separated string), each registered;
    TigragError naming the unknown ones otherwise."""
    items = [m.strip() for m in (names.split(",") if isinstance(names, str) else names) if m.strip()]
    known = method_names()
    unknown = [m for m in items if m not in known]
    if unknown:
        raise TigragError(f"unknown method(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return tuple(dict.fromkeys(items))


def method_available(index: "Index", method: str) -> bool:
    """Whether `index` holds what `method` needs: its stage, when it has one."""
    return get_method(method).stage is None or index.has_stage(method)


#: the name `gpu_tigrag.register_method` exports
register_method = register
