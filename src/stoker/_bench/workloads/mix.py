"""``mix``: three sources mixed by ``sk.mix``, fixed weights against a change every 100 batches.

Three in-memory sources of 16 int64 columns (600k, 400k and 200k records) are mixed
with ``on_exhausted="restart"`` into epochs of 1,000,000 records, batch 256, read on
the calling thread (``prefetch=0``: nothing hides the mixture's cost). Rows:

* ``stoker fixed``: weights 0.5 / 0.3 / 0.2 for the whole epoch;
* ``stoker changing``: the same loader, with ``set_weights`` called after every 100th
  batch, cycling through three weight vectors (each change is written into the
  loader's state).

Both rows read the same records per batch, so their ratio is the cost of changing
weights (the task asks for less than 5 %). Each row is verified against batches
built straight from the mixture's order (its sampler) and a NumPy gather.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, scaled
from . import workload
from ._common import BATCH_SIZE

SIZES = (600_000, 400_000, 200_000)
RECORDS = 1_000_000
COLUMNS = 16
EVERY = 100
START = [0.5, 0.3, 0.2]
CYCLE = ([0.2, 0.3, 0.5], [0.34, 0.33, 0.33], [0.5, 0.3, 0.2])


def _arrays(ctx: BenchContext) -> list[np.ndarray]:
    """Source ``k``'s record ``j`` is ``10**7 * k + 16 * j + arange(16)``."""
    return [
        (10**7 * k + np.arange(scaled(ctx, n) * COLUMNS, dtype=np.int64)).reshape(-1, COLUMNS)
        for k, n in enumerate(SIZES)
    ]


def _mix(arrays: list[np.ndarray], records: int) -> Any:
    parts = [sk.from_arrays(a) for a in arrays]
    return sk.mix(parts, START, on_exhausted="restart", num_samples=records)


class _Changing:
    """Iterates a loader over ``mix`` and calls ``set_weights`` after every 100th batch."""

    def __init__(self, mix: Any, loader: Any) -> None:
        self._mix, self._loader = mix, loader

    def __iter__(self) -> Iterator[Any]:
        it = iter(self._loader)
        for i, batch in enumerate(it, 1):
            yield batch
            if i % EVERY == 0:
                self._mix.set_weights(CYCLE[(i // EVERY - 1) % len(CYCLE)])


def _reference(arrays: list[np.ndarray], records: int, changing: bool) -> Callable[[], Any]:
    """The batches straight from the mixture's sampler and a NumPy gather."""

    def batches() -> Iterator[np.ndarray]:
        whole = np.concatenate(arrays)
        mix = _mix(arrays, records)
        cursor = mix.sampler(shuffle=False, seed=0).cursor(0)
        i = 0
        while True:
            idx = cursor.take(BATCH_SIZE)
            if idx.size == 0:
                return
            yield whole[idx]
            i += 1
            if changing and i % EVERY == 0:
                mix.set_weights(CYCLE[(i // EVERY - 1) % len(CYCLE)])

    return batches


@workload(
    "mix",
    "3 sources mixed, fixed weights vs set_weights every 100 batches, batch 256",
    default=False,
)
def prepare(ctx: BenchContext) -> Prepared:
    """Two stoker rows over the same three arrays (see the module doc)."""
    arrays = _arrays(ctx)
    records = scaled(ctx, RECORDS)
    runners: list[Runner] = []
    if ctx.wants("stoker"):

        def fixed() -> Any:
            return sk.DataLoader(_mix(arrays, records), batch_size=BATCH_SIZE, prefetch=0)

        def changing() -> Any:
            mix = _mix(arrays, records)
            return _Changing(mix, sk.DataLoader(mix, batch_size=BATCH_SIZE, prefetch=0))

        runners.append(Runner("stoker fixed", "stoker", fixed))
        runners.append(
            Runner(
                "stoker changing",
                "stoker",
                changing,
                reference=_reference(arrays, records, changing=True),
            )
        )
    return Prepared(
        samples=records,
        record_bytes=COLUMNS * 8,
        runners=tuple(runners),
        reference=_reference(arrays, records, changing=False),
        params={
            "records": records,
            "sources": [len(a) for a in arrays],
            "batch_size": BATCH_SIZE,
            "change_every": EVERY,
            "prefetch": 0,
        },
    )
