"""``io_latency``: every record waits 2 ms on simulated I/O, then is a small array; batch 32.

Nothing here needs the CPU: ``time.sleep(0.002)`` stands for a read from a remote
store, and it releases the GIL, so the record function is marked with
:func:`stoker.releases_gil`. A loader can only go faster by keeping more records
waiting at once, so every row has a limit of ``workers / 2 ms`` samples/s (8,000 for
16 workers, 32,000 for 64) and the report says what fraction of it each reached.

Rows: ``stoker x16`` (``worker_mode="auto"``, which picks threads for a marked
function), ``stoker thread x64``, ``stoker all auto`` (``num_workers="auto",
prefetch="auto"``: threads sized while loading) and ``torch x16`` (16 worker processes). The
records are read in order; record ``i`` is ``8 * i + arange(8)`` as int64.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target
from . import workload
from ._common import IndexFn, QuietTorchLoader, int_record, int_record_batches

RECORDS = 8192
QUICK_RECORDS = 4096
BATCH_SIZE = 32
LATENCY_S = 0.002
RECORD_LEN = 8
RECORD_BYTES = RECORD_LEN * 8
WORKERS = 16
MANY_WORKERS = 64


def record(index: int) -> np.ndarray:
    """Record ``index`` without the wait: ``8 * index + arange(8)``, int64."""
    return int_record(index, RECORD_LEN)


@sk.releases_gil
def fetch(index: int) -> np.ndarray:
    """Record ``index`` after a 2 ms sleep (simulated I/O; the GIL is released meanwhile)."""
    time.sleep(LATENCY_S)
    return record(index)


def limit(workers: int) -> float:
    """The most samples/s ``workers`` can deliver when each record waits ``LATENCY_S``."""
    return workers / LATENCY_S


def expected_batches(n: int) -> Iterator[np.ndarray]:
    """The batches of records ``0 .. n - 1`` in order."""
    return int_record_batches(n, BATCH_SIZE, RECORD_LEN)


@workload(
    "io_latency",
    "8,192 records (4,096 with --quick) with 2 ms of simulated I/O each, batch 32: "
    "16 and 64 workers",
)
def prepare(ctx: BenchContext) -> Prepared:
    """A range mapped through :func:`fetch`; torch's dataset calls the same function."""
    n = max(1, int((QUICK_RECORDS if ctx.quick else RECORDS) * ctx.scale))
    runners: list[Runner] = []
    auto, many = f"stoker x{WORKERS}", f"stoker thread x{MANY_WORKERS}"
    if ctx.wants("stoker"):
        dataset = sk.range(n).map(fetch)

        def stoker_auto() -> Any:
            return sk.DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=WORKERS)

        def stoker_threads() -> Any:
            return sk.DataLoader(
                dataset, batch_size=BATCH_SIZE, num_workers=MANY_WORKERS, worker_mode="thread"
            )

        def stoker_all_auto() -> Any:
            return sk.DataLoader(
                dataset, batch_size=BATCH_SIZE, num_workers="auto", prefetch="auto"
            )

        runners += [
            Runner(auto, "stoker", stoker_auto, limit=limit(WORKERS), show_mode=True),
            Runner(many, "stoker", stoker_threads, limit=limit(MANY_WORKERS)),
            Runner("stoker all auto", "stoker", stoker_all_auto, show_mode=True),
        ]
    if ctx.wants("torch"):
        torch, records = ctx.torch, IndexFn(n, fetch)

        def torch_loader() -> Any:
            return QuietTorchLoader(torch, records, batch_size=BATCH_SIZE, num_workers=WORKERS)

        runners.append(Runner(f"torch x{WORKERS}", "torch", torch_loader, limit=limit(WORKERS)))
    return Prepared(
        summary=f"{n:,} records with 2 ms of simulated I/O each, batch 32: 16 and 64 workers",
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=lambda: expected_batches(n),
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "latency_s": LATENCY_S,
            "num_workers": [WORKERS, MANY_WORKERS],
            "record": "int64 (8,) after time.sleep(0.002)",
        },
        warm_epoch=True,
        targets=(Target(auto, "speed", 1.5), Target(many, "of_limit", 0.85)),
    )
