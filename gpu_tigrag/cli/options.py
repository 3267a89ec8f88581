"""Option handling shared by the commands: `--set` parsing (before any work), numeric ranges, output
folders and query files checked up front, the retrieval configuration and encoder options of a command."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from ..config import RetrievalConfig, replace_path
from ..errors import CorpusError, TigragError
from ..evaluate.datasets import QuerySource


def parse_sets(config: Any, assignments: Sequence[str]) -> Any:
    for item in assignments or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TigragError(f"--set expects KEY=VALUE (e.g. tigrag.ppr.damping=0.5), got {item!r}")
        try:
            config = replace_path(config, key.strip(), value.strip())
        except TigragError as exc:
            raise TigragError(f"--set {item}: {exc}") from None
    return config


def set_values(assignments: Sequence[str] | None) -> dict[str, str]:
    """{key: value} of the `--set KEY=VALUE` options (checked by `parse_sets` before)."""
    return {key.strip(): value.strip() for key, _, value in (item.partition("=") for item in assignments or [])}


def set_owners(config_cls: type, assignments: Sequence[str] | None) -> list[tuple[str, str, str]]:
    """(assignment, setting path, method) of each `--set` that belongs to a method's section (e.g.
    `spectrag.alpha`, or `th` = `tigrag.pool_threshold`); shared settings (beta, ...) are left out."""
    from ..config import setting_path
    from ..methods.registry import methods

    names = {m.name for m in methods()}
    owned = []
    for item in assignments or []:
        path = setting_path(config_cls, item.partition("=")[0].strip())
        if path.split(".")[0] in names:
            owned.append((item, path, path.split(".")[0]))
    return owned


def check_method_sets(assignments: Sequence[str] | None, used: Sequence[str], what: str) -> None:
    """TigragError for a retrieval `--set` of a method that none of `used` runs: it would change
    nothing, without a word (`what` names the methods run, e.g. "--method tigrag")."""
    for item, path, owner in set_owners(RetrievalConfig, assignments):
        if owner not in used:
            raise TigragError(f"--set {item}: {path} is a setting of {owner}, which this command does not run "
                              f"({what}); it would change nothing")


#: smallest accepted value of each numeric option (dest -> (flag, minimum)); checked before any work
MINIMUMS: dict[str, tuple[str, float]] = {
    "k": ("-k", 1), "limit": ("--limit", 0), "shard_size": ("--shard-size", 0), "memory_budget": ("--memory-budget", 1),
    "partition_passages": ("--partition-passages", 0), "qa_concurrency": ("--qa-concurrency", 1),
    "qa_rate": ("--qa-rate", 0),
}


def check_options(args: argparse.Namespace) -> None:
    """Numeric options in range (TigragError otherwise): -k >= 1, --limit >= 0, ..."""
    bounds = dict(MINIMUMS, workers=("--workers", 1 if args.command == "index" else 0))
    for dest, (flag, minimum) in bounds.items():
        value = getattr(args, dest, None)
        if value is not None and value < minimum:
            raise TigragError(f"{flag} must be >= {minimum}, got {value}")


def check_writable(folder: str | Path, what: str) -> None:
    """Create `folder` (and its parents) and a probe file in it, so that an unwritable output fails
    before the work starts, in one line naming `what` (the option)."""
    import tempfile

    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tigrag-probe-"):
            pass
    except OSError as exc:
        raise TigragError(f"{what}: cannot write in {folder} ({exc.strerror or exc})") from None


def check_query_file(path: str | Path | QuerySource, unique_ids: bool = False) -> int:
    """Read every query of a `run` query file once before any output is opened: an unreadable file
    (not JSONL, a JSON list or Parquet, damaged) or an empty query is an error naming the file and the
    query; with `unique_ids` (a TREC run names queries by id), so is an id used twice."""
    from ..batch_run import stream_queries

    count = 0
    seen: set[str] = set()
    try:
        for record in stream_queries(path):
            if not record.text.strip():
                raise CorpusError(f"{path}: the query at index {record.position} (id {record.qid!r}) is empty; "
                                  "empty queries are errors: remove them or give them text")
            if unique_ids:
                if record.qid in seen:
                    raise CorpusError(f"{path}: the query at index {record.position} has the id {record.qid!r} of "
                                      "an earlier query; a TREC run names each query by its id, so the ids must "
                                      "be unique")
                seen.add(record.qid)
            count += 1
    except TigragError:
        raise
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise CorpusError(f"{path}: not a readable query file ({type(exc).__name__}: {exc})") from None
    return count


def retrieval_config(args: argparse.Namespace, one_method: bool = True) -> RetrievalConfig:
    """The preset named by --preset with --method, and the --set overrides applied on top; with
    `one_method` (query, run, the quick eval), a --set of another method than --method's is an error."""
    import dataclasses

    from ..presets import preset

    config = parse_sets(dataclasses.replace(preset(args.preset), method=args.method), args.sets)
    if one_method:
        check_method_sets(args.sets, [config.method], f"--method {config.method}")
    return config


def encoder_options(args: argparse.Namespace) -> dict[str, Any]:
    """Retriever keyword arguments of --vector-cache and --allow-mixed-encoder. A cache folder inside an index
    is refused: an index is written only by `index`, `add` and `extend`."""
    cache = None
    if args.vector_cache is not None:
        from ..encoders import VectorCache, default_cache_dir
        from ..outputs import check_outside_indexes

        if args.vector_cache_mib < 1:
            raise TigragError(f"--vector-cache-mib must be >= 1, got {args.vector_cache_mib}")
        check_outside_indexes(args.vector_cache or default_cache_dir(), "--vector-cache")
        cache = VectorCache(args.vector_cache or None, max_bytes=args.vector_cache_mib << 20)
    return {"vector_cache": cache, "allow_mixed_encoder": args.allow_mixed_encoder}
