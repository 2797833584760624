"""The first batch's slices written by their process workers into one shared batch.

A cold start splits the first batch across the workers (:mod:`stoker._exec.merge`).
Each worker reads its slice's records; collating them in the parent would copy the
whole batch once more, on one core, after every worker has finished. Instead, a
worker that holds its slice's records describes one row (:func:`row_description`:
the structure and, per array, its shape and dtype, from collating the first record
alone) and asks the parent where to put them (``("rows", description)``). The parent
(:class:`FirstBatch`) makes one segment for the whole batch from the first
description it receives and answers every slice whose rows match with
``("place", first row, layout)``, passing the segment along with the answer; each
worker collates its records straight into its rows of that segment, in parallel, and
the parent hands out views of it. A slice whose rows differ, or that are not plain
arrays, is answered ``("send",)`` and its records travel as before; the parent then
collates every record, read back from the rows already written (:class:`PlacedRows`),
exactly as the one collate would have, errors included.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from .._collate import default_collate
from .._shm import Segment, receive_with_segment
from .._tree import TreeDef, flatten, row_records
from .slots import Layout, layout_of, plan_offsets, views

__all__ = ["PLACED", "FirstBatch", "PlacedRows", "place_rows", "row_description"]

PLACED = "placed"
"""The layout a worker reports for a slice whose rows it wrote into the first batch."""

RowDescription = tuple[TreeDef, tuple[tuple[tuple[int, ...], np.dtype[Any]], ...]]
"""A record's structure and, per array leaf of its collated row, (shape, dtype)."""


def row_description(records: Sequence[Any]) -> RowDescription | None:
    """How one collated row of ``records`` lies, or None when it cannot live in shared
    memory (strings, objects, no arrays) or the first record does not collate.

    Example:
        >>> import numpy as np
        >>> tree, leaves = row_description([{"x": np.zeros((2, 3), np.float32)}])
        >>> leaves
        (((2, 3), dtype('float32')),)
    """
    if not records:
        return None
    try:
        probe = default_collate(records[:1])
    except Exception:
        return None  # the parent's collate of every record reports it
    found = layout_of(probe)
    if found is None:
        return None
    treedef, leaves = found
    return treedef, tuple((leaf.shape[1:], leaf.dtype) for leaf in leaves)


@dataclass(frozen=True, slots=True)
class PlacedRows:
    """Rows ``start:stop`` of a batch written in place: ``base`` (the segment's bytes,
    which keeps the mapping alive) laid out as ``layout``."""

    base: np.ndarray
    layout: Layout
    start: int
    stop: int

    def batch(self) -> Any:
        """The whole batch, as views of ``base``."""
        return views(self.base, self.layout)

    @property
    def nbytes(self) -> int:
        """The bytes of these rows."""
        _, leaves = self.layout
        row = sum(int(np.prod(shape[1:], dtype=np.int64)) * d.itemsize for _, shape, d in leaves)
        return row * (self.stop - self.start)

    def records(self) -> list[Any]:
        """These rows as records (views), for a collate of the whole batch."""
        leaves, treedef = flatten(self.batch())
        return row_records(treedef, leaves, self.start, self.stop)


class FirstBatch:
    """The parent's side: one segment for a first batch of ``total`` records and the
    first row of each slice job in it.

    Example:
        >>> import numpy as np
        >>> first = FirstBatch(4)
        >>> first.add("a", 3); first.add("b", 1)
        >>> description = row_description([np.zeros(2, np.int16)])
        >>> reply, segment = first.answer("b", description)
        >>> reply[:2], segment.size >= 4 * 2 * 2, first.rows("b").stop
        (('place', 3), True, 4)
        >>> first.close()

    Resources:
        Owns the segment (made by the first answer), which is passed to each worker
        with its answer (its descriptor travels with the message, so no worker looks
        it up by number); :meth:`close` (idempotent), once every slice is over, drops
        it. Views handed out keep the memory.
    """

    def __init__(self, total: int) -> None:
        self._total = total
        self._starts: dict[Any, tuple[int, int]] = {}  # slice key -> (first row, rows)
        self._next = 0
        self._ended = 0  # records of the slices that are over
        self._lock = threading.Lock()
        self._segment: Segment | None = None
        self._base: np.ndarray | None = None
        self._layout: Layout | None = None
        self._description: RowDescription | None = None
        self._closed = False

    def add(self, key: Any, rows: int) -> None:
        """The next slice of the batch: ``rows`` records, named ``key``."""
        with self._lock:
            self._starts[key] = (self._next, rows)
            self._next += rows

    def answer(
        self, key: Any, description: RowDescription | None
    ) -> tuple[tuple[Any, ...], Segment | None]:
        """The reply to slice ``key``'s worker, and the segment to pass with it: where
        to write its rows, or ``("send",)`` and no segment."""
        with self._lock:
            start = self._starts.get(key)
            if start is None or description is None or self._closed:
                return ("send",), None
            if self._segment is None:
                self._make(description)
            if description != self._description:
                return ("send",), None
            return ("place", start[0], self._layout), self._segment

    def _make(self, description: RowDescription) -> None:
        treedef, rows = description
        shapes = [(self._total, *shape) for shape, _ in rows]
        dtypes = [dtype for _, dtype in rows]
        pairs = zip(shapes, dtypes, strict=True)
        sizes = [int(np.prod(shape, dtype=np.int64)) * dtype.itemsize for shape, dtype in pairs]
        offsets, end = plan_offsets(sizes)
        self._segment = Segment(max(end, 1), "first-batch")
        self._base = self._segment.array
        self._layout = (treedef, tuple(zip(offsets, shapes, dtypes, strict=True)))
        self._description = description

    def rows(self, key: Any) -> PlacedRows:
        """Slice ``key``'s rows, once its worker reported them written."""
        start, count = self._starts[key]
        if self._base is None or self._layout is None:
            raise RuntimeError("no rows were placed in this first batch")
        return PlacedRows(self._base, self._layout, start, start + count)

    def ended(self, key: Any) -> None:
        """Slice ``key`` is over (done, failed or cancelled): once every record's slice
        is, no answer passes the segment any more and it is closed."""
        with self._lock:
            self._ended += self._starts[key][1]
            last = self._ended >= self._total
        if last:
            self.close()

    def close(self) -> None:
        """No slice is answered any more: drop the segment (idempotent)."""
        with self._lock:
            self._closed = True
            segment, self._segment = self._segment, None
        if segment is not None:
            segment.close()


def place_rows(conn: Connection, send: Any, records: list[Any]) -> bool | None:
    """The worker's side: ask the parent where ``records`` go (``send`` sends a message)
    and collate them there. True: written into the parent's batch; False: send the
    records instead; None: the parent stopped the worker (or is gone)."""
    if not send(conn, ("rows", row_description(records))):
        return None
    try:
        raw, segment = receive_with_segment(conn)
    except (EOFError, OSError):
        return None
    reply = pickle.loads(raw)
    if segment is None or reply[0] != "place":
        return None if reply[0] == "stop" else False
    _, start, layout = reply
    try:
        leaves, treedef = flatten(views(segment.array, layout))
        rows = [leaf[start : start + len(records)] for leaf in leaves]
        base = segment.array.__array_interface__["data"][0]
        for row in rows:  # fresh pages: allocated in one call each, not page by page
            at = row.__array_interface__["data"][0] - base
            segment.populate(at, at + row.nbytes)
        out = treedef.unflatten(rows)
        written, _ = flatten(default_collate(records, out=out))
        mine, _ = flatten(out)
        return all(a is b for a, b in zip(written, mine, strict=True))
    except Exception:
        return False  # rows the one collate refuses: the parent's collate says why
    finally:
        segment.close()
