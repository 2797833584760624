"""``memmap_workers``: the ``memmap`` workload's 1 GB file, read by 2 process workers each.

The same records file as ``memmap`` (written once into the cache folder, ~256 MB
with ``--quick``), read in stoker's epoch-0 shuffled order, batch 256. ``stoker
process x2`` is ``sk.from_arrays(mm)`` with ``num_workers=2, worker_mode="process"``;
``torch x2`` is a dataset returning ``mm[i]`` with ``num_workers=2``, whose workers
stack each batch and hand it over in shared memory. What differs is how a batch is
gathered (one vectorised gather against a copy per record plus a stack) and how it
reaches the main process.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, Target, gigabytes
from . import workload
from ._common import BATCH_SIZE, OrderSampler, index_batches
from .memmap import (
    EXACT_BATCHES,
    FULL_BYTES,
    QUICK_BYTES,
    RECORD_BYTES,
    SEED,
    MemmapRecords,
    open_records,
    records_file,
)

WORKERS = 2


@workload(
    "memmap_workers",
    "the 1 GB memmap (0.26 GB with --quick), shuffled, batch 256: stoker and torch with "
    "2 process workers each",
)
def prepare(ctx: BenchContext) -> Prepared:
    """Reuse (or write) the ``memmap`` records file; every loader reads stoker's epoch-0 order."""
    target = QUICK_BYTES if ctx.quick else FULL_BYTES
    n = max(1, int(target * ctx.scale) // RECORD_BYTES)
    path = records_file(ctx.cache_dir, n, ctx.log)
    mm = open_records(path, n, "r")
    order = sk.RandomSampler(n, seed=SEED).cursor(epoch=0).take(n)
    batches = index_batches(order, BATCH_SIZE)
    runners: list[Runner] = []
    label = f"stoker process x{WORKERS}"
    if ctx.wants("stoker"):

        def stoker_loader() -> Any:
            return sk.DataLoader(
                sk.from_arrays(mm),
                batch_size=BATCH_SIZE,
                shuffle=True,
                seed=SEED,
                num_workers=WORKERS,
                worker_mode="process",
            )

        runners.append(Runner(label, "stoker", stoker_loader))
    if ctx.wants("torch"):
        torch, records, sampler = ctx.torch, MemmapRecords(path, n), OrderSampler(order)

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(
                records, batch_size=BATCH_SIZE, sampler=sampler, num_workers=WORKERS
            )

        runners.append(Runner(f"torch x{WORKERS}", "torch", torch_loader))
    return Prepared(
        summary=(
            f"the {gigabytes(n * RECORD_BYTES)} memmap ({n:,} records), shuffled, batch "
            f"{BATCH_SIZE}: stoker and torch with {WORKERS} process workers each"
        ),
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=lambda: (np.asarray(mm[idx]) for idx in batches),
        exact_batches=EXACT_BATCHES,
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "num_workers": WORKERS,
            "record": "float32 (3, 64, 64)",
            "file": str(path),
            "file_bytes": n * RECORD_BYTES,
            "seed": SEED,
        },
        warm_epoch=True,
        targets=(Target(label, "speed", 3.0),),
    )
