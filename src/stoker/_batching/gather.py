"""``SplitGather``: one large bulk gather, split by rows across a few threads.

NumPy releases the GIL while it copies rows (``take``), so a batch of many megabytes
is read faster by several threads each filling its own rows of the same buffer than
by one. Only gathers into planned buffers are split, and each part writes disjoint
rows, so the batch is the same as with one thread.
"""

from __future__ import annotations

import itertools
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .._context import Context
from .._dataset import Dataset
from .._stats import SourceReads, add_reads, source_reads
from .._tree import TreeDef, flatten

__all__ = ["SPLIT_BYTES", "SplitGather"]

SPLIT_BYTES = 4 << 20
"""Batches smaller than this are gathered on one thread (splitting costs ~50 µs)."""

_MAX_PARTS = 4


class SplitGather:
    """Gathers large batches with up to ``parts`` threads (the caller's included).

    Example:
        >>> import numpy as np, stoker as sk
        >>> from stoker._context import Context
        >>> split = SplitGather(parts=2)
        >>> out = np.empty((4, 2))
        >>> ds = sk.from_arrays(np.arange(8.0).reshape(4, 2))
        >>> split.gather(ds, np.array([3, 2, 1, 0]), Context(), out)[:, 0].tolist()
        [6.0, 4.0, 2.0, 0.0]
        >>> split.close()

    Resources:
        Owns up to ``parts - 1`` threads, started on first use and ended by
        :meth:`close` (idempotent), which the owning iterator calls.
    """

    def __init__(self, parts: int | None = None) -> None:
        self._parts = parts or min(_MAX_PARTS, os.cpu_count() or 1)
        self._executor: ThreadPoolExecutor | None = None

    @property
    def useful(self) -> bool:
        """False on a machine with one core."""
        return self._parts > 1

    def gather(self, dataset: Dataset[Any], indices: np.ndarray, ctx: Context, out: Any) -> Any:
        """Fill ``out`` with the batch for ``indices``; returns ``out``."""
        leaves, treedef = flatten(out)
        rows = len(indices)
        bounds = np.linspace(0, rows, self._parts + 1).astype(int).tolist()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._parts - 1, thread_name_prefix="stoker-gather")
        futures: list[Future[SourceReads]] = [
            self._executor.submit(_gather_rows, dataset, indices, ctx, leaves, treedef, a, b)
            for a, b in itertools.pairwise(bounds[1:])
        ]
        _gather_rows(dataset, indices, ctx, leaves, treedef, bounds[0], bounds[1])
        for future in futures:
            add_reads(future.result())  # what the parts read counts for this thread's batch
        return out

    def close(self) -> None:
        """End the threads (they finish the part they are copying first)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None


def _gather_rows(
    dataset: Dataset[Any],
    indices: np.ndarray,
    ctx: Context,
    leaves: list[np.ndarray],
    treedef: TreeDef,
    start: int,
    stop: int,
) -> SourceReads:
    """Gather rows ``start:stop`` into their part of ``leaves``; returns what the
    source counted on this thread meanwhile (see :func:`stoker._stats.count_read`)."""
    before = source_reads()
    part_out = treedef.unflatten([leaf[start:stop] for leaf in leaves])
    result = dataset._gather(indices[start:stop], ctx, part_out)
    got, _ = flatten(result)
    for dst, src in zip(leaves, got, strict=True):
        part = dst[start:stop]
        if not np.shares_memory(part, src):  # a source that ignored ``out``
            np.copyto(part, src)
    return source_reads() - before
