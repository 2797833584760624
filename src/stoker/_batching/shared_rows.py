"""``SharedRows``: one batch whose slices several thread workers write at once.

A cold start splits the first batch of a pass across the workers
(:mod:`stoker._exec.merge`). Thread workers share the process's memory, so each one
writes its slice's records straight into its rows of one batch as they are made
(``BatchBuilder.stream_slice``), instead of holding them until the slices are joined
and collated on one thread: no record outlives the next, and nothing is copied
twice. The first record written sizes the batch. A slice whose records do not fit it
(another shape or dtype, strings, small records) hands back its records instead,
and the join then collates every record, those already written read back from
their rows, as one collate would have.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .._tree import TreeDef, row_records

__all__ = ["PlacedSlice", "SharedRows"]


class SharedRows:
    """The arrays of one batch of ``total`` rows, made from the first record offered.

    Example:
        >>> import numpy as np
        >>> from stoker._tree import flatten
        >>> shared = SharedRows(4)
        >>> leaves, treedef = flatten(np.zeros(3, np.float32))
        >>> [r.shape for r in shared.rows_for(leaves, treedef)]
        [(4, 3)]
        >>> shared.rows_for(*flatten(np.zeros(2, np.float32))) is None
        True
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self._lock = threading.Lock()
        self._treedef: TreeDef | None = None
        self._rows: list[np.ndarray] = []

    def rows_for(self, leaves: list[np.ndarray], treedef: TreeDef) -> list[np.ndarray] | None:
        """The batch's arrays when a record of these arrays fits them (made from the
        first record offered), else None."""
        with self._lock:
            if self._treedef is None:
                self._treedef = treedef
                self._rows = [np.empty((self.total, *a.shape), a.dtype) for a in leaves]
        if treedef != self._treedef or not fits(leaves, self._rows):
            return None
        return self._rows

    def batch(self) -> Any:
        """The whole batch (once every slice wrote its rows)."""
        assert self._treedef is not None
        return self._treedef.unflatten(self._rows)

    def records(self, start: int, stop: int) -> list[Any]:
        """Rows ``start:stop`` read back as records (views of the batch)."""
        assert self._treedef is not None
        return row_records(self._treedef, self._rows, start, stop)


class PlacedSlice:
    """What a slice job hands back when its records were written into ``shared``'s
    rows ``start:stop``."""

    __slots__ = ("shared", "start", "stop")

    def __init__(self, shared: SharedRows, start: int, stop: int) -> None:
        self.shared, self.start, self.stop = shared, start, stop

    def records(self) -> list[Any]:
        """Its rows read back as records."""
        return self.shared.records(self.start, self.stop)


def fits(leaves: list[np.ndarray], rows: list[np.ndarray]) -> bool:
    """True when a record's arrays have the shapes and dtypes of a batch's rows."""
    return len(leaves) == len(rows) and all(
        leaf.dtype == row.dtype and leaf.shape == row.shape[1:]
        for leaf, row in zip(leaves, rows, strict=True)
    )
