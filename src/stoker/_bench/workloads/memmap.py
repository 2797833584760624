"""``memmap``: a ~1 GB ``np.memmap`` of float32 (3, 64, 64) records, read in shuffled order.

The data is written once into the cache folder (deterministic random numbers) and
reused while its size is right; ``--quick`` uses a separate ~256 MB file. Every
loader reads the same epoch order, stoker's own ``RandomSampler(n, seed=0)`` for
epoch 0, so the batches can be compared. ``bare np.take`` is the floor: a loop of
NumPy gathers into one preallocated buffer, with nothing else around it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

from ..base import BenchContext, Prepared, Runner, gigabytes
from . import workload
from ._common import BATCH_SIZE, OrderSampler

RECORD_SHAPE = (3, 64, 64)
DTYPE = np.dtype(np.float32)
RECORD_BYTES = 3 * 64 * 64 * DTYPE.itemsize
FULL_BYTES = 1_000_000_000
QUICK_BYTES = 256_000_000
SEED = 0
EXACT_BATCHES = 4
_CHUNK_RECORDS = 1024


def records_file(cache_dir: Path, count: int, log: Any) -> Path:
    """The path of a file of ``count`` records, written first when missing or of the wrong size.

    The content depends only on ``count``'s record positions: chunk ``k`` of
    ``_CHUNK_RECORDS`` records comes from ``PCG64([SEED, k])``.
    """
    shape = "x".join(str(d) for d in RECORD_SHAPE)
    path = cache_dir / f"records-float32-{count}x{shape}.bin"
    size = count * RECORD_BYTES
    if path.is_file() and path.stat().st_size == size:
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    log(f"memmap: writing {size / 1e9:.2f} GB of records to {path} (reused by later runs)")
    start = time.perf_counter()
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        mm = np.memmap(tmp, dtype=DTYPE, mode="w+", shape=(count, *RECORD_SHAPE))
        for chunk, first in enumerate(range(0, count, _CHUNK_RECORDS)):
            rng = np.random.Generator(np.random.PCG64([SEED, chunk]))
            rng.random(dtype=np.float32, out=mm[first : first + _CHUNK_RECORDS])
        mm.flush()
        del mm
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    log(f"memmap: wrote it in {time.perf_counter() - start:.1f} s")
    return path


def open_records(path: Path, count: int, mode: str) -> np.ndarray:
    """The records file as an ``np.memmap`` of shape ``(count, 3, 64, 64)``."""
    return np.memmap(path, dtype=DTYPE, mode=mode, shape=(count, *RECORD_SHAPE))  # type: ignore[call-overload, no-any-return]


class MemmapRecords:
    """A map-style dataset for torch: ``__getitem__`` returns one record, a NumPy view.

    It maps the file copy-on-write (``mode="c"``): the pages are the same as a
    read-only map, but the views are writable, so ``torch.as_tensor`` in torch's
    collate does not warn about read-only arrays.
    """

    def __init__(self, path: Path, count: int) -> None:
        self.mm = open_records(path, count, "c")

    def __len__(self) -> int:
        return len(self.mm)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.mm[index]  # type: ignore[no-any-return]


class BareTake:
    """The floor: ``np.take`` of each index batch into one preallocated buffer.

    Every batch it yields is the same buffer, overwritten by the next one.
    """

    def __init__(self, mm: np.ndarray, batches: list[np.ndarray]) -> None:
        self._mm = mm
        self._batches = batches

    def __iter__(self) -> Iterator[np.ndarray]:
        buf = np.empty((BATCH_SIZE, *self._mm.shape[1:]), dtype=self._mm.dtype)
        for idx in self._batches:
            out = buf[: len(idx)]
            np.take(self._mm, idx, axis=0, out=out, mode="clip")
            yield out


@workload(
    "memmap",
    "1 GB np.memmap (0.26 GB with --quick) of float32 (3,64,64) records, shuffled, batch 256",
)
def prepare(ctx: BenchContext) -> Prepared:
    """Write (or reuse) the records file and read it in stoker's epoch-0 shuffled order."""
    target = QUICK_BYTES if ctx.quick else FULL_BYTES
    n = max(1, int(target * ctx.scale) // RECORD_BYTES)
    path = records_file(ctx.cache_dir, n, ctx.log)
    mm = open_records(path, n, "r")
    order = sk.RandomSampler(n, seed=SEED).cursor(epoch=0).take(n)
    batches = [order[i : i + BATCH_SIZE] for i in range(0, n, BATCH_SIZE)]
    runners: list[Runner] = []
    if ctx.wants("stoker"):

        def stoker_loader() -> Any:
            return sk.DataLoader(sk.from_arrays(mm), batch_size=BATCH_SIZE, shuffle=True, seed=SEED)

        runners.append(Runner("stoker", "stoker", stoker_loader))
    if ctx.wants("torch"):
        torch, records, sampler = ctx.torch, MemmapRecords(path, n), OrderSampler(order)

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(
                records, batch_size=BATCH_SIZE, sampler=sampler, num_workers=0
            )

        runners.append(Runner("torch", "torch", torch_loader))
    if ctx.wants("bare"):
        runners.append(Runner("bare np.take", "bare", lambda: BareTake(mm, batches)))
    return Prepared(
        summary=(
            f"{gigabytes(n * RECORD_BYTES)} np.memmap of {n:,} float32 (3,64,64) records, "
            f"shuffled, batch {BATCH_SIZE}"
        ),
        samples=n,
        record_bytes=RECORD_BYTES,
        runners=tuple(runners),
        reference=lambda: (np.asarray(mm[idx]) for idx in batches),
        exact_batches=EXACT_BATCHES,
        params={
            "records": n,
            "batch_size": BATCH_SIZE,
            "record": "float32 (3, 64, 64)",
            "file": str(path),
            "file_bytes": n * RECORD_BYTES,
            "seed": SEED,
        },
    )
