"""``skewed``: every 50th record takes 50 ms, the others 0.2 ms; batch 16, 16 workers.

One batch in about three holds a slow record and takes ~53 ms instead of ~3 ms. A
loader that yields batches in order stalls behind each slow batch while the batches
after it are done and wait (head-of-line blocking); with ``ordered=False`` stoker
yields batches as they finish. Rows: ``stoker unordered x16`` (``ordered=False``),
``stoker ordered x16`` (the same loader in order, to show what ordering costs) and
``torch x16`` (in order, as torch always is); stoker's rows use ``worker_mode="auto"``,
which picks threads for the marked record function.

The cost is a sleep, not a busy wait: a slow record here stands for a slow read (a
cache miss, a remote fetch), which waits without using a core. A busy wait would
make 16 workers on a 2-core machine share two cores, so the result would measure
the operating system's time slicing instead of the loader's scheduling, and would
change with the core count. The unordered order of batches is not fixed, so
verification compares the batches as a multiset (each batch's records are still
fixed).
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

RECORDS = 4000
QUICK_RECORDS = 2000
BATCH_SIZE = 16
WORKERS = 16
SLOW_EVERY = 50
SLOW_S = 0.050
FAST_S = 0.0002
RECORD_LEN = 4
RECORD_BYTES = RECORD_LEN * 8
# The mean wait per record, and so the most samples/s WORKERS can deliver.
MEAN_S = (SLOW_S + (SLOW_EVERY - 1) * FAST_S) / SLOW_EVERY
LIMIT = WORKERS / MEAN_S


def record(index: int) -> np.ndarray:
    """Record ``index`` without the wait: ``4 * index + arange(4)``, int64."""
    return int_record(index, RECORD_LEN)


def is_slow(index: int) -> bool:
    """True for every 50th record (49, 99, ...)."""
    return int(index) % SLOW_EVERY == SLOW_EVERY - 1


@sk.releases_gil
def fetch(index: int) -> np.ndarray:
    """Record ``index`` after sleeping 50 ms (every 50th record) or 0.2 ms (the others)."""
    time.sleep(SLOW_S if is_slow(index) else FAST_S)
    return record(index)


def expected_batches(n: int) -> Iterator[np.ndarray]:
    """The batches of records ``0 .. n - 1`` in order."""
    return int_record_batches(n, BATCH_SIZE, RECORD_LEN)


@workload(
    "skewed",
    "4,000 records (2,000 with --quick): every 50th takes 50 ms, others 0.2 ms, "
    "batch 16, 16 workers",
)
def prepare(ctx: BenchContext) -> Prepared:
    """A range mapped through :func:`fetch`; torch's dataset calls the same function."""
    n = max(1, int((QUICK_RECORDS if ctx.quick else RECORDS) * ctx.scale))
    runners: list[Runner] = []
    unordered = f"stoker unordered x{WORKERS}"
    if ctx.wants("stoker"):
        dataset = sk.range(n).map(fetch)

        def stoker_loader(ordered: bool) -> Any:
            def make() -> Any:
                return sk.DataLoader(
                    dataset, batch_size=BATCH_SIZE, num_workers=WORKERS, ordered=ordered
                )

            return make

        runners += [
            Runner(
                unordered,
                "stoker",
                stoker_loader(False),
                ordered=False,
                limit=LIMIT,
                show_mode=True,
            ),
            Runner(f"stoker ordered x{WORKERS}", "stoker", stoker_loader(True), limit=LIMIT),
        ]
    if ctx.wants("torch"):
        torch, records = ctx.torch, IndexFn(n, fetch)

        def torch_loader() -> Any:
            return QuietTorchLoader(torch, records, batch_size=BATCH_SIZE, num_workers=WORKERS)

        runners.append(Runner(f"torch x{WORKERS}", "torch", torch_loader, limit=LIMIT))
    return Prepared(
        summary=f"{n:,} records: every 50th takes 50 ms, others 0.2 ms, batch 16, 16 workers",
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=lambda: expected_batches(n),
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "num_workers": WORKERS,
            "slow_every": SLOW_EVERY,
            "slow_s": SLOW_S,
            "fast_s": FAST_S,
            "cost": "time.sleep",
            "record": "int64 (4,)",
        },
        warm_epoch=True,
        targets=(Target(unordered, "speed", 2.0),),
    )
