"""``remote_throttled``: the ``remote`` workload with a store that answers 2 % of requests 429.

The same 2,000 files of 4 KB (1,000 with ``--quick``) and the same server (5 ms per
request, HTTP/1.1, a separate process) as ``remote``, served twice in one run: once
clean, once answering 2 % of the requests with HTTP 429 "Too Many Requests" (after
its 5 ms), chosen by a hash of (path, try) so that every run throttles the same
requests. ``sk.from_files(urls, concurrency=4)`` reads both with the default
:class:`~stoker.RetryPolicy` (back-off from 0.1 s, full jitter), batch 32, two thread
workers. Both rows' limit is 4 / 5 ms = 800 files/s; the target is 70 % of it under
throttling, every file delivered once, in order (the harness checks the batches).
The retries each epoch made are logged and kept in the JSON report.

Needs fsspec and aiohttp (``pip install 'stoker[remote]'``); run it by name.
"""

from __future__ import annotations

from typing import Any

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from . import workload
from .remote import (
    BATCH_SIZE,
    CONCURRENCY,
    FILE_BYTES,
    FILES,
    LATENCY_S,
    QUICK_FILES,
    Server,
    _files,
    _first_bytes,
    reference_batches,
)

THROTTLE = 0.02


class CountedHeads:
    """Each batch as the first 8 bytes of every file; logs each epoch's remote counts."""

    def __init__(self, loader: Any, label: str, ctx: BenchContext, counts: list[Any]) -> None:
        self._loader, self._label, self._ctx, self._counts = loader, label, ctx, counts

    def __iter__(self) -> Any:
        import numpy as np

        it = iter(self._loader)
        for batch in it:
            yield np.stack([_first_bytes(b) for b in batch["bytes"]])
        stats = it.stats()
        self._counts.append([stats.remote_requests, stats.remote_retries])
        self._ctx.log(
            f"remote_throttled: {self._label}: {stats.remote_requests} requests, "
            f"{stats.remote_retries} retried, {stats.remote_backoff_seconds:.2f} s backed off"
        )


@workload(
    "remote_throttled",
    "the remote workload (5 ms a request, 4 in flight) clean and with 2 % of requests "
    "answered 429, same run",
    default=False,
    requires=(("fsspec", "remote"), ("aiohttp", "remote")),
)
def prepare(ctx: BenchContext) -> Prepared:
    """Start a clean and a throttling server over the same files."""
    n = max(1, int((QUICK_FILES if ctx.quick else FILES) * ctx.scale))
    folder = _files(ctx.cache_dir, n)
    counts: dict[str, list[Any]] = {"clean": [], "throttled": []}
    runners: list[Runner] = []
    for key, throttle in (("clean", 0.0), ("throttled", THROTTLE)):
        server = Server(folder, throttle)
        urls = [f"{server.url}/{i:06d}.bin" for i in range(n)]
        dataset = sk.from_files(urls, concurrency=CONCURRENCY)
        label = f"stoker c={CONCURRENCY} " + ("clean" if not throttle else "2% 429")

        def make(dataset: Any = dataset, label: str = label, key: str = key) -> Any:
            loader = sk.DataLoader(
                dataset, batch_size=BATCH_SIZE, num_workers=2, worker_mode="thread"
            )
            return CountedHeads(loader, label, ctx, counts[key])

        runners.append(Runner(label, "stoker", make, limit=CONCURRENCY / LATENCY_S))

    return Prepared(
        summary=(
            f"{n:,} 4 KB files over HTTP, 5 ms a request, batch 32, 4 reads in flight; "
            "a clean server and one answering 2 % of requests 429"
        ),
        samples=n,
        record_bytes=FILE_BYTES,
        runners=tuple(runners),
        reference=lambda: reference_batches(n),
        params={
            "records": n,
            "latency_s": LATENCY_S,
            "concurrency": CONCURRENCY,
            "throttled_share": THROTTLE,
            "retry": "sk.RetryPolicy() defaults",
            "requests_and_retries_per_epoch": counts,
        },
        targets=(Target(f"stoker c={CONCURRENCY} 2% 429", "of_limit", 0.7),),
    )
