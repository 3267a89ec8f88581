"""Stage 5 of a streamed build (`stream.py`) on the workers: each worker process embeds the partitions
it is given with the index's encoder, loaded once per process, on its share of its host's cores.

Where the chunk vectors are computed is `embed_on` of `build_index_streaming`:

* ``"here"``: the build process embeds each partition as it is tokenised, its encoder beside the
  workers' text work (the behaviour of a one-worker build);
* ``"workers"``: the tokenise workers embed too, one task per partition, so N workers run N encoders
  (on N GPUs: one Dask worker per GPU, as dask-cuda's LocalCUDACluster starts them, each encoder on its
  worker's device); the build process meanwhile recognises entities, and records the workers' encoder
  (`encoder_identity`) without loading a model itself;
* ``"auto"``: ``"workers"`` on a Dask scheduler, and for local workers where bench/results/stream_embed.md
  measured it faster (`AUTO_LOCAL_WORKERS`); ``"here"`` otherwise, and always for an encoder object the
  caller passed in (a worker cannot load it).

The vectors are the encoder's for the same texts in the same batches, so both places give the same
index (tested with the deterministic stand-in; bench/stream_embed.py compares the real encoder's).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..errors import TigragError

#: the values of `embed_on`
EMBED_ON = ("auto", "here", "workers")
#: `embed_on="auto"` with local worker processes: embed on them (True) or in the build process (False).
#: bench/results/stream_embed.md (2 cores, one run): 2 workers embedding gave 1.13x the chunks/s of 2 workers
#: with the vectors here, at 1.66x the peak memory; kept False until a repeated measurement decides
AUTO_LOCAL_WORKERS = False


def resolve_embed_on(embed_on: str, workers: int, scheduler: str | None, encoder_given: bool) -> str:
    """"here" or "workers" for a build with `workers` local processes or a Dask `scheduler` (module doc)."""
    if embed_on not in EMBED_ON:
        raise TigragError(f"embed_on must be one of {', '.join(EMBED_ON)}, got {embed_on!r}")
    if encoder_given:
        if embed_on == "workers":
            raise TigragError("embed_on='workers' loads the index's encoder in each worker; it cannot be used with "
                              "an encoder object passed in (pass none, or embed_on='here')")
        return "here"
    if embed_on != "auto":
        return embed_on
    if scheduler is not None:
        return "workers"
    return "workers" if AUTO_LOCAL_WORKERS and workers > 1 else "here"


def _worker_encoder(encoder_config: dict[str, Any], dask_threads: dict[str, Any] | None) -> Any:
    """The index's encoder in this worker process (loaded once), after its share of the host's cores.
    `dask_threads`: on a Dask worker, that share (`dask_run._worker_threads`); local workers applied
    theirs at start."""
    from ..config import EncoderConfig, config_from_dict
    from ..encoders import PASSAGE, load_encoder

    if dask_threads is not None:
        from ..dask_run import _worker_threads

        _worker_threads(dask_threads)
    return load_encoder(config_from_dict(EncoderConfig, encoder_config), first_kind=PASSAGE)


def encoder_identity(encoder_config: dict[str, Any], dask_threads: dict[str, Any] | None = None
                     ) -> tuple[str, str, str, int]:
    """Task run on a worker: (name, weights fingerprint, runtime, dimension) of the encoder as the workers
    load it, so the build process records it without loading a model it would not use (a `LazyEncoder`)."""
    encoder = _worker_encoder(encoder_config, dask_threads)
    return encoder.name, encoder.fingerprint, encoder.backend, int(encoder.dim)


def embed_partition(tokens_path: str, encoder_config: dict[str, Any], out: str,
                    dask_threads: dict[str, Any] | None = None) -> tuple[str, float]:
    """Task run on a worker: embed the chunk texts of one partition's tokens checkpoint into `out` (atomic);
    returns (the file's sha256, seconds spent encoding)."""
    from .checkpoints import load_npz, save_npy

    encoder = _worker_encoder(encoder_config, dask_threads)
    texts = load_npz(Path(tokens_path))["texts"].tolist()
    start = time.perf_counter()
    vectors = encoder.encode(texts)
    seconds = time.perf_counter() - start
    return save_npy(Path(out), vectors), seconds
