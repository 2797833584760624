"""``ints``: 1,000,000 Python ints in a list, read in order, batch 256.

The records cost nothing to produce, so this row shows what a loader itself costs
per record and per batch. ``stoker (sk.range)`` reads the same numbers from
``sk.range``, which builds a batch with one vectorised NumPy call.
``stoker 2 threads`` hands every batch to one of two worker threads, and
``stoker auto, 2 workers`` (``num_workers=2``, ``worker_mode="auto"``) measures that
the hand-off costs more than the work and builds the batches inline.
"""

from __future__ import annotations

from typing import Any

import stoker as sk

from ..base import BenchContext, Prepared, Runner, scaled
from . import workload
from ._common import BATCH_SIZE, sequence_batches

RECORDS = 1_000_000


@workload("ints", "1,000,000 Python ints from a list, in order, batch 256")
def prepare(ctx: BenchContext) -> Prepared:
    """A list of ints; stoker reads it with ``from_sequence`` and ``range``, torch directly."""
    n = scaled(ctx, RECORDS)
    data = list(range(n))
    runners: list[Runner] = []
    if ctx.wants("stoker"):

        def from_list() -> Any:
            return sk.DataLoader(sk.from_sequence(data), batch_size=BATCH_SIZE)

        def from_range() -> Any:
            return sk.DataLoader(sk.range(0, n), batch_size=BATCH_SIZE)

        def with_workers(mode: Any) -> Any:
            def make() -> Any:
                return sk.DataLoader(
                    sk.from_sequence(data), batch_size=BATCH_SIZE, num_workers=2, worker_mode=mode
                )

            return make

        runners += [
            Runner("stoker", "stoker", from_list),
            Runner("stoker (sk.range)", "stoker", from_range),
            Runner("stoker 2 threads", "stoker", with_workers("thread")),
            Runner("stoker auto, 2 workers", "stoker", with_workers("auto")),
        ]
    if ctx.wants("torch"):
        torch = ctx.torch

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(data, batch_size=BATCH_SIZE, num_workers=0)

        runners.append(Runner("torch", "torch", torch_loader))
    return Prepared(
        summary=f"{n:,} Python ints from a list, in order, batch 256",
        samples=n,
        record_bytes=8,
        runners=tuple(runners),
        reference=lambda: sequence_batches(data, BATCH_SIZE),
        params={"records": n, "batch_size": BATCH_SIZE, "record": "Python int -> int64"},
    )
