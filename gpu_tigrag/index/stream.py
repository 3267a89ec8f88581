"""Streaming, partitioned and resumable index build for corpora larger than memory.

Passages are read lazily and cut into partitions whose size follows `memory_budget_mb`.
Each stage of each partition writes a checkpoint file into `<output>.work/` (atomically),
so a build that is killed resumes with `resume=True` and redoes only unfinished work.
Checkpoints are named by the content hash of their partition's passages (and counts also by
the vocabulary's, which depends on every partition), so a corpus edited before a resume gets
its changed partitions recomputed, never stale text; and each is checksummed when written and
checked before a resume uses it (`checkpoints.py`), so a damaged one is recomputed too. The
build holds the output's writer lock (`OUTPUT.lock`) from start to end. Passages repeating an
earlier one's title and text (a corpus given twice) are counted across partitions by 8-byte
digests and reported in a warning, or dropped with `drop_duplicates=True`; two passages with one id
and another title or text are an error naming both records, found across partitions and files by the
ids seen (`corpus.PassageIds`: one entry per id, no text).

  1. tokenise (worker processes): split, chunk and tokenise; a local sorted vocabulary
  2. vocabulary: the sorted union of the local ones (ids as in the in-memory build)
  3. count (worker processes): global ids, co-occurrence pair counts, BM25 statistics
  4. merge: pair counts summed bucket by bucket of the key range (bounded memory); statistics added
  5. embed, 6. entities: per partition
  7. assemble: `assemble.assemble_index`, as `build_index` on the whole corpus, saved atomically
     (with the ANN of the chunk vectors where `ann.kind` asks for one, and the stages of the other
     `methods`, e.g. SpectRAG's chunk graph, built over the whole index)

Counts and statistics are additive, every stage is deterministic, and the result equals the
in-memory build array for array (tested), so a resumed build is byte-identical to a clean one.

Stages 1 and 3 run in local spawned processes, or on the workers of a Dask scheduler
(`scheduler=ADDRESS`); those read and write the checkpoints themselves, so the work directory
must be on a filesystem they share with this process (checked before any work is sent).
`memory_budget_mb` sizes the partitions, so it bounds the working memory of the partitions in
flight above the fixed cost of the runtime (interpreter and libraries in each process); the merge
and the assembly in this process need memory in proportion to the index itself (tests/index/test_stream.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
import queue
import re
import shutil
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import scipy.sparse

from ..atomic import atomic_write_json
from ..backend import get_backend
from ..config import ChunkConfig, IndexConfig, TokenConfig, config_from_dict, config_to_dict
from ..corpus import Passage, expand_paths, iter_corpus
from ..errors import CorpusError, TigragError
from ..locking import writer_lock
from ..progress import counter
from ..text.pipeline import chunk_and_tokenise, split_passages
from ..text.tokens import Vocabulary, token_csr
from .bm25 import CorpusStatistics, bm25_matrix, corpus_statistics
from .ann import ann_for
from . import assemble
from .assemble import EntityExtractor, assemble_index, chunk_entities, timed
from .checkpoints import BUILD, LEDGER, Ledger, load_npz, save_npy, save_npz
from .stream_embed import embed_partition, encoder_identity, resolve_embed_on
from ..encoders import PASSAGE, Encoder, load_encoder
from ..encoders.lazy import LazyEncoder
from .graph import count_pairs, symmetric_graph, window_pair_keys
from .index import Index
from .store import INDEX_WRITE

log = logging.getLogger(__name__)

#: worker processes are spawned, not forked: the parent may already run OpenMP or torch threads
_SPAWN = multiprocessing.get_context("spawn")
#: rough peak bytes per passage while one partition is tokenised and counted
BYTES_PER_PASSAGE = 48 * 1024
MERGE_BUCKETS_MIN = 4
#: checkpoint stages of a partition (the last part of its file name)
TOKENS, COUNTS, EMBED, ENTITIES = "tokens.npz", "counts.npz", "embed.npy", "entities.json"


def _start_worker(parent: int, threads: int | None, workers: int) -> None:
    """Worker initializer: take this worker's share of the cores (`threads`, None: the host's, divided
    among the `workers`: gpu_tigrag.threads), and leave when the build process is gone (killed with -9,
    say), instead of lingering as an orphan that holds its memory."""
    import threading

    from ..threads import apply_thread_policy

    apply_thread_policy(threads, workers=workers, force=True)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def partition_passages(memory_budget_mb: int, workers: int) -> int:
    """Passages per partition so that `workers` partitions in flight fit the budget."""
    return max(256, (memory_budget_mb << 20) // (BYTES_PER_PASSAGE * max(workers, 1)))


def partition_key(batch: Sequence[Passage]) -> str:
    """Content hash of a partition's passages (title, text and id of each, in order)."""
    digest = hashlib.sha256()
    for passage in batch:
        digest.update(json.dumps([passage.title, passage.text, passage.doc_id]).encode() + b"\n")
    return digest.hexdigest()[:20]


class RepeatedPassages:
    """Counts passages whose title and text repeat an earlier one's, across every partition, by an
    8-byte digest each (a collision among a million passages has odds of about 3e-8)."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.repeated = 0

    def is_repeat(self, passage: Passage) -> bool:
        digest = hashlib.blake2b(f"{passage.title}\0{passage.text}".encode(), digest_size=8).digest()
        key = int.from_bytes(digest, "little")
        if key in self.seen:
            self.repeated += 1
            return True
        self.seen.add(key)
        return False


def _iter_partitions(paths: Sequence[Path], size: int, repeats: RepeatedPassages,
                     drop_duplicates: bool) -> Iterator[list[Passage]]:
    """The non-empty passages of `paths` in partitions of `size`; a passage id used by two passages of
    the corpus (in any partitions, any files) is an error naming both records (`corpus.iter_corpus`)."""
    batch: list[Passage] = []
    for passage in iter_corpus(paths):
        if passage.text:
            if repeats.is_repeat(passage) and drop_duplicates:
                continue
            batch.append(passage)
            if len(batch) == size:
                yield batch
                batch = []
    if batch:
        yield batch


def _tokenise_partition(records: list[tuple[str, str, str]], chunk: dict, tokens: dict, out: str) -> str:
    """Stage 1 (worker): chunks, local sorted vocabulary and local token ids of one partition;
    returns the checkpoint's sha256."""
    passages = [Passage(t, x, d) for t, x, d in records]
    chunk_cfg, token_cfg = config_from_dict(ChunkConfig, chunk), config_from_dict(TokenConfig, tokens)
    sentences = split_passages(passages, chunk_cfg.language)
    texts, owner, sequences = chunk_and_tokenise(passages, sentences, chunk_cfg, token_cfg)
    local = Vocabulary.from_sequences(sequences)
    indptr, ids = token_csr(sequences, local)
    return save_npz(Path(out), vocab=np.array(local.tokens, dtype=str), indptr=indptr, ids=ids,
                     texts=np.array(texts, dtype=str), owner=np.asarray(owner, dtype=np.int32),
                     titles=np.array([p.title for p in passages], dtype=str),
                     doc_ids=np.array([p.doc_id for p in passages], dtype=str))


def _count_partition(tokens_path: str, vocab_path: str, window: int, out: str, backend: str = "numpy") -> str:
    """Stage 3 (worker, or this process on a GPU): global ids, unique pair keys with counts, and
    BM25 statistics; pairs are emitted and counted on `backend`. Returns the checkpoint's sha256."""
    part = load_npz(Path(tokens_path))
    vocab = np.load(vocab_path, allow_pickle=False)
    remap = np.searchsorted(vocab, part["vocab"]).astype(np.int32)
    ids = remap[part["ids"]] if part["ids"].size else part["ids"]
    be = get_backend(backend)
    device_ids = be.asarray(ids)
    keys, counts = count_pairs(be, window_pair_keys(be, part["indptr"], device_ids, len(vocab), window))
    keys, counts = be.to_host(keys), be.to_host(counts)
    stats = corpus_statistics(be, be.asarray(part["indptr"]), device_ids, len(vocab))
    return save_npz(Path(out), ids=ids.astype(np.int32), keys=keys, counts=counts.astype(np.int64),
                     n_docs=np.int64(stats.n_docs), total_length=np.int64(stats.total_length),
                     doc_freq=stats.doc_freq)


@dataclass
class StreamBuild:
    """Paths and settings of one streaming build."""

    paths: list[Path]
    output: Path
    config: IndexConfig
    workers: int
    size: int
    scheduler: str | None = None
    backend: str = "numpy"
    drop_duplicates: bool = False
    embed_on: str = "here"  # where the chunk vectors are computed: "here" or "workers" (stream_embed.py)
    threads: int | None = None  # the threads the workers share (None: their host's cores)
    keys: list[str] = field(default_factory=list)  # content hash of each partition, filled by the tokenise stage

    def __post_init__(self) -> None:
        self.ledger = Ledger(self.work)

    @property
    def work(self) -> Path:
        return self.output.with_name(self.output.name + ".work")

    def part(self, p: int, stage: str) -> Path:
        """Checkpoint `stage` (TOKENS, EMBED, ENTITIES, COUNTS) of partition `p`, named by the
        partition's content hash (counts also by the vocabulary's)."""
        key = f"{self.keys[p]}-{self.vocab_key()}" if stage == COUNTS else self.keys[p]
        return self.work / f"part-{p:05d}-{key}.{stage}"

    def has_earlier(self, p: int, stage: str) -> bool:
        """Whether partition `p` has a `stage` checkpoint of other content (its passages changed)."""
        return any(self.work.glob(f"part-{p:05d}-*.{stage}"))

    def texts(self, p: int) -> list[str]:
        """The chunk texts of partition `p` (from its tokens checkpoint)."""
        with np.load(self.part(p, TOKENS), allow_pickle=False) as part:
            return part["texts"].tolist()

    def vocab_key(self) -> str:
        return hashlib.sha256(" ".join(self.keys).encode()).hexdigest()[:20]

    def vocab_file(self) -> Path:
        return self.work / f"vocab-{self.vocab_key()}.npy"

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed build must share with the interrupted one (the partition size is taken from it);
        the inputs' content is checked partition by partition (`part`)."""
        fingerprint = {"checkpoints": 2, "config": config_to_dict(self.config),
                       "inputs": [str(p.resolve()) for p in self.paths], "drop_duplicates": self.drop_duplicates}
        return json.loads(json.dumps(fingerprint))  # as read back from BUILD (tuples such as entity_labels: lists)


Submit = Callable[..., Any]


@contextmanager
def partition_executor(build: StreamBuild) -> Iterator[tuple[Submit, int, dict[str, Any] | None]]:
    """(submit(fn, *args) -> future, parallel slots, the Dask workers' thread shares or None): spawned local
    processes (which take their share of the cores as they start), or Dask workers."""
    if build.scheduler is None:
        with ProcessPoolExecutor(max_workers=build.workers, mp_context=_SPAWN, initializer=_start_worker,
                                 initargs=(os.getpid(), build.threads, build.workers)) as pool:
            yield pool.submit, build.workers, None
        return
    from ..cluster import dask_client

    with dask_client(build.scheduler) as client:
        seen = client.run(os.path.isdir, str(build.work))
        blind = sorted(worker for worker, ok in seen.items() if not ok)
        if blind:
            raise TigragError(f"{build.work}: not visible to Dask worker(s) {', '.join(blind)}; "
                              "a --scheduler build needs its output on a filesystem the workers share")
        slots = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
        from ..dask_run import workers_per_host

        shares = {"threads": build.threads, "per_host": workers_per_host(client)}
        yield (lambda fn, *args: client.submit(fn, *args, pure=False)), max(slots, 1), shares


def build_index_streaming(
    paths: Sequence[str | Path], output: str | Path, config: IndexConfig = IndexConfig(),
    memory_budget_mb: int = 2048, workers: int = 1, resume: bool = False, partition_size: int | None = None,
    encoder: Encoder | None = None, entity_extractor: EntityExtractor | None = None,
    show_progress: bool = False, scheduler: str | None = None, backend: str = "numpy",
    drop_duplicates: bool = False, methods: Sequence[str] = ("tigrag",), embed_on: str = "auto",
    threads: int | None = None,
) -> Index:
    """Build the index of `paths` partition by partition into `output` (see the module doc).

    `workers` local processes tokenise partitions, or the workers of the Dask scheduler at
    `scheduler`, sharing `threads` (None: their host's cores); the partitions already tokenised are
    embedded meanwhile, here or on the workers as `embed_on` says (`stream_embed.py`). Pairs are
    counted in the workers too, or here on the
    device when `backend` is a GPU. `resume=True` continues a build that was interrupted.
    `drop_duplicates=True` keeps only the first of passages with the same title and text.
    `methods` naming "spectrag" builds SpectRAG's chunk graph over the assembled index before it is saved.
    """
    from ..methods.registry import check_methods

    methods = check_methods(methods)
    build = StreamBuild(expand_paths(paths), Path(output).resolve(), config, max(workers, 1),
                        partition_size or partition_passages(memory_budget_mb, workers), scheduler,
                        get_backend(backend).name, drop_duplicates,
                        resolve_embed_on(embed_on, max(workers, 1), scheduler, encoder is not None), threads)
    log.info("chunk vectors computed %s", "on the workers" if build.embed_on == "workers" else "in this process")
    with writer_lock(build.output, INDEX_WRITE):
        return _build(build, resume, partition_size is not None, encoder, entity_extractor, show_progress, methods)


def _build(build: StreamBuild, resume: bool, explicit_size: bool, encoder: Encoder | None,
           entity_extractor: EntityExtractor | None, show_progress: bool,
           methods: Sequence[str] = ("tigrag",)) -> Index:
    """The stages of `build_index_streaming`, run while the output's writer lock is held."""
    from .store import save_index

    config = build.config
    _open_work(build, resume, explicit_size)
    timings: dict[str, float] = {}
    if build.embed_on == "here":
        encoder = encoder or load_encoder(config.encoder, first_kind=PASSAGE)
    embedding: dict[int, Any] = {}  # partition -> the future of its embedding on a worker

    def embed(p: int) -> None:
        target = build.part(p, EMBED)
        if target.is_file() or p in embedding:
            return
        if build.embed_on == "workers":
            embedding[p] = submit(embed_partition, str(build.part(p, TOKENS)), config_to_dict(config.encoder),
                                  str(target), shares)
            return
        with timed(timings, "embed"):
            build.ledger.record(target, save_npy(target, encoder.encode(build.texts(p))))

    entities = PartitionEntities(build, entity_extractor)  # NER beside the encoder, partition by partition

    def tokenised(p: int) -> None:
        entities.submit(p)
        embed(p)

    try:
        with partition_executor(build) as (submit, slots, shares):
            if encoder is None:  # the workers embed: this process records their encoder, loaded only if a stage needs it
                name, fingerprint, runtime, dim = submit(encoder_identity, config_to_dict(config.encoder),
                                                         shares).result()
                encoder = LazyEncoder(config.encoder, (name, fingerprint, runtime), dim)
            with timed(timings, "split_tokenise"):
                n_parts = _stage_tokenise(build, submit, slots, show_progress, on_tokenised=tokenised)
            timings["split_tokenise"] -= timings.get("embed", 0.0)  # the embedding overlapped with it is its own stage
            log.info("%d partition(s) of up to %s passages tokenised", n_parts, f"{build.size:,}")
            with timed(timings, "graph"):
                vocab_path = build.vocab_file()
                if not vocab_path.is_file():
                    tokens: set[str] = set()
                    for p in range(n_parts):
                        with np.load(build.part(p, TOKENS), allow_pickle=False) as part:
                            tokens.update(part["vocab"].tolist())
                    build.ledger.record(vocab_path, save_npy(vocab_path, np.array(sorted(tokens), dtype=str)))
                _stage_count(build, n_parts, submit)
            for p in range(n_parts):  # partitions tokenised before an interruption
                embed(p)
            _collect_embeddings(build, embedding, timings)
        with timed(timings, "graph"):  # the merge runs after the worker processes are gone
            vocab = Vocabulary(np.load(vocab_path, allow_pickle=False).tolist())
            token_graph, stats = _merge_counts(build, n_parts, len(vocab))

        for p in range(n_parts):  # partitions tokenised before an interruption
            entities.submit(p)
            embed(p)
        entities.finish(timings)
    except BaseException:  # no recognition may go on writing into the work folder once the lock is given up
        entities.abandon()
        raise

    with timed(timings, "assemble_bm25"):
        index = _assemble(build, n_parts, vocab, token_graph, stats, encoder)
    index.timings = timings
    index.ann = ann_for(index)  # the ANN of the chunk vectors, when `config.ann` asks for one at this size
    from .build import build_stages

    build_stages(index, methods, get_backend(build.backend), encoder, show_progress)
    save_index(index, build.output)
    _remove_work(build.work)
    return index


#: what a streaming build writes in its work folder: checkpoints, the vocabulary, its ledger and
#: description, and the temporaries of their atomic writes
_WORK_FILE = re.compile(r"\.?(part-\d{5,}-[0-9a-f-]+\.(tokens\.npz|counts\.npz|embed\.npy|entities\.json)"
                        r"|vocab-[0-9a-f]+\.npy|checksums\.jsonl|build\.json)(\.tmp[-.][^/]*)?")


def _remove_work(work: Path) -> None:
    """Remove the files the build wrote in its work folder, then the folder if nothing else is left
    (a file someone else put there is kept, and the folder with it)."""
    if work.is_symlink() or not work.is_dir():
        return
    for entry in work.iterdir():
        if _WORK_FILE.fullmatch(entry.name) and not entry.is_dir():
            entry.unlink(missing_ok=True)
        elif _WORK_FILE.fullmatch(entry.name) and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
    try:
        work.rmdir()
    except OSError:
        log.warning("%s: kept, as it holds files the build did not write", work)


#: what every streaming build's description (`build.json`) holds, in this version and earlier ones
_BUILD_KEYS = {"config": dict, "inputs": list}


def _saved_build(work: Path) -> dict[str, Any]:
    """The description in the non-empty work folder `work`, when it is a streaming build's (its files are
    then the build's to use, replace and remove); TigragError naming the folder otherwise, before any change:
    files there are trusted by their content, not by their names alone."""
    file = work / BUILD
    why = "no build.json"
    if file.is_symlink() or (file.exists() and not file.is_file()):
        why = "build.json: not a regular file"
    elif file.is_file():
        try:
            saved = json.loads(file.read_bytes())
        except (OSError, ValueError) as exc:
            why = f"build.json: damaged ({exc})"
        else:
            if isinstance(saved, dict) and all(isinstance(saved.get(k), t) for k, t in _BUILD_KEYS.items()):
                return saved
            why = "build.json: damaged, or not a streaming build's description"
    raise TigragError(f"{work}: not the work folder of a streaming build ({why}), so nothing there was used, "
                      f"changed or removed: delete {work} to start over if it is one, or choose another output")


def _open_work(build: StreamBuild, resume: bool, explicit_size: bool) -> None:
    """Create the work directory, or check that the one there belongs to this build, adopt its
    partition size (a resumed build may run with another worker count or budget) and delete the
    checkpoints that fail their checksum (they are recomputed)."""
    work, fingerprint = build.work, build.fingerprint()
    if work.is_symlink():  # checkpoints would be written (and removed) where it points
        raise TigragError(f"{work}: a symbolic link (to {os.readlink(work)}); the work folder of a streaming build "
                          "must be a folder of its own: remove the link")
    if work.exists() and not work.is_dir():
        raise TigragError(f"{work}: exists and is not a folder; a streaming build keeps its checkpoints there, so "
                          "nothing was changed: move it away or choose another output")
    foreign = sorted(f.name for f in work.iterdir() if not _WORK_FILE.fullmatch(f.name)) if work.exists() else []
    if foreign:
        raise TigragError(f"{work}: holds files a streaming build did not write ({', '.join(foreign[:3])}"
                          f"{' …' if len(foreign) > 3 else ''}); it keeps its checkpoints there, so nothing was "
                          "changed: move them away or choose another output")
    saved = _saved_build(work) if work.exists() and any(work.iterdir()) else None
    if saved is None or not any(f.name not in (BUILD, LEDGER) for f in work.iterdir()):  # nothing done yet
        work.mkdir(parents=True, exist_ok=True)
        (work / LEDGER).unlink(missing_ok=True)
        atomic_write_json(work / BUILD, {**fingerprint, "partition_passages": build.size}, indent=1)
        return
    if not resume:
        raise TigragError(f"{work}: an unfinished build is there; pass --resume to continue it or delete it")
    size = saved.pop("partition_passages", None)
    if saved != fingerprint:
        raise TigragError(f"{work}: was started with other inputs or settings; delete it to start over")
    if explicit_size and size != build.size:
        raise TigragError(f"{work}: was started with partitions of {size} passages, not {build.size}")
    build.size = size
    build.ledger.validate()


class PartitionEntities:
    """Named entities of the partitions, recognised in one daemon thread beside the encoder (as
    `assemble.EntityThread` does for an in-memory build; in line at `finish` where OVERLAP_NER is off),
    each partition's lists written as its checkpoint. `finish(timings)` waits for every submitted
    partition and re-raises the thread's first error."""

    def __init__(self, build: StreamBuild, extractor: EntityExtractor | None):
        self.build, self.extractor = build, extractor
        self.queue: queue.Queue[int | None] = queue.Queue()
        self.submitted: set[int] = set()
        self.error: BaseException | None = None
        self.seconds = 0.0
        self.stopped = False
        self.model_loaded = False
        self.thread: threading.Thread | None = None
        if assemble.OVERLAP_NER:
            self.thread = threading.Thread(target=self._run, name="tigrag-ner", daemon=True)
            self.thread.start()

    def submit(self, p: int) -> None:
        if p not in self.submitted:
            if self.thread is not None and not self.model_loaded and not self.build.part(p, ENTITIES).is_file():
                assemble.load_entity_model(self.build.config, self.extractor)  # imports stay in this thread
                self.model_loaded = True
            self.submitted.add(p)
            self.queue.put(p)

    def _run(self) -> None:
        while (p := self.queue.get()) is not None:
            if self.error is None and not self.stopped:
                try:
                    self._recognise(p)
                except BaseException as exc:  # handed to `finish`
                    self.error = exc

    def _recognise(self, p: int) -> None:
        target = self.build.part(p, ENTITIES)
        if target.is_file():
            return
        start = time.perf_counter()
        atomic_write_json(target, chunk_entities(self.build.texts(p), self.build.config, self.extractor))
        self.build.ledger.record(target)
        self.seconds += time.perf_counter() - start

    def finish(self, timings: dict[str, float]) -> None:
        start = time.perf_counter()
        self.queue.put(None)
        if self.thread is None:
            self._run()
        else:
            self.thread.join()
        assemble.record_ner(timings, self.seconds, time.perf_counter() - start)
        if self.error is not None:
            raise self.error

    def abandon(self) -> None:
        """Stop after the partition being recognised (the build failed): its thread is joined, so nothing
        is written into the work folder after the build has let go of it."""
        self.stopped = True
        self.queue.put(None)
        if self.thread is not None:
            self.thread.join()


def _stage_tokenise(build: StreamBuild, submit: Submit, slots: int, show_progress: bool,
                    on_tokenised: Callable[[int], None]) -> int:
    """Tokenise every partition in the workers; `on_tokenised(p)` runs here as each one lands.
    A partition whose passages changed since an interrupted run gets a new key, so it is redone."""
    chunk, tokens = config_to_dict(build.config.chunk), config_to_dict(build.config.tokens)
    bar = counter(0, "tokenise, embed", show_progress, unit="passage")  # advanced as partitions finish
    n_parts = 0
    in_flight: list[tuple[int, Any, int]] = []
    repeats = RepeatedPassages()

    def finish_oldest() -> None:
        p, future, size = in_flight.pop(0)
        build.ledger.record(build.part(p, TOKENS), future.result())
        on_tokenised(p)
        bar.update(size)

    build.keys = []
    for p, batch in enumerate(_iter_partitions(build.paths, build.size, repeats, build.drop_duplicates)):
        n_parts = p + 1
        build.keys.append(partition_key(batch))
        target = build.part(p, TOKENS)
        if target.is_file():
            continue
        if build.has_earlier(p, TOKENS):
            log.info("partition %d: its passages changed since the interrupted build; recomputing it", p)
        records = [(x.title, x.text, x.doc_id) for x in batch]
        in_flight.append((p, submit(_tokenise_partition, records, chunk, tokens, str(target)), len(batch)))
        while len(in_flight) >= 2 * slots:  # bounded: memory stays within the budget
            finish_oldest()
    while in_flight:
        finish_oldest()
    bar.close()
    if n_parts == 0:
        raise CorpusError(f"{', '.join(map(str, build.paths))}: no non-empty passages found")
    _report_repeats(repeats, build.drop_duplicates)
    return n_parts


def _collect_embeddings(build: StreamBuild, embedding: dict[int, Any], timings: dict[str, float]) -> None:
    """Wait for the partitions embedded on the workers and record their files: `embed` is the workers'
    encoding seconds added up, `embed_wait` how long the build then waited for them."""
    if not embedding:
        return
    start = time.perf_counter()
    for p, future in sorted(embedding.items()):
        digest, seconds = future.result()
        build.ledger.record(build.part(p, EMBED), digest)
        timings["embed"] = timings.get("embed", 0.0) + seconds
    timings["embed_wait"] = time.perf_counter() - start


def _report_repeats(repeats: RepeatedPassages, dropped: bool) -> None:
    if not repeats.repeated:
        return
    if dropped:
        log.warning("dropped %s duplicate passage(s)", f"{repeats.repeated:,}")
        return
    log.warning("%s of %s passages repeat an earlier passage's title and text (a corpus given twice?): each copy "
                "is indexed and competes for the top k; --drop-duplicates keeps one", f"{repeats.repeated:,}",
                f"{len(repeats.seen) + repeats.repeated:,}")


def _stage_count(build: StreamBuild, n_parts: int, submit: Submit) -> None:
    """Count every partition: in the workers on the CPU, here on the device with a GPU backend."""
    todo = [p for p in range(n_parts) if not build.part(p, COUNTS).is_file()]
    args = [(str(build.part(p, TOKENS)), str(build.vocab_file()), build.config.graph.window,
             str(build.part(p, COUNTS))) for p in todo]
    if build.backend != "numpy":
        for arguments in args:
            build.ledger.record(Path(arguments[3]), _count_partition(*arguments, backend=build.backend))
        return
    futures = [submit(_count_partition, *arguments) for arguments in args]
    for arguments, future in zip(args, futures):
        build.ledger.record(Path(arguments[3]), future.result())


def _merge_counts(build: StreamBuild, n_parts: int, n_vocab: int) -> tuple[scipy.sparse.csr_matrix, CorpusStatistics]:
    """Sum the partitions' pair counts bucket by bucket of the key range; add their statistics."""
    stats = CorpusStatistics(0, 0, np.zeros(n_vocab, dtype=np.int64))
    total_keys = 0
    for p in range(n_parts):
        with np.load(build.part(p, COUNTS), allow_pickle=False) as part:
            total_keys += part["keys"].size
            stats = stats + CorpusStatistics(int(part["n_docs"]), int(part["total_length"]), part["doc_freq"])
    buckets = max(MERGE_BUCKETS_MIN, total_keys // 50_000_000 + 1)
    edges = np.linspace(0, n_vocab * n_vocab, buckets + 1).astype(np.int64)
    keys_out, counts_out = [], []
    for b in range(buckets):
        keys, counts = [], []
        for p in range(n_parts):
            with np.load(build.part(p, COUNTS), allow_pickle=False) as part:
                k = part["keys"]
                lo, hi = np.searchsorted(k, [edges[b], edges[b + 1]])
                keys.append(k[lo:hi])
                counts.append(part["counts"][lo:hi])
        merged, inverse = np.unique(np.concatenate(keys), return_inverse=True)
        keys_out.append(merged)
        counts_out.append(np.bincount(inverse, weights=np.concatenate(counts), minlength=merged.size))
    token_graph = symmetric_graph(get_backend("numpy"), np.concatenate(keys_out), np.concatenate(counts_out), n_vocab)
    return token_graph, stats


def _assemble(build: StreamBuild, n_parts: int, vocab: Vocabulary, token_graph: Any, stats: CorpusStatistics,
              encoder: Encoder) -> Index:
    """The whole index from the checkpoints. Large arrays are preallocated and filled partition
    by partition (no list-then-concatenate copies), so the peak stays near the index's own size."""
    be = get_backend("numpy")
    sizes = []
    for p in range(n_parts):
        with np.load(build.part(p, TOKENS), allow_pickle=False) as part:
            sizes.append((len(part["texts"]), int(part["indptr"][-1])))
    n_chunks, n_tokens = sum(c for c, _ in sizes), sum(t for _, t in sizes)
    embeddings = np.empty((n_chunks, encoder.dim), dtype=np.float32)
    token_indptr = np.zeros(n_chunks + 1, dtype=np.int64)
    token_ids = np.empty(n_tokens, dtype=np.int32)
    chunk_passage = np.empty(n_chunks, dtype=np.int32)
    bm25_indptr = np.zeros(n_chunks + 1, dtype=np.int64)
    bm25_indices, bm25_data = [], []
    titles, doc_ids, texts, names = [], [], [], []
    chunk = token = passage = 0
    for p in range(n_parts):
        part = load_npz(build.part(p, TOKENS))
        ids = np.load(build.part(p, COUNTS), allow_pickle=False)["ids"]
        c, t = sizes[p]
        embeddings[chunk : chunk + c] = np.load(build.part(p, EMBED), allow_pickle=False)
        token_indptr[chunk + 1 : chunk + c + 1] = part["indptr"][1:] + token
        token_ids[token : token + t] = ids
        chunk_passage[chunk : chunk + c] = part["owner"] + passage
        rows = bm25_matrix(be, part["indptr"], ids, len(vocab), build.config.bm25, stats)
        rows.sort_indices()
        bm25_indptr[chunk + 1 : chunk + c + 1] = rows.indptr[1:] + bm25_indptr[chunk]
        bm25_indices.append(rows.indices.astype(np.int32))
        bm25_data.append(rows.data.astype(np.float32))
        titles += part["titles"].tolist()
        doc_ids += part["doc_ids"].tolist()
        texts += part["texts"].tolist()
        names += [[tuple(e) for e in found] for found in json.loads(build.part(p, ENTITIES).read_text())]
        chunk, token, passage = chunk + c, token + t, passage + len(part["titles"])
        del part, rows
    bm25 = scipy.sparse.csr_matrix((np.concatenate(bm25_data), np.concatenate(bm25_indices), bm25_indptr),
                                   shape=(n_chunks, len(vocab)))
    return assemble_index(
        config=build.config, passage_titles=titles, passage_ids=doc_ids, chunk_texts=texts,
        chunk_passage=chunk_passage, vocab=vocab, token_indptr=token_indptr, token_ids=token_ids, graph=token_graph,
        bm25=bm25, embeddings=embeddings, entity_lists=names, encoder=encoder, timings={},
    )
