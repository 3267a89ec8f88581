"""The one evaluation path: baselines, TIGRAG, the ablations of Table 10 and sensitivity sweeps
over the same chunks and encoder, each ranking retrieved to the same depth and scored by
`metrics.score_rankings`; QA when an endpoint is given.

The quick `tigrag eval` is this runner with the single system "TIGRAG" (the --preset
configuration), and the benchmark scripts run their configurations through `Experiment` too, so
a figure means the same thing wherever it is printed. TIGRAG systems also carry the throughput
report (queries per second with and without the encoder's share, stage seconds, encoder texts
per query, mean hop-1 pool, mean hops, dense fallbacks).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..config import SYMBOLS, IndexConfig, RetrievalConfig, config_to_dict, replace_path, setting_path
from ..errors import IndexFormatError, TigragError
from ..encoders import CachingEncoder, Encoder, VectorCache
from ..encoders.lazy import query_encoder
from ..index.index import Index
from ..presets import preset_with
from ..methods.registry import System, method_available, systems
from ..retrieve.factory import make_retriever
from ..retrieve.results import QueryResult
from ..retrieve.base import StepTimer
from ..text.tokens import treebank_words
from .datasets import Dataset, check_gold
from .metrics import DEFAULT_CUTOFFS, RECALL_KS, Cutoffs, per_query_metrics, score_rankings
from .queries import Query

log = logging.getLogger(__name__)

def all_systems() -> tuple[str, ...]:
    """Every named system of every registered method (gpu_tigrag.methods), in registry order."""
    return tuple(systems())


def __getattr__(name: str):
    """`ALL_SYSTEMS`: the system names when first asked for (the registry loads the methods)."""
    if name == "ALL_SYSTEMS":
        return all_systems()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def resolve_system(name: str, choices: Sequence[str] | None = None) -> str:
    """The system named `name`, ignoring case and surrounding spaces (`tigrag` -> `TIGRAG`); an unknown
    name is an error listing the valid ones."""
    choices = list(all_systems() if choices is None else choices)
    by_key = {c.casefold(): c for c in choices}
    found = by_key.get(" ".join(name.split()).casefold())
    if found is None:
        raise TigragError(f"unknown system {name!r}; the systems are (case does not matter): "
                          + ", ".join(repr(c) for c in choices))
    return found


def resolve_systems(names: Sequence[str] | None) -> tuple[list[str], bool]:
    """(systems, every) of `eval --systems`: None or `all` (any case) is every system."""
    if not names or [n.casefold() for n in names] == ["all"]:
        return list(all_systems()), True
    return list(dict.fromkeys(resolve_system(n) for n in names)), False


def parse_system(spec: str, known: Mapping[str, System] | None = None) -> System:
    """A system of the user's choosing from `--system "NAME=BASE,KEY=VALUE,..."`: the named system BASE
    (any of `all_systems()`, or an earlier spec's NAME in `known`) with the settings KEY=VALUE on top (a
    part without `=` continues the value before it, so `tigrag.entity_labels=PERSON,ORG` is one setting).
    Every key and value is checked here, before any work; NAME must not be a built-in system's."""
    name, sep, rest = spec.partition("=")
    name = " ".join(name.split())
    parts = [p.strip() for p in rest.split(",")] if sep else []
    if not name or not parts or not parts[0]:
        raise TigragError(f"--system {spec!r}: expected NAME=BASE,KEY=VALUE,... (BASE: a system, e.g. "
                          "\"TIGRAG best\")")
    table = {**systems(), **(known or {})}
    if name.casefold() in {n.casefold() for n in systems()}:
        raise TigragError(f"--system {spec!r}: {name!r} is the name of a built-in system; choose another name")
    base = table[resolve_system(parts[0], list(table))]
    settings: dict[str, str] = {}
    last = None
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if eq:
            try:
                last = setting_path(RetrievalConfig, key.strip())
            except TigragError as exc:
                raise TigragError(f"--system {spec!r}: {exc}") from None
            settings[last] = value.strip()
        elif last is not None and part:
            settings[last] += "," + part
        elif part:
            raise TigragError(f"--system {spec!r}: {part!r} is not KEY=VALUE")
    system = System(name, base.method, {**base.overrides, **settings}, base.preset)
    try:
        system_config(system, RetrievalConfig())
    except TigragError as exc:
        raise TigragError(f"--system {spec!r}: {exc}") from None
    foreign = [path for path in settings if path.split(".")[0] in {m.name for m in _methods()} - {base.method}]
    if foreign:
        raise TigragError(f"--system {spec!r}: {foreign[0]} is a setting of {foreign[0].split('.')[0]}, but "
                          f"{base.name} runs {base.method}; it would change nothing")
    return system


def _methods():
    from ..methods.registry import methods

    return methods()


def _sweepable(symbol: str) -> bool:
    """Retrieval settings, and the window w (the sweep rebuilds the token graph)."""
    if symbol == "w":
        return True
    try:
        setting_path(RetrievalConfig, symbol)
    except TigragError:
        return False
    return True


#: sweep names: the paper's symbols of config.SYMBOLS (shared with --set) that a sweep can vary
SWEEP_KEYS = {symbol: path for symbol, path in SYMBOLS.items() if _sweepable(symbol)}
#: chunks retrieved per query by every system: room for de-duplication down to max(RECALL_KS) passages.
#: Top-k selection is stable (ties by chunk id), so a deeper ranking keeps the same top k.
DEPTH = 4 * max(RECALL_KS)


def depth_for(cutoffs: Cutoffs) -> int:
    """Chunks retrieved per query for `cutoffs`: DEPTH, or 4 × the deepest cutoff when that is more."""
    return max(DEPTH, 4 * cutoffs.deepest)


@dataclass
class SystemRun:
    """Chunk rankings of one system over the dataset, with the seconds of the retrieval call and,
    for TIGRAG, the hop traces and the throughput report."""

    name: str
    config: dict[str, Any]
    chunk_ids: list[list[int]]
    seconds: float
    results: list[QueryResult] = field(default_factory=list)
    throughput: dict[str, Any] = field(default_factory=dict)
    contexts: list[int] | None = None  # chunks of each query's adaptive context (SpectRAG); None: the top β
    settings: dict[str, Any] = field(default_factory=dict)  # its settings that differ from the paper's defaults
    fixed_settings: dict[str, Any] = field(default_factory=dict)  # user settings its definition overrides


def parse_sweeps(specs: Sequence[str] | None, base: RetrievalConfig = RetrievalConfig()) -> dict[str, list[str]]:
    """`th=0.1,0.5` -> {"th": ["0.1", "0.5"]}; keys are the paper's symbols (SWEEP_KEYS). Every value is
    checked against the setting's type and range (on `base`) here, before any work starts."""
    sweeps: dict[str, list[str]] = {}
    for spec in specs or []:
        key, sep, values = spec.partition("=")
        key = key.strip()
        items = [v.strip() for v in values.split(",") if v.strip()]
        if key in SYMBOLS and key not in SWEEP_KEYS:
            raise TigragError(f"--sweep {spec!r}: {key} ({SYMBOLS[key]}) is an index setting; sweep it by building "
                              f"one index per value (sweepable: {', '.join(SWEEP_KEYS)})")
        if not sep or key not in SWEEP_KEYS or not items:
            raise TigragError(f"--sweep {spec!r}: expected NAME=V1,V2,... with NAME one of {', '.join(SWEEP_KEYS)}")
        for value in items:
            try:
                sweep_config(base, key, value)
            except TigragError as exc:
                raise TigragError(f"--sweep {spec!r}: {exc}") from None
        sweeps[key] = items
    return sweeps


def sweep_config(base: RetrievalConfig, key: str, value: str) -> RetrievalConfig | IndexConfig:
    """The configuration of one sweep point: `base` with `key` set, or for "w" an IndexConfig."""
    return replace_path(IndexConfig() if key == "w" else base, key, value)


def passage_keys(index: Index, chunk_ids: Sequence[int], match: str) -> list[str]:
    """The passage key (title, or passage id when `match` is "doc_id") of each ranked chunk."""
    keys = index.passage_titles if match == "title" else index.passage_ids
    return [keys[int(index.chunk_passage[c])] for c in chunk_ids if c >= 0]


def run_contexts(run: SystemRun, beta: int) -> list[int]:
    """Chunks in each query's context: the adaptive context of a method that chooses one, else the top β."""
    return run.contexts if run.contexts is not None else [beta] * len(run.chunk_ids)


def score_run(index: Index, dataset: Dataset, run: SystemRun, beta: int = RetrievalConfig().beta,
              cutoffs: Cutoffs = DEFAULT_CUTOFFS) -> dict[str, Any]:
    """Every retrieval metric of `run` (metrics.score_rankings on its passage-key rankings), with the
    recall of each query's whole context (`context_recall`)."""
    return score_rankings([passage_keys(index, ids, dataset.match) for ids in run.chunk_ids], dataset.queries,
                          run_contexts(run, beta), cutoffs)


def per_query_run(index: Index, dataset: Dataset, run: SystemRun, beta: int = RetrievalConfig().beta,
                  cutoffs: Cutoffs = DEFAULT_CUTOFFS) -> dict[str, list[Any]]:
    """The per-query table of `run`, column by column: `qid`, then each metric of `score_run` (its
    means are the run's figures)."""
    values = per_query_metrics([passage_keys(index, ids, dataset.match) for ids in run.chunk_ids],
                               dataset.queries, run_contexts(run, beta), cutoffs)
    return {"qid": [q.qid for q in dataset.queries], **values}


#: how every run file and qrels file the engine writes names a passage (one doc-id space, `tigrag run` included)
RUN_KEY = "passage id"
RUN_KEY_NOTE = "passage id: the corpus's own id (_id, id or idx), the title where a passage has none"


def passage_rankings(index: Index, run: SystemRun) -> list[list[tuple[str, float]]]:
    """Each query's passage ranking (passage id, score) as a run file holds it: every passage once, at
    the rank and score of its best chunk (`runfiles.passage_ranking`), named as `tigrag run` names it."""
    from .runfiles import passage_ranking

    keys = index.passage_ids
    out = []
    for ids, result in zip(run.chunk_ids, run.results):
        pairs = [(keys[int(index.chunk_passage[c])], s) for c, s in zip(ids, result.scores) if c >= 0]
        out.append(passage_ranking([k for k, _ in pairs], [s for _, s in pairs]))
    return out


def throughput(results: Sequence[QueryResult], seconds: float, timer: StepTimer) -> dict[str, Any]:
    """Throughput of one TIGRAG retrieval call: queries/s without the encoder's seconds, seconds per
    query step, texts sent to the encoder per query, mean hop-1 pool, mean hops and dense fallbacks."""
    n = len(results)
    steps = dict(timer.seconds)
    hop_pools = [[h.pool_size for h in r.hops] for r in results if r.hops]  # methods without hops: none
    return {
        "queries_per_second_without_encoder": n / max(seconds - steps.get("encode", 0.0), 1e-9),
        "step_seconds": steps,
        "encoder_texts_per_query": timer.encoded_texts / max(n, 1),
        "mean_pool_size_hop1": float(np.mean([p[0] for p in hop_pools])) if hop_pools else None,
        "mean_hops": float(np.mean([len(p) for p in hop_pools])) if hop_pools else None,
        "dense_fallbacks": int(sum(r.dense_fallback for r in results)),
    }


#: what each throughput figure of a system's report includes (the report prints it)
THROUGHPUT_INCLUDES = {
    "queries_per_second": "the timed retrieval call: query vectors already computed (encoded once for all "
                          "systems before any was timed); texts the method encodes during retrieval (expansion "
                          "texts, LiteSemRAG's token states) included; after an untimed warm-up call",
    "queries_per_second_with_query_encoding": "the same plus the encoding of the queries, for each system that "
                                              "uses the encoder (equal terms: every such system pays it)",
    "queries_per_second_without_encoder": "the timed call without any encoder seconds: the graph and scoring stages",
}
#: queries of the untimed warm-up call before a system is timed (compilation, uploads, lazy loads)
WARMUP_QUERIES = 32


def run_retriever(name: str, retriever: Any, texts: Sequence[str], show_progress: bool = False,
                  depth: int = DEPTH, warmup: int = WARMUP_QUERIES,
                  before_timing: Callable[[], None] | None = None) -> SystemRun:
    """A method's retriever over `texts` at `depth` chunks, timed after an untimed warm-up call on the
    first `warmup` queries (numba compilation, device uploads and lazy stage loads are not a system's
    throughput); the stage timer is reset after it, so the throughput report covers the timed call alone.
    `before_timing` runs between the two (the experiment forgets the vectors the warm-up encoded, so the
    timed call pays for its expanded queries as a user's run would)."""
    if warmup and texts:
        retriever.retrieve(list(texts[:warmup]), k=depth)
    if before_timing is not None:
        before_timing()
    retriever.timer.seconds.clear()
    retriever.timer.encoded_texts = 0
    start = time.perf_counter()
    results = retriever.retrieve(list(texts), k=depth, show_progress=show_progress)
    seconds = time.perf_counter() - start
    contexts = [r.context for r in results]
    report = throughput(results, seconds, retriever.timer)
    if getattr(retriever, "chosen_modes", None):  # what "auto" settings chose for this index (TIGRAG's modes)
        report["auto_chose"] = dict(retriever.chosen_modes)
    return SystemRun(name, config_to_dict(retriever.config), [r.chunk_ids for r in results], seconds, results,
                     report,
                     None if any(c is None for c in contexts) or not contexts else contexts)


def context_tokens(index: Index, run: SystemRun, beta: int) -> float:
    """Mean size of the context (top β, or the method's adaptive context) in Treebank word tokens
    (the paper's Table 5 footprint)."""
    counts: dict[int, int] = {}  # a chunk in several contexts is tokenised once

    def tokens(chunk: int) -> int:
        if chunk not in counts:
            counts[chunk] = len(treebank_words(index.chunk_texts[chunk]))
        return counts[chunk]

    sizes = [sum(tokens(c) for c in ids[:size]) for ids, size in zip(run.chunk_ids, run_contexts(run, beta))]
    return float(np.mean(sizes)) if sizes else 0.0


def hop_gains(index: Index, dataset: Dataset, one_hop: SystemRun, two_hop: SystemRun, k: int = 5) -> dict[str, float]:
    """Gold passages that the second hop brought into the top k, per query."""
    added = []
    for q, a, b in zip(dataset.queries, one_hop.chunk_ids, two_hop.chunk_ids):
        gold = set(q.gold)
        before = gold & set(passage_keys(index, a[:k], dataset.match))
        after = gold & set(passage_keys(index, b[:k], dataset.match))
        added.append(len(after - before) - len(before - after))
    return {f"mean_gold_added_top{k}": float(np.mean(added)),
            f"queries_gaining_top{k}": float(np.mean([a > 0 for a in added])),
            f"queries_losing_top{k}": float(np.mean([a < 0 for a in added]))}


class Experiment:
    """Runs systems over one index and dataset, sharing the encoder (cached) and the backend.
    Gold passages missing from the index are a warning, none present an error (check_gold).
    `encoder` lets several experiments over one index share a cache (the benchmark scripts);
    `vector_cache` keeps the vectors on disk across runs."""

    def __init__(self, index: Index, dataset: Dataset, backend: str = "auto", base: RetrievalConfig = RetrievalConfig(),
                 show_progress: bool = False, encoder: CachingEncoder | Encoder | None = None,
                 vector_cache: VectorCache | None = None, allow_mixed_encoder: bool = False,
                 cutoffs: Cutoffs = DEFAULT_CUTOFFS, settings: Mapping[str, Any] | None = None,
                 custom_systems: Mapping[str, System] | None = None, measures: Sequence[Any] = ()):
        """`settings`: the user's settings (`--set`: {key: value}), applied on top of `base` and of every
        system's own preset (`system_config`). `custom_systems`: systems of the user's choosing
        (`parse_system`), run by name beside the built-in ones. `measures`: ir_measures measures
        (`measures.parse_measures`) computed on every system's passage run beside the built-in metrics."""
        self.custom_systems = dict(custom_systems or {})
        if dataset.match == "doc_id" and not any(index.passage_ids):
            raise TigragError("this dataset matches gold by passage id, but the index has no passage ids")
        check_gold(index.passage_titles if dataset.match == "title" else index.passage_ids, dataset.queries,
                   dataset.match)
        self.settings = setting_paths(settings)
        for path, value in self.settings.items():
            base = replace_path(base, path, value)
        self.index, self.dataset, self.backend, self.base = index, dataset, backend, base
        self.encoder = encoder if isinstance(encoder, CachingEncoder) else CachingEncoder(
            encoder or query_encoder(index, allow_mixed_encoder), vector_cache)
        self.allow_mixed_encoder = allow_mixed_encoder
        self.show_progress = show_progress
        from .measures import measure_depth

        self.measures = list(measures)
        self.cutoffs, self.depth = cutoffs, max(depth_for(cutoffs), 4 * measure_depth(self.measures))
        self._qrels: dict[str, dict[str, int]] | None = None
        self.texts = [q.text for q in dataset.queries]
        self.query_encode_seconds: float | None = None

    def encode_queries(self) -> float:
        """Encode every query once, before any system is timed, so that every system that uses the
        encoder is timed on equal terms (the first one would otherwise pay for all); returns (and
        keeps) the seconds it took, which `report` adds back as the `with_query_encoding` figure."""
        if self.query_encode_seconds is None:
            from ..encoders import QUERY

            before = self.encoder.seconds
            self.encoder.encode(self.texts, kind=QUERY)
            self.query_encode_seconds = self.encoder.seconds - before
        return self.query_encode_seconds

    def forget_all_but_queries(self) -> None:
        """Keep only the questions' vectors in the shared encoder's memory: every system's timed call
        then encodes its own expanded queries μ ⊕ e (a warm-up or an earlier system that encoded them
        would otherwise make them free, and a system's q/s would depend on its place in the run). A
        `VectorCache` on disk, where the user gave one, still answers: that is what it is for."""
        from ..encoders import QUERY

        self.encoder.retain({(QUERY, text) for text in self.texts})

    def retriever(self, config: RetrievalConfig, index: Index | None = None) -> Any:
        """The retriever of `config.method` (methods.make_retriever) sharing the experiment's encoder."""
        return make_retriever(index or self.index, config, encoder=self.encoder, backend=self.backend,
                              allow_mixed_encoder=self.allow_mixed_encoder)

    def run_system(self, name: str) -> SystemRun:
        """A named system (`all_systems()`): its method with its settings on top of a preset, or of
        the experiment's `base` configuration."""
        system = self.custom_systems.get(name) or systems().get(name)
        if system is None:
            raise TigragError(f"unknown system {name!r}; choose from {', '.join(all_systems())}")
        fixed = fixed_settings(system, self.settings)
        if fixed:
            log.warning("%s: its definition fixes %s, so the setting you gave for %s does not apply to it",
                        name, ", ".join(f"{path}={value}" for path, value in fixed.items()),
                        "it" if len(fixed) == 1 else "them")
        run = self.run_config(name, system_config(system, self.base, self.settings))
        run.fixed_settings = fixed
        return run

    def run_config(self, name: str, config: RetrievalConfig, index: Index | None = None) -> SystemRun:
        """The method of `config` (on `index`, default the experiment's), with its throughput report."""
        retriever = self.retriever(config, index)
        if retriever.uses_passage_encoder:
            self.encode_queries()
        run = run_retriever(name, retriever, self.texts, self.show_progress, self.depth,
                            before_timing=self.forget_all_but_queries)
        run.throughput["uses_query_encoder"] = bool(retriever.uses_passage_encoder)
        run.settings = non_default_settings(config)
        return run

    def run_external(self, name: str, path: str | Path) -> SystemRun:
        """The TREC run file at `path`, made elsewhere, as a system (`external.external_results`): scored
        like every system, not timed (its seconds are 0: no throughput is claimed for it)."""
        from .external import external_results

        results = external_results(self.index, self.dataset.queries, path, self.depth)
        return SystemRun(name, {"external_run": str(path)}, [r.chunk_ids for r in results], 0.0, results)

    def measure_values(self, run: SystemRun) -> dict[str, list[float]]:
        """{measure: per-query values} of the experiment's ir_measures `measures` on `run`'s passage run
        against the dataset's qrels, both named by passage id (`measures.score_measures`)."""
        if not self.measures:
            return {}
        from .measures import score_measures

        if self._qrels is None:
            self._qrels = {q.qid: q.grades() for q in gold_as_passage_ids(self.index, self.dataset)}
        return score_measures(self.measures, [q.qid for q in self.dataset.queries], passage_rankings(self.index, run),
                              self._qrels)

    def run_fusion(self, name: str, members: Sequence[SystemRun]) -> SystemRun:
        """The reciprocal-rank fusion of `members`' runs (`fused.fused_results`), not timed."""
        from .fused import RRF_K, fused_results

        results = fused_results(self.index, self.dataset.queries, [m.chunk_ids for m in members], self.depth)
        return SystemRun(name, {"fusion": "rrf", "members": [m.name for m in members], "k": RRF_K},
                         [r.chunk_ids for r in results], 0.0, results)

    def report(self, run: SystemRun) -> dict[str, Any]:
        """A system's entry of the results: configuration, retrieval seconds and queries/s, the
        throughput report (TIGRAG systems), context size of the top β, every metric and the
        per-query table (`per_query`: the query ids and each metric's value per query)."""
        n = len(self.dataset.queries)
        encoding = self.query_encode_seconds if run.throughput.get("uses_query_encoder") else 0.0
        return {"config": run.config, "settings": run.settings, "fixed_settings": run.fixed_settings,
                "seconds": run.seconds,
                "queries_per_second": n / run.seconds if run.seconds else None, **run.throughput,
                "queries_per_second_with_query_encoding": n / (run.seconds + (encoding or 0.0)) if run.seconds else None,
                "throughput_includes": THROUGHPUT_INCLUDES,
                "context_tokens": context_tokens(self.index, run, self.base.beta),
                **self._metrics(run)}

    def _metrics(self, run: SystemRun) -> dict[str, Any]:
        """The built-in metrics and per-query table of `run`, with the user's ir_measures measures added."""
        metrics = score_run(self.index, self.dataset, run, self.base.beta, self.cutoffs)
        per_query = per_query_run(self.index, self.dataset, run, self.base.beta, self.cutoffs)
        for name, values in self.measure_values(run).items():
            metrics[name] = float(np.mean(values)) if values else 0.0
            per_query[name] = values
        return {"metrics": metrics, "per_query": per_query}

    def sweep(self, key: str, values: Sequence[str]) -> list[dict[str, Any]]:
        rows = []
        for value in values:
            config = sweep_config(self.base, key, value)
            if isinstance(config, IndexConfig):
                index = with_window(self.index, config.graph.window)
                run = self.run_config(f"w={value}", self.base, index)
            else:
                run = self.run_config(f"{key}={value}", config)
            rows.append({"parameter": key, "value": value, "seconds": run.seconds,
                         **{m: v for m, v in score_run(self.index, self.dataset, run, self.base.beta,
                                                       self.cutoffs).items()
                            if m != "by_type"}})
        return rows


def run_files_folder(folder: str | Path, systems: Sequence[str], overwrite: bool = False) -> Any:
    """The `--save-runs` folder of `systems` (`outputs.OutputFolder`), checked: nothing gpu_tigrag did not
    write there is replaced, unless `overwrite`."""
    from ..outputs import OutputFolder
    from .runfiles import RUNS_FOLDER, run_file_names

    out = OutputFolder(folder, RUNS_FOLDER, f"--save-runs {folder}", force=overwrite)
    out.check(["qrels.tsv", "qrels.trec", *run_file_names(systems).values()])
    return out


def gold_as_passage_ids(index: Index, dataset: Dataset) -> list[Query]:
    """The dataset's queries with their gold named as run files name passages (`RUN_KEY`), so that qrels
    and runs share one doc-id space: a gold title becomes the ids of the index's passages of that title
    (each with the title's grade); a title the index lacks stays as it is (a miss either way, still in
    recall's denominator). Gold already given by id is returned as it is. Where a gold title names
    several passages of different ids, an external scorer counts each as relevant and the engine the
    title once: a warning says how many."""
    if dataset.match != "title":
        return list(dataset.queries)
    ids_of: dict[str, list[str]] = {}
    for title, doc_id in zip(index.passage_titles, index.passage_ids):
        ids_of.setdefault(title, [])
        if doc_id not in ids_of[title]:
            ids_of[title].append(doc_id)
    out, shared = [], set()
    for q in dataset.queries:
        grades: dict[str, int] = {}
        for title, grade in q.grades().items():
            ids = ids_of.get(title) or [title]
            if len(ids) > 1:
                shared.add(title)
            for doc_id in ids:
                grades[doc_id] = max(grade, grades.get(doc_id, 0))
        out.append(dataclasses.replace(q, gold=tuple(grades), gold_grades=tuple(grades.values())))
    if shared:
        log.warning("%d gold title(s) name several passages of different ids (e.g. %r): the qrels list every one, "
                    "so an external scorer's recall counts each, while the engine's counts the title once",
                    len(shared), sorted(shared)[0])
    return out


def save_run_files(folder: str | Path, index: Index, dataset: Dataset, runs: dict[str, SystemRun],
                   overwrite: bool = False) -> dict[str, Any]:
    """Write into `folder` one TREC run per system (`runfiles.run_file_names`: the system's name in safe
    characters, `.trec`; tag: the same name) and the gold of the dataset's queries as BEIR qrels
    (`qrels.tsv`) and TREC qrels (`qrels.trec`), all naming passages by passage id, as `tigrag run` does
    (`RUN_KEY`; title gold mapped by `gold_as_passage_ids`). Returns {"folder", "key", "qrels": [...],
    "runs": {system: file name}}."""
    from .runfiles import run_file_names, run_tag, write_qrels, write_trec_run

    out = run_files_folder(folder, list(runs), overwrite)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    qids = [q.qid for q in dataset.queries]
    gold = gold_as_passage_ids(index, dataset)
    write_qrels(folder / "qrels.tsv", gold, record=False)
    write_qrels(folder / "qrels.trec", gold, record=False)
    files = run_file_names(runs)
    for name, run in runs.items():
        write_trec_run(folder / files[name], qids, passage_rankings(index, run), run_tag(name),
                       record=False)  # the folder's record lists it
    out.record(["qrels.tsv", "qrels.trec", *files.values()], doc_ids=RUN_KEY_NOTE)
    log.info("wrote %d TREC run(s) and the qrels to %s (passages named by %s)", len(files), folder, RUN_KEY_NOTE)
    return {"folder": str(folder), "key": RUN_KEY, "qrels": ["qrels.tsv", "qrels.trec"], "runs": files}


def with_window(index: Index, window: int) -> Index:
    """A copy of `index` whose token co-occurrence graph is rebuilt with window `window`."""
    from ..backend import get_backend
    from ..index.graph import cooccurrence_graph

    token_graph = cooccurrence_graph(get_backend("numpy"), index.token_indptr, index.token_ids, index.n_vocab, window)
    config = dataclasses.replace(index.config, graph=dataclasses.replace(index.config.graph, window=window))
    return dataclasses.replace(index, graph=token_graph, config=config)


def setting_paths(settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """`settings` ({"th": "0.5", "tigrag.hops": 1, ...}) keyed by full setting paths (`th` ->
    `tigrag.pool_threshold`); an unknown key is a TigragError."""
    return {setting_path(RetrievalConfig, key): value for key, value in (settings or {}).items()}


def system_config(system: System, base: RetrievalConfig,
                  settings: Mapping[str, Any] | None = None) -> RetrievalConfig:
    """The configuration of `system`: its preset with the user's `settings` (`--set`) on top, or `base`
    (which carries them already) for a system without a preset; then its method and its own settings,
    which win where they fix a key the user set (`fixed_settings` names those)."""
    config = preset_with(system.preset, setting_paths(settings)) if system.preset else base
    config = dataclasses.replace(config, method=system.method)
    for path, value in system.overrides.items():
        config = replace_path(config, path, value)
    return config


def fixed_settings(system: System, settings: Mapping[str, Any] | None) -> dict[str, Any]:
    """{path: the system's value} of each of the user's `settings` that `system`'s definition fixes (the
    system's value is the one it runs with: `TIGRAG 1-hop` stays one hop under `--set tigrag.hops=3`)."""
    own = {setting_path(RetrievalConfig, key): value for key, value in system.overrides.items()}
    return {path: own[path] for path in setting_paths(settings) if path in own}


def non_default_settings(config: RetrievalConfig) -> dict[str, Any]:
    """{setting path: value} of every setting of `config` (the shared ones and its method's) that differs
    from the paper's default (`RetrievalConfig()` with the same method): what a report row says it ran."""
    def flat(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            if isinstance(value, Mapping):
                out.update(flat(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
        return out

    sections = set(config.sections) - {config.method}
    mine = {k: v for k, v in config_to_dict(config).items() if k not in sections}
    default = flat(config_to_dict(dataclasses.replace(RetrievalConfig(), method=config.method)))
    return {path: value for path, value in flat(mine).items() if default.get(path, object()) != value}


def available_systems(index: Index, names: Sequence[str],
                      custom_systems: Mapping[str, System] | None = None) -> tuple[list[str], dict[str, str]]:
    """(`names` this index can run, {system it cannot: the method whose index stage it lacks or
    whose stored stage is damaged}); a damaged stage is logged with its error, which names the
    `tigrag extend` command that rebuilds it, and fails only the systems of its method."""
    table = {**systems(), **(custom_systems or {})}
    missing = {s: table[s].method for s in names if s in table and not method_available(index, table[s].method)}
    damaged = set()
    for method in dict.fromkeys(table[s].method for s in names if s in table and s not in missing):
        if index.has_stage(method):
            try:
                index.stage(method)
            except IndexFormatError as exc:
                log.warning("%s", exc)
                damaged.add(method)
    missing.update({s: table[s].method for s in names if s in table and table[s].method in damaged})
    return [s for s in names if s not in missing], missing


def query_dataset(name: str, queries: Sequence[Query], match: str = "title") -> Dataset:
    """A dataset of queries alone (no corpus files), for running an Experiment on an index built
    elsewhere (the benchmark scripts)."""
    return Dataset(name, [], list(queries), match)


def run_experiment(index: Index, dataset: Dataset, systems: Sequence[str] | None = None,
                   sweeps: dict[str, list[str]] | None = None, backend: str = "auto",
                   base: RetrievalConfig | None = None, qa: Any = None,
                   show_progress: bool = False, vector_cache: VectorCache | None = None,
                   allow_mixed_encoder: bool = False, cutoffs: Cutoffs = DEFAULT_CUTOFFS,
                   baseline: str | None = None, save_runs: str | Path | None = None,
                   overwrite: bool = False, settings: Mapping[str, Any] | None = None,
                   custom_systems: Mapping[str, System] | None = None,
                   external_runs: Mapping[str, str | Path] | None = None, test: str = "randomization",
                   correction: str = "none", measures: Sequence[Any] = (),
                   fusions: Mapping[str, Sequence[str]] | None = None) -> dict[str, Any]:
    """All systems, sweeps and (optionally) QA in one run; returns the `results.json` payload.
    Progress goes to this module's logger (the CLI configures logging). `base` (default: the default
    preset, `best`, as `tigrag eval` and `Retriever`) is the configuration of the systems without a
    preset of their own and of the sweeps.

    `settings` ({key: value}, as `--set` gives them) apply on top of `base` and of the preset of every
    system that has one (`TIGRAG paper`, `best without title links`, ...); where a system's definition
    fixes a key, the system's value wins and its entry's `fixed_settings` says so. Each system's entry
    lists its `settings` that differ from the paper's defaults. `custom_systems` ({name: System}, from
    `parse_system`) are systems of the caller's choosing that `systems` may name. `external_runs` ({name: TREC
    run file}, `tigrag eval --run`) are runs made elsewhere, scored and compared as systems after them.
    `test` (randomization, t, wilcoxon) and `correction` (none, holm, bonferroni) choose what the significance
    markers follow (`significance.compare_systems`). `measures` (ir_measures measures, `measures.parse_measures`)
    are computed on every system's passage run and join its metrics and per-query table. `fusions` ({name:
    [member, ...]}, `--system "NAME=rrf(A,B)"`) are reciprocal-rank fusions of systems or runs of this run
    (members resolved ignoring case; a fusion may fuse an earlier one), scored after them.

    `cutoffs`: the metrics' cutoffs (retrieval goes to `depth_for(cutoffs)` chunks). With two systems or
    more, `significance` holds paired tests of every system against `baseline` (default: the first)
    on every per-query metric (`significance.compare_systems`). `save_runs`: a folder that receives one
    TREC run per system and the gold as qrels (`save_run_files`)."""
    from ..presets import preset
    from .significance import CORRECTIONS, TESTS

    base = preset() if base is None else base
    if test not in TESTS or correction not in CORRECTIONS:
        raise TigragError(f"significance: test must be one of {', '.join(TESTS)} and correction one of "
                          f"{', '.join(CORRECTIONS)}; got {test!r}, {correction!r}")
    names = list(all_systems() if systems is None else systems)
    unknown = [n for n in names if n not in all_systems() and n not in (custom_systems or {})]
    if unknown:
        raise TigragError(f"unknown system {unknown[0]!r}; choose from {', '.join(all_systems())} or define it "
                          "(custom_systems, `--system NAME=BASE,KEY=VALUE`)")
    others = [*(external_runs or {}), *(fusions or {})]
    for name, members in (fusions or {}).items():
        known = [*names, *(external_runs or {}), *list(fusions or {})[:list(fusions or {}).index(name)]]
        try:
            fusions = {**fusions, name: [resolve_system(m, known) for m in members]}
        except TigragError as exc:
            raise TigragError(f"--system {name}=rrf(...): {exc} (a fusion fuses systems or runs of this run, "
                              "or an earlier fusion)") from None
    if baseline is not None and baseline not in names and baseline not in others:
        raise TigragError(f"--baseline {baseline!r} is not one of the systems of this run "
                          f"({', '.join([*names, *others])})")
    if save_runs is not None:
        from .runfiles import check_unique_ids

        check_unique_ids([q.qid for q in dataset.queries], f"--save-runs {save_runs}")
        run_files_folder(save_runs, [*names, *others], overwrite)  # before any work: nothing foreign is replaced
    experiment = Experiment(index, dataset, backend, base, show_progress, vector_cache=vector_cache,
                            allow_mixed_encoder=allow_mixed_encoder, cutoffs=cutoffs, settings=settings,
                            custom_systems=custom_systems, measures=measures)
    runs: dict[str, SystemRun] = {}
    out: dict[str, Any] = {"systems": {}, "sweeps": {}, "hop_gains": None, "qa": None,
                           "measures": [str(m) for m in measures],
                           "cutoffs": {"recall": list(cutoffs.recall), "rank": list(cutoffs.rank)},
                           "depth": experiment.depth, "significance": None, "run_files": None}
    clash = [n for n in [*(external_runs or {}), *(fusions or {})] if n in names]
    if clash or set(external_runs or {}) & set(fusions or {}):
        raise TigragError(f"{(clash or sorted(set(external_runs or {}) & set(fusions or {})))[0]!r} names two systems "
                          "of this run (a --run, a --system or a named system); give each its own name")
    for name in names:
        log.info("system %s", name)
        run = experiment.run_system(name)
        runs[name] = run
        out["systems"][name] = experiment.report(run)
    for name, path in (external_runs or {}).items():
        log.info("external run %s (%s)", name, path)
        runs[name] = experiment.run_external(name, path)
        out["systems"][name] = experiment.report(runs[name])
    for name, members in (fusions or {}).items():
        log.info("fusion %s = rrf(%s)", name, ", ".join(members))
        runs[name] = experiment.run_fusion(name, [runs[m] for m in members])
        out["systems"][name] = experiment.report(runs[name])
    if len(runs) > 1:
        from .significance import compare_systems

        per_query = {name: {m: v for m, v in s["per_query"].items() if m != "qid"}
                     for name, s in out["systems"].items()}
        metrics = list(next(iter(per_query.values())))
        out["significance"] = compare_systems(per_query, baseline or next(iter(runs)), metrics, test=test,
                                              correction=correction)
    if save_runs is not None:
        out["run_files"] = save_run_files(save_runs, index, dataset, runs, overwrite)
    if "TIGRAG" in runs and "TIGRAG 1-hop" in runs:
        out["hop_gains"] = hop_gains(index, dataset, runs["TIGRAG 1-hop"], runs["TIGRAG"])
    for key, values in (sweeps or {}).items():
        log.info("sweep %s = %s", key, ", ".join(values))
        out["sweeps"][key] = experiment.sweep(key, values)
    if qa is not None:
        from .qa import run_qa

        log.info("question answering")
        out["qa"] = run_qa(qa, index, dataset, {n: runs[n] for n in ("NaiveRAG", "TIGRAG") if n in runs}, base.beta)
    out["query_encode_seconds"] = experiment.query_encode_seconds
    out["encoder_seconds"] = experiment.encoder.seconds
    out["encoder_texts"] = experiment.encoder.encoded
    if vector_cache is not None:
        out["vector_cache"] = {"folder": str(vector_cache.folder), "hits": vector_cache.hits,
                               "misses": vector_cache.misses}
        log.info("vector cache %s: %d hits, %d texts encoded", vector_cache.path, vector_cache.hits,
                 experiment.encoder.encoded)
    return out
