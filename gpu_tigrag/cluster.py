"""The Dask client that query runs (`dask_run.py`) and streamed index builds (`index/stream.py`)
share: a connection to a running Dask scheduler, or a LocalCluster of processes started for the
block.

It imports nothing of the retriever or the index, so a streamed build can use it without
loading the query side; `dask.distributed` itself is imported only when a client is opened.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from .errors import TigragError


@contextmanager
def dask_client(scheduler: str | None = None, workers: int = 2) -> Iterator[Any]:
    """A Dask client on `scheduler` (an address), or on a LocalCluster of `workers` single-threaded
    processes started here and closed on exit."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise TigragError("Dask workers need dask.distributed (pip install 'dask[distributed]')") from None
    if scheduler:
        try:
            client = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as error:
            raise TigragError(f"cannot reach the Dask scheduler at {scheduler}: {error}") from None
        cluster = None
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
