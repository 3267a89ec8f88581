"""What a `tigrag run` output belongs to, and the checks `--resume` makes before trusting it.

When a run starts it writes `OUT.meta.json` beside its output: the sha256 of the query file and
its number of queries (what a complete output holds: `tigrag trec` checks it), the identity of
the index (its manifest's sha256), the retrieval configuration and k. A
resume continues only if all four are unchanged and every row already written is the answer
to the query at its position (same index, id and query text, at most k chunks); otherwise it
refuses with a `ResumeMismatchError` that says what differs, and changes nothing. A torn last
line (a kill in the middle of a write) is cut off only if it is the start of the next row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from .atomic import atomic_write_json, remove_stale_temporaries
from .checksums import sha256_file
from .errors import CorpusError, ResumeMismatchError, TigragError
from .evaluate.datasets import QuerySource

FORMAT = "gpu_tigrag-run"
HINT = "refusing to --resume it (nothing was changed): choose another output, or delete it to start over"


def meta_path(output: Path) -> Path:
    """The sidecar of `output`: `OUT.meta.json` beside it."""
    return output.with_name(output.name + ".meta.json")


def run_identity(queries: str | Path | QuerySource, index: str, config: dict[str, Any], k: int) -> dict[str, Any]:
    """The sidecar's content for a run of `queries` on index `index` (see `index_fingerprint`); a
    split's run also records the split and its qrels' sha256 (they choose which queries it answers)."""
    from .evaluate.datasets import qrels_file, query_file

    source = queries if isinstance(queries, QuerySource) else QuerySource(Path(queries))
    path = query_file(source.path)
    if not path.is_file():
        raise CorpusError(f"{path}: no such query file")
    from .batch_run import stream_queries

    count = sum(1 for _ in stream_queries(source))
    identity = {"format": FORMAT, "queries_sha256": sha256_file(path), "queries": count, "index": index,
                "retrieval_config": config, "k": k}
    if source.split is not None:
        identity.update(split=source.split, qrels_sha256=sha256_file(qrels_file(source.path, source.split)))
    return json.loads(json.dumps(identity))  # as it reads back (tuples become lists)


def write_meta(output: Path, identity: dict[str, Any]) -> None:
    """Write the sidecar atomically (`atomic.py`), first removing what a killed write of it left;
    the caller holds the output's writer lock."""
    target = meta_path(output)
    if target.exists() or target.is_symlink():
        check_own_meta(target)
    remove_stale_temporaries(target)
    atomic_write_json(target, identity, indent=1, sort_keys=True)


def check_own_meta(sidecar: Path) -> None:
    """TigragError unless the existing `sidecar` is a run description this engine wrote (a regular file
    holding this format): a foreign file there is never replaced."""
    try:
        saved = json.loads(sidecar.read_text(encoding="utf-8")) if sidecar.is_file() and not sidecar.is_symlink() \
            else None
    except (OSError, ValueError):
        saved = None
    if not isinstance(saved, dict) or saved.get("format") not in (FORMAT, "gpu_tigrag-output"):
        raise TigragError(f"{sidecar}: exists and is not the run description `tigrag run` writes there; refusing to "
                          "replace it (nothing was written): move it away, or choose another output")


def _differences(saved: Any, wanted: Any, prefix: str = "") -> list[str]:
    if isinstance(saved, dict) and isinstance(wanted, dict):
        return [d for key in sorted(set(saved) | set(wanted))
                for d in _differences(saved.get(key), wanted.get(key), f"{prefix}{key}.")]
    return [] if saved == wanted else [f"{prefix[:-1]} {saved!r} there, {wanted!r} now"]


def _current_layout(config: Any) -> Any:
    """A stored retrieval config in today's layout: a run file written before TIGRAG's settings became
    the `tigrag` section, or before a setting existed (which then had its default's behaviour: every
    new setting's default is the behaviour before it), resumes as long as the settings are the same."""
    from .config import RetrievalConfig, config_from_dict, config_to_dict, upgrade_config_dict

    if not isinstance(config, dict):
        return config
    try:
        full = config_to_dict(config_from_dict(RetrievalConfig, _before_auto(upgrade_config_dict(RetrievalConfig, config))))
        return json.loads(json.dumps(full))  # as the sidecar holds it (tuples as lists)
    except TigragError:
        return config


def _before_auto(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config without TIGRAG's modes was written when they were "full" and "exact" whatever
    the index (before their "auto" defaults): it resumes only where the modes that run now are those."""
    tigrag = config.get("tigrag")
    if not isinstance(tigrag, dict):
        return config
    ppr = tigrag.get("ppr", {})
    if not isinstance(ppr, dict):
        return config
    if "method" not in ppr and "algorithm" not in ppr:  # (tigrag.ppr.method is its older name)
        ppr = {**ppr, "algorithm": "exact"}
    return {**config, "tigrag": {**tigrag, "blocks": tigrag.get("blocks", "full"), "ppr": ppr}}


def check_meta(output: Path, identity: dict[str, Any], has_content: bool) -> None:
    """Refuse to resume `output` unless its sidecar matches `identity`. Only an empty output (an empty
    file or folder) needs none: one that holds anything, rows or not, without the run's own sidecar may be
    someone else's, and a resume would write into it (and trim there)."""
    sidecar = meta_path(output)
    if not sidecar.is_file():
        if not has_content:
            return
        raise ResumeMismatchError(f"{output}: has no {sidecar.name} (not written by this version of `tigrag run`), "
                                  f"so what it holds cannot be checked against this run; {HINT}")
    try:
        saved = json.loads(sidecar.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ResumeMismatchError(f"{sidecar}: damaged ({exc}); {HINT}") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ResumeMismatchError(f"{sidecar}: not a gpu_tigrag run description; {HINT}")
    reasons = []
    if saved.get("queries_sha256") != identity["queries_sha256"]:
        reasons.append("another query file (its sha256 differs)")
    if saved.get("index") != identity["index"]:
        reasons.append("another index (its manifest's sha256 differs)")
    if saved.get("k") != identity["k"]:
        reasons.append(f"k={saved.get('k')}, not k={identity['k']}")
    changed = _differences(_current_layout(saved.get("retrieval_config")), identity["retrieval_config"])
    if changed:
        reasons.append("another retrieval configuration (" + "; ".join(changed[:5])
                       + (f"; {len(changed) - 5} more" if len(changed) > 5 else "") + ")")
    if reasons:
        raise ResumeMismatchError(f"{output}: was written for {', '.join(reasons)}; {HINT}")


def check_rows(output: Path, rows: Iterable[Any], records: Iterator[Any], k: int) -> int:
    """Check that each existing row answers the query at its position; consumes those queries from
    `records` and returns how many rows there are."""
    done = 0
    for row in rows:
        record = next(records, None)
        where = f"{output}: row {done + 1}"
        if record is None:
            raise ResumeMismatchError(f"{where}: the query file has only {done} queries; {HINT}")
        if not isinstance(row, dict):
            raise ResumeMismatchError(f"{where} is not a result row; {HINT}")
        if (row.get("index"), str(row.get("id")), row.get("query")) != (record.position, record.qid, record.text):
            raise ResumeMismatchError(f"{where} is not the answer to query {record.position} ({record.qid!r}) of "
                                      f"the query file; {HINT}")
        chunk_ids = row.get("chunk_ids")
        if not isinstance(chunk_ids, list) or len(chunk_ids) > k:
            raise ResumeMismatchError(f"{where} does not hold at most k={k} chunk ids; {HINT}")
        done += 1
    return done


def torn_tail_ok(tail: bytes, position: int) -> bool:
    """Whether `tail`, a last line without its newline, is the start of the row of query `position`
    (what a kill in the middle of a write leaves)."""
    head = f'{{"index": {position}, "id": '.encode()
    return head.startswith(tail) or tail.startswith(head)
