"""Gathering a batch's rows from cached blocks of columns (row groups, SQLite blocks).

A table source that keeps decoded blocks of consecutive rows (Parquet row groups,
SQLite blocks) reads a shuffled batch from the few blocks it touches:
:func:`which_blocks` / :func:`split_blocks` group the batch's rows by block, and
:func:`take_columns` / :func:`gather_batch` take the rows, in batch order, into new
columns or straight into the planned batch buffers. A block's numeric columns lie
side by side in the rows of one byte array (:mod:`stoker._sources.row_layout`), so
one gather copies a row's values of all of them. The column kinds are
:mod:`stoker._sources.columns`'.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np

from .columns import Column, Columns, Ragged, column_batch
from .row_layout import GatherPlan, StackedColumns, as_items, stack_columns, stacked_field

__all__ = [
    "Grouping",
    "gather_batch",
    "join_blocks",
    "split_blocks",
    "take_columns",
    "which_blocks",
]


def _ragged_take(column: Ragged, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values and lengths of ``rows`` of ``column``, values concatenated in row order."""
    starts = column.offsets[rows]
    lengths = column.offsets[rows + 1] - starts
    total = int(lengths.sum())
    if total == 0:
        return column.values[:0].copy(), lengths
    ends = np.cumsum(lengths)
    # Position k of the result reads values[starts[row] + (k - first position of row)].
    shift = np.repeat(starts - (ends - lengths), lengths)
    return column.values[np.arange(total) + shift], lengths


def take_columns(blocks: list[Columns], block_of: np.ndarray, rows: np.ndarray) -> Columns:
    """Row ``rows[i]`` of block ``block_of[i]``, for every ``i``, column by column.

    The blocks (decoded row groups, say) share their columns and kinds; NumPy does the
    gathering, so no Python object is made per row except for strings and binary.

    Example:
        >>> import numpy as np
        >>> a = {"x": np.array([1, 2]), "t": Ragged(np.array([7, 8, 9]), np.array([0, 1, 3]))}
        >>> b = {"x": np.array([3]), "t": Ragged(np.array([5]), np.array([0, 1]))}
        >>> cols = take_columns([a, b], np.array([1, 0, 0]), np.array([0, 1, 0]))
        >>> cols["x"].tolist(), [r.tolist() for r in cols["t"].rows()]
        ([3, 2, 1], [[5], [8, 9], [7]])
    """
    split: list[list[np.ndarray]] = []  # [wheres, picked], made when first needed

    def by_block() -> tuple[list[np.ndarray], list[np.ndarray]]:
        if not split:
            # block_of holds few distinct small ints: a stable sort of them as 16-bit
            # ints is NumPy's radix sort, and the bounds are the cumulated counts.
            small = block_of.astype(np.uint16) if len(blocks) <= 1 << 16 else block_of
            order = np.argsort(small, kind="stable")
            bounds = np.zeros(len(blocks) + 1, dtype=np.int64)
            np.cumsum(np.bincount(block_of, minlength=len(blocks)), out=bounds[1:])
            wheres = [order[bounds[k] : bounds[k + 1]] for k in range(len(blocks))]
            split.extend([wheres, [rows[w] for w in wheres]])
        return split[0], split[1]

    first = blocks[0]
    stacks = first.stacks if isinstance(first, StackedColumns) else {}
    if stacks and not all(_same_stacking(first, b) for b in blocks[1:]):
        stacks = {}  # blocks stacked differently: gather column by column
    result: Columns = {}
    gathered: dict[int, np.ndarray] = {}  # a 2-D block of the first block (by id) -> rows
    for name, column in first.items():
        stacked = stacks.get(name)
        if stacked is not None:
            block0, position = stacked
            rows_of = gathered.get(id(block0))
            if rows_of is None:
                if len(blocks) == 1 and block0.flags.c_contiguous:  # one item a row
                    rows_of = as_items(block0).take(rows).view(np.uint8)
                    rows_of = rows_of.reshape(len(rows), block0.shape[1])
                elif len(blocks) == 1:
                    rows_of = block0[rows]
                else:
                    wheres, picked = by_block()
                    pieces = [
                        b.stacks[name][0][r]  # type: ignore[attr-defined]
                        for b, r in zip(blocks, picked, strict=True)
                    ]
                    rows_of = _scatter_rows(pieces, wheres)
                gathered[id(block0)] = rows_of
            result[name] = stacked_field(rows_of, position, column.dtype)  # type: ignore[union-attr]
            continue
        if isinstance(column, Ragged) and len(rows) <= _ROW_BY_ROW:
            result[name] = _ragged_rows([b[name] for b in blocks], block_of, rows, name)
            continue
        if len(blocks) == 1:
            result[name] = _take_one(column, rows)
        else:
            wheres, picked = by_block()
            parts = [_take_one(b[name], r) for b, r in zip(blocks, picked, strict=True)]
            result[name] = _scatter(column, parts, wheres, len(rows), name)
        taken = result[name]
        if isinstance(taken, np.ndarray) and taken.dtype == object:
            result[name] = taken.tolist()  # Python values kept in an array: a list again
    return result


def join_blocks(blocks: list[Columns]) -> Columns | None:
    """The rows of ``blocks`` end to end as one block (numbers stacked again), or None
    when a column's kind or dtype differs between them. A batch source that reads many
    batches from the same few blocks (a window of a block-aligned shuffle) joins them
    once, then takes every batch from the join with one gather.

    Example:
        >>> import numpy as np
        >>> a = {"x": np.array([1, 2]), "t": Ragged(np.array([7, 8, 9]), np.array([0, 1, 3]))}
        >>> b = {"x": np.array([3]), "t": Ragged(np.array([5]), np.array([0, 1]))}
        >>> both = join_blocks([a, b])
        >>> both["x"].tolist(), [r.tolist() for r in both["t"].rows()]
        ([1, 2, 3], [[7], [8, 9], [5]])
    """
    plan = getattr(blocks[0], "plan", None)
    if plan is not None and all(getattr(b, "plan", None) is plan for b in blocks[1:]):
        return _join_planned(blocks, plan)  # type: ignore[arg-type]  # all stacked
    joined: Columns = {}
    for name, first in blocks[0].items():
        parts = [b[name] for b in blocks]
        if any(type(p) is not type(first) for p in parts):
            return None
        if isinstance(first, Ragged):
            ragged = [p for p in parts if isinstance(p, Ragged)]
            if any(p.values.dtype != first.values.dtype for p in ragged):
                return None
            lengths = np.concatenate([p.lengths() for p in ragged])
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            values = [p.values[p.offsets[0] : p.offsets[-1]] for p in ragged]
            joined[name] = Ragged(np.concatenate(values), offsets)
        elif isinstance(first, np.ndarray):
            arrays = [p for p in parts if isinstance(p, np.ndarray)]
            if any(p.dtype != first.dtype or p.shape[1:] != first.shape[1:] for p in arrays):
                return None
            joined[name] = np.concatenate(arrays)
        else:
            joined[name] = [v for p in parts if isinstance(p, list) for v in p]
    return stack_columns(joined)


def _join_planned(blocks: list[StackedColumns], plan: GatherPlan) -> StackedColumns:
    """The rows of blocks of one layout end to end: their row arrays joined with one
    copy, the stacked columns viewing the join where they viewed each block."""
    first = blocks[0]
    rows = None
    if first.stacks:
        rows = np.concatenate([next(iter(b.stacks.values()))[0] for b in blocks])
    joined = StackedColumns()
    joined.stacks = {}
    for name in plan.names:
        stacked = first.stacks.get(name)
        if stacked is not None and rows is not None:
            offset = stacked[1]
            joined[name] = stacked_field(rows, offset, first[name].dtype)  # type: ignore[union-attr]
            joined.stacks[name] = (rows, offset)
        else:
            joined[name] = np.concatenate([b[name] for b in blocks])
    return joined.settle()


def _same_stacking(a: Columns, b: Columns) -> bool:
    """Whether two blocks stack the same columns at the same byte offsets."""
    if not isinstance(a, StackedColumns) or not isinstance(b, StackedColumns):
        return False
    return {k: at for k, (_, at) in a.stacks.items()} == {k: at for k, (_, at) in b.stacks.items()}


def which_blocks(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(blocks, return_inverse=True)`` for small non-negative ints (block
    numbers), by counting instead of sorting.

    Example:
        >>> import numpy as np
        >>> unique, inverse = which_blocks(np.array([7, 3, 7, 5]))
        >>> unique.tolist(), inverse.tolist()
        ([3, 5, 7], [2, 0, 2, 1])
    """
    if len(blocks) == 0:
        return blocks[:0].astype(np.int64), blocks[:0].astype(np.int64)
    low = int(blocks.min())
    counts = np.bincount(blocks - low)
    present = counts > 0
    unique = np.flatnonzero(present) + low
    number = np.cumsum(present) - 1
    return unique, number[blocks - low]


class Grouping(NamedTuple):
    """A batch's positions grouped by block: block ``k``'s are ``order[ends[k - 1] :
    ends[k]]`` (from 0 for the first), in batch order."""

    order: np.ndarray
    ends: list[int]

    def wheres(self) -> list[np.ndarray]:
        """The batch positions of each block's rows."""
        return [self.order[a:b] for a, b in itertools.pairwise([0, *self.ends])]


def split_blocks(blocks: np.ndarray, count: int | None = None) -> tuple[list[int], Grouping | None]:
    """The distinct block numbers of a batch's rows (sorted) and the batch's positions
    grouped by them; None instead of the grouping when every row is in one block.
    ``count``, when known, is how many blocks there are (every number is below it).

    Example:
        >>> import numpy as np
        >>> unique, grouping = split_blocks(np.array([7, 3, 7, 5]))
        >>> unique, [w.tolist() for w in grouping.wheres()]
        ([3, 5, 7], [[1], [3], [0, 2]])
    """
    if len(blocks) == 0:
        return [], None
    low = 0 if count is not None and count <= 1 << 16 else int(blocks.min())
    shifted = blocks - low if low else blocks
    counts = np.bincount(shifted)
    present = np.flatnonzero(counts)
    if len(present) == 1:
        return [int(present[0]) + low], None
    # Few distinct small numbers: a stable sort of them as 16-bit ints is NumPy's radix
    # sort, and the rows of each block are one run of the sorted order.
    small = shifted.astype(np.uint16) if len(counts) <= 1 << 16 else shifted
    order = np.argsort(small, kind="stable")
    unique: list[int] = (present + low).tolist()
    return unique, Grouping(order, np.cumsum(counts[present]).tolist())


def gather_batch(
    blocks: list[Columns], grouping: Grouping | None, rows: np.ndarray, out: Any = None
) -> Any:
    """``column_batch(take_columns(blocks, block_of, rows), out)`` in one pass.

    ``grouping`` holds the batch positions read from each block (see
    :func:`split_blocks`; None: one block holds every row); ``rows`` the row of each
    position in its block. When every column is a NumPy array, each is gathered
    straight into its place in the batch: the columns of
    :func:`~stoker._sources.row_layout.stack_columns`' byte rows with one copy of each
    row (all its values at once), then one transposing copy per dtype into rows of one
    ``(columns, rows)`` array (each column contiguous), or into ``out`` when it holds
    such columns side by side at a constant stride (the slot of a process worker);
    other columns with one NumPy gather a block. Other kinds take the general path.

    Example:
        >>> import numpy as np
        >>> from stoker._sources.row_layout import stack_columns
        >>> a = stack_columns({"x": np.array([1.0, 2.0]), "y": np.array([3.0, 4.0])})
        >>> b = stack_columns({"x": np.array([5.0]), "y": np.array([6.0])})
        >>> unique, grouping = split_blocks(np.array([1, 0, 0]))
        >>> batch = gather_batch([a, b], grouping, np.array([0, 1, 0]))
        >>> batch["x"].tolist(), batch["y"].tolist(), batch["y"].flags.c_contiguous
        ([5.0, 2.0, 1.0], [6.0, 4.0, 3.0], True)
    """
    plan = getattr(blocks[0], "plan", None)
    if plan is None or (
        len(blocks) > 1 and any(getattr(b, "plan", None) is not plan for b in blocks[1:])
    ):
        return column_batch(take_columns(blocks, _block_of(grouping, len(rows)), rows), out)
    n = len(rows)
    targets: dict[str, Any] = out if isinstance(out, dict) else {}
    picked = rows if grouping is None else rows[grouping.order]  # in grouped order
    batch: dict[str, np.ndarray] = {}
    if plan.runs:
        lined = _gather_rows([b.row_items for b in blocks], grouping, picked)  # type: ignore[attr-defined]
        for offset, dtype, names in plan.runs:
            values = lined[:, offset : offset + len(names) * dtype.itemsize].view(dtype)
            _place_run(values, names, targets, batch)
    for name in plan.singles:
        column: np.ndarray = blocks[0][name]  # type: ignore[assignment]
        if grouping is None and column.dtype == object:  # strings, bytes: a list, as collated
            batch[name] = column.take(rows).tolist()
            continue
        shape = (n, *column.shape[1:])
        target = targets.get(name)
        if target is None or not _fits(target, shape, column.dtype):
            target = np.empty(shape, dtype=column.dtype)
        if grouping is None:
            column.take(rows, axis=0, out=target)
        else:
            start = 0
            for block, end in zip(blocks, grouping.ends, strict=True):
                part = block[name]
                target[grouping.order[start:end]] = part[picked[start:end]]  # type: ignore[index]
                start = end
        # Python values (strings, bytes) kept in an object array: a list, as collated
        batch[name] = target.tolist() if target.dtype == object else target
    return {name: batch[name] for name in plan.names}


def _place_run(
    values: np.ndarray, names: tuple[str, ...], targets: dict[str, Any], batch: dict[str, Any]
) -> None:
    """Copy ``values`` (rows x columns ``names``, one dtype) into the batch's columns:
    into ``targets`` side by side with one transposing copy, into each target that
    fits, or into new rows of one ``(columns, rows)`` array."""
    if not targets:
        if len(names) == 1:  # an array of its own, which the buffer pool can recycle
            batch[names[0]] = np.ascontiguousarray(values[:, 0])
        else:  # each column a row of one new (columns, rows) array
            batch.update(zip(names, np.ascontiguousarray(values.T), strict=True))
        return
    n, dtype = len(values), values.dtype
    side = _side_by_side([targets.get(c) for c in names], n, dtype)
    if side is not None:
        np.copyto(side, values.T)
        batch.update((c, targets[c]) for c in names)
        return
    if len(names) == 1:
        target = targets.get(names[0])
        if target is None or not _fits(target, (n,), dtype):
            target = np.empty(n, dtype=dtype)
        np.copyto(target, values[:, 0])
        batch[names[0]] = target
        return
    columns = np.empty((len(names), n), dtype=dtype)
    np.copyto(columns, values.T)
    for j, c in enumerate(names):
        target = targets.get(c)
        if target is not None and _fits(target, (n,), dtype):
            np.copyto(target, columns[j])
            batch[c] = target
        else:
            batch[c] = columns[j]


def _block_of(grouping: Grouping | None, n: int) -> np.ndarray:
    """The block of every batch position (the inverse of :func:`split_blocks`)."""
    block_of = np.zeros(n, dtype=np.int64)
    for k, where in enumerate(grouping.wheres() if grouping is not None else []):
        block_of[where] = k
    return block_of


def _fits(target: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> bool:
    return (
        isinstance(target, np.ndarray)
        and target.shape == shape
        and target.dtype == dtype
        and target.flags.writeable
    )


def _gather_rows(
    items: list[np.ndarray], grouping: Grouping | None, picked: np.ndarray
) -> np.ndarray:
    """A C-contiguous ``(rows, row bytes)`` byte array of the batch's rows in batch order.

    ``items[k]`` is block ``k``'s rows (one item each, see :func:`as_items`);
    ``picked`` the rows to read, block after block as ``grouping`` orders them. Each
    block's rows are taken in one call, then put in batch order with one more.
    """
    n = len(picked)
    width = items[0].dtype.itemsize
    if grouping is None:
        lined = items[0].take(picked)
    else:
        lined = np.empty(n, dtype=items[0].dtype)
        grouped = np.empty_like(lined)
        start = 0
        for block_items, end in zip(items, grouping.ends, strict=True):
            block_items.take(picked[start:end], out=grouped[start:end])
            start = end
        lined[grouping.order] = grouped
    return lined.view(np.uint8).reshape(n, width)


def _side_by_side(targets: list[Any], n: int, dtype: np.dtype[Any]) -> np.ndarray | None:
    """A writable ``(len(targets), n)`` view of ``targets`` when they are contiguous 1-D
    arrays of ``n`` items of ``dtype``, views of one array, one after the other at a
    constant stride (a batch's columns laid out in one buffer), else None."""
    if not targets or not all(_fits(t, (n,), dtype) for t in targets):
        return None
    base = targets[0].base
    if base is None or any(t.base is not base or not t.flags.c_contiguous for t in targets):
        return None
    starts = [t.__array_interface__["data"][0] for t in targets]
    stride = starts[1] - starts[0] if len(starts) > 1 else n * dtype.itemsize
    if stride < n * dtype.itemsize or any(b - a != stride for a, b in itertools.pairwise(starts)):
        return None
    side: np.ndarray = np.lib.stride_tricks.as_strided(
        targets[0], shape=(len(targets), n), strides=(stride, dtype.itemsize), writeable=True
    )
    return side


_ROW_BY_ROW = 64
"""Up to this many rows, list rows from several blocks are copied one slice each
(under 1 µs a row), cheaper than a vectorised gather per block (about 30 µs a block)."""


def _ragged_rows(
    columns: list[Column], block_of: np.ndarray, rows: np.ndarray, name: str
) -> Ragged:
    """Rows ``rows`` of the list columns of several blocks, one view per row (its
    bounds read as two Python ints: cheaper than NumPy calls per block for few rows)."""
    offsets_of, values_of = [], []
    for column in columns:
        if not isinstance(column, Ragged):
            raise TypeError(f"column {name!r} changed kind between blocks")
        offsets_of.append(column.offsets.item)
        values_of.append(column.values)
    pieces = []
    for k, row in zip(block_of.tolist(), rows.tolist(), strict=True):
        at = offsets_of[k]
        pieces.append(values_of[k][at(row) : at(row + 1)])
    return Ragged.of_pieces(pieces)  # joined only if someone reads ``values``


def _scatter_rows(pieces: list[np.ndarray], wheres: list[np.ndarray]) -> np.ndarray:
    """One array whose rows ``wheres[k]`` are ``pieces[k]``."""
    n = sum(len(w) for w in wheres)
    out = np.empty((n, *pieces[0].shape[1:]), dtype=pieces[0].dtype)
    for piece, where in zip(pieces, wheres, strict=True):
        out[where] = piece
    return out


def _take_one(column: Column, rows: np.ndarray) -> Column:
    """Rows ``rows`` of one column."""
    if isinstance(column, Ragged):
        values, lengths = _ragged_take(column, rows)
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return Ragged(values, offsets)
    if isinstance(column, np.ndarray):
        taken: np.ndarray = column[rows]
        return taken
    return [column[i] for i in rows.tolist()]


def _scatter(
    first: Column, parts: list[Column], wheres: list[np.ndarray], n: int, name: str
) -> Column:
    """One column of ``n`` rows whose rows ``wheres[k]`` are ``parts[k]``."""
    if isinstance(first, np.ndarray):
        out = np.empty((n, *first.shape[1:]), dtype=first.dtype)
        for part, where in zip(parts, wheres, strict=True):
            out[where] = part
        return out
    if isinstance(first, Ragged):
        lengths = np.empty(n, dtype=np.int64)
        for part, where in zip(parts, wheres, strict=True):
            if not isinstance(part, Ragged):
                raise TypeError(f"column {name!r} changed kind between blocks")
            lengths[where] = part.lengths()
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.empty(int(offsets[-1]), dtype=first.values.dtype)
        for part, where in zip(parts, wheres, strict=True):
            if isinstance(part, Ragged) and len(part.values):
                size = lengths[where]
                ends = np.cumsum(size)
                shift = np.repeat(offsets[where] - (ends - size), size)
                values[np.arange(len(part.values)) + shift] = part.values
        return Ragged(values, offsets)
    out_list: list[Any] = [None] * n
    for part, where in zip(parts, wheres, strict=True):
        if not isinstance(part, list):
            raise TypeError(f"column {name!r} changed kind between blocks")
        for i, value in zip(where.tolist(), part, strict=True):
            out_list[i] = value
    return out_list
