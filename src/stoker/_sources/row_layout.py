"""How a cached block's numeric columns lie in memory: side by side in the rows of one array.

A table source that caches decoded blocks of rows (Parquet row groups) keeps every
1-D numeric column of a block in the rows of one 2-D byte array
(:func:`stack_columns`): a row's values of all those columns lie next to each other,
so one gather copies them at once (:mod:`stoker._sources.block_gather` does the
gathering). :class:`StackedColumns` is such a block's columns with where each one
lies; :class:`GatherPlan` is what the gather needs to know of a layout, one object
per distinct layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .columns import Column, Columns

__all__ = ["GatherPlan", "StackedColumns", "as_items", "stack_columns", "stacked_field"]


@dataclass(frozen=True, slots=True)
class GatherPlan:
    """How :func:`~stoker._sources.block_gather.gather_batch` reads blocks of one
    layout: the column names in order, the runs of stacked columns of one dtype (byte
    offset in a row, dtype, names, in the order they lie), and the columns stored on
    their own."""

    names: tuple[str, ...]
    runs: tuple[tuple[int, np.dtype[Any], tuple[str, ...]], ...]
    singles: tuple[str, ...]


class StackedColumns(dict[str, "Column"]):
    """Columns some of which view the rows of one 2-D byte array (see
    :func:`stack_columns`); ``stacks`` maps such a column to (that array, its byte
    offset in a row). ``plan`` and ``row_items`` (the array's rows, one NumPy item each)
    are set by :meth:`settle` when every column is a NumPy array (Python values, such
    as strings, kept in 1-D object arrays) and the stacked columns share one array
    (None otherwise)."""

    stacks: dict[str, tuple[np.ndarray, int]]
    plan: GatherPlan | None = None
    row_items: np.ndarray | None = None

    def settle(self) -> StackedColumns:
        """Fix ``plan`` from the columns and ``stacks`` (call once they are complete)."""
        self.plan, self.row_items = None, None
        blocks = {id(block): block for block, _ in self.stacks.values()}
        if len(blocks) > 1 or not all(isinstance(c, np.ndarray) for c in self.values()):
            return self
        runs: list[tuple[int, np.dtype[Any], list[str]]] = []
        for name, (_, offset) in sorted(self.stacks.items(), key=lambda kv: kv[1][1]):
            dtype = self[name].dtype  # type: ignore[union-attr]  # all arrays
            last = runs[-1] if runs else None
            if (
                last is not None
                and last[1] == dtype
                and offset == last[0] + len(last[2]) * dtype.itemsize
            ):
                last[2].append(name)
                continue
            runs.append((offset, dtype, [name]))
        singles = tuple(name for name in self if name not in self.stacks)
        plan = GatherPlan(tuple(self), tuple((o, d, tuple(names)) for o, d, names in runs), singles)
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        self.plan = _PLANS.setdefault(plan, plan)
        if blocks:
            (block,) = blocks.values()
            if not block.flags.c_contiguous:
                self.plan = None  # not one item a row: the general path
                return self
            self.row_items = as_items(block)
        return self


_PLANS: dict[GatherPlan, GatherPlan] = {}
"""One object per distinct plan, so blocks of one layout share theirs (an ``is`` test)."""
_MAX_PLANS = 64


def as_items(block: np.ndarray) -> np.ndarray:
    """The rows of a C-contiguous 2-D byte array as a 1-D array of one item per row."""
    items: np.ndarray = block.view(np.dtype((np.void, block.shape[1]))).reshape(len(block))
    return items


def stacked_field(block: np.ndarray, offset: int, dtype: np.dtype[Any]) -> np.ndarray:
    """The column of ``dtype`` at byte ``offset`` of each row of a 2-D byte array (a view).

    Example:
        >>> import numpy as np
        >>> block = np.zeros((2, 8), np.uint8)
        >>> stacked_field(block, 4, np.dtype(np.int32))[:] = [7, 9]
        >>> stacked_field(block, 4, np.dtype(np.int32)).tolist()
        [7, 9]
    """
    field: np.ndarray = block[:, offset : offset + dtype.itemsize].view(dtype)[:, 0]
    return field


def stack_columns(columns: Columns) -> StackedColumns:
    """``columns`` with its 1-D numeric columns laid out in the rows of one 2-D byte
    array (each column a view of it), so
    :func:`~stoker._sources.block_gather.gather_batch` copies a batch row's values of
    all of them as one item instead of gathering column by column. For
    blocks kept in a cache. Wider types come first (so every value is aligned), one
    dtype's columns next to each other in their order; a row is padded to a multiple
    of the widest type. Columns of Python values (strings, bytes: lists) are kept as
    1-D object arrays, so a gather takes their rows with NumPy too
    (:func:`~stoker._sources.block_gather.take_columns` hands them back as lists).

    Example:
        >>> import numpy as np
        >>> cols = stack_columns({"a": np.array([1.0, 2.0]), "b": np.array([3, 4], np.int32)})
        >>> cols["a"].base is cols["b"].base, cols["b"].tolist(), cols.stacks["b"][1]
        (True, [3, 4], 8)
    """
    numeric = {
        name: column
        for name, column in columns.items()
        if isinstance(column, np.ndarray) and column.ndim == 1 and column.dtype.kind in "biuf"
    }
    stacked = StackedColumns(
        {
            name: np.fromiter(column, dtype=object, count=len(column))
            if isinstance(column, list)
            else column
            for name, column in columns.items()
        }
    )
    stacked.stacks = {}
    if len(numeric) < 2:
        return stacked.settle()
    # Widest first, then one dtype's columns together (a stable sort keeps their order).
    laid = sorted(
        numeric, key=lambda name: (-numeric[name].dtype.itemsize, numeric[name].dtype.str)
    )
    widest = numeric[laid[0]].dtype.itemsize
    offsets, width = {}, 0
    for name in laid:
        offsets[name] = width
        width += numeric[name].dtype.itemsize
    width = -(-width // widest) * widest
    rows = len(numeric[laid[0]])
    block = np.zeros((rows, width), dtype=np.uint8)
    for name in laid:
        column, offset = numeric[name], offsets[name]
        field = stacked_field(block, offset, column.dtype)
        field[:] = column
        stacked[name] = field
        stacked.stacks[name] = (block, offset)
    return stacked.settle()
