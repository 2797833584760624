"""``pad_collate``: variable-length records in, one padded batch out.

Every sequence field (a NumPy array, a PyTorch CPU tensor, or a Python list of
numbers) is padded at the end to a common length: one buffer filled with the pad
value, then every row written at once (a concatenation and a boolean mask for 1-D
fields, one slice per row for N-D ones). Other fields are collated as by
:func:`~stoker.default_collate`.
"""

from __future__ import annotations

import functools
import itertools
import numbers
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from .._collate import _collate, _is_tensor
from .._sources.columns import Ragged
from .._tree import is_namedtuple
from .._typing import releases_gil
from ..errors import CollateError

__all__ = ["column_collate", "pad_collate", "pad_columns"]

LENGTHS_SUFFIX = "_lengths"
MASK_SUFFIX = "_mask"


@releases_gil  # NumPy copies
def pad_collate(
    records: Sequence[Any],
    pad_value: Any = 0,
    multiple_of: int = 1,
    *,
    max_length: int | None = None,
    lengths: bool | Collection[str] = False,
    mask: bool | Collection[str] = False,
) -> Any:
    """Like :func:`default_collate`, but pads sequences of different lengths.

    A *sequence* is a NumPy array with at least one dimension, a PyTorch CPU tensor,
    or a Python list of numbers. Every sequence field is padded at the end of each
    axis to the largest size in the batch, rounded up to ``multiple_of`` (handy for
    kernels that like multiples of 8). Other fields (scalars, strings) are collated
    as by :func:`default_collate`. Pass options with ``functools.partial``:
    ``collate_fn=functools.partial(sk.pad_collate, max_length=512, mask=True)``.

    Args:
        records: the records of one batch, all with the structure of the first.
        pad_value: the fill: a scalar, or for dict records a dict field -> scalar
            (fields it does not name are padded with 0).
        multiple_of: round the padded length of every axis up to a multiple of this.
        max_length: pad *and truncate* the first axis of every sequence to exactly
            this length, so that every batch has the same shape (other axes are
            padded as above). None: the longest in the batch.
        lengths: for dict records, add ``"<field>_lengths"`` (int64, shape
            ``(batch,)``): each record's length along the first axis after
            truncation. True: for every top-level sequence field; or a collection of
            field names.
        mask: for dict records, add ``"<field>_mask"`` (bool, shape
            ``(batch, length)``): True at real elements, False at padding. True or
            field names, as for ``lengths``.

    Returns:
        The batch, with sequences as arrays of shape ``(batch, length, ...)``.

    Example:
        >>> import numpy as np
        >>> pad_collate([np.array([1, 2, 3]), np.array([4])]).tolist()
        [[1, 2, 3], [4, 0, 0]]
        >>> batch = pad_collate([{"tokens": [5, 6, 7]}, {"tokens": [8]}],
        ...                     pad_value=-1, max_length=2, mask=True, lengths=True)
        >>> batch["tokens"].tolist(), batch["tokens_lengths"].tolist()
        ([[5, 6], [8, -1]], [2, 1])
        >>> batch["tokens_mask"].tolist()
        [[True, True], [True, False]]

    Errors:
        CollateError: arrays of different numbers of dimensions; ``lengths``,
            ``mask`` or a dict ``pad_value`` with records that are not dicts, or
            naming a field that is not a sequence field of the records; an added
            field name that the records already use; a ``max_length`` that is not a
            multiple of ``multiple_of``; a pad value that the field's dtype cannot
            hold; or as for :func:`default_collate`.
    """
    pad = _Padding(pad_value, multiple_of, max_length)
    if not records:
        raise CollateError("cannot collate an empty list of records")
    first = records[0]
    if not isinstance(first, Mapping):
        if isinstance(pad_value, Mapping) or lengths is not False or mask is not False:
            raise CollateError(
                f"pad_value as a dict, lengths= and mask= need dict records (to name the "
                f"fields), got {type(first).__name__}; make records dicts in a map first, "
                "e.g. ds.map(lambda tokens: {'tokens': tokens})"
            )
        return pad.column(list(records), pad_value, "batch")
    return _pad_columns(_columns(records, "batch"), pad, lengths, mask)


_ROW_BY_ROW = 64
"""Up to this many rows, a list column is padded one slice copy a row (about 0.5 µs
each), cheaper than masks and index arrays over the whole batch."""


def pad_columns(
    columns: Mapping[str, Any],
    pad_value: Any = 0,
    multiple_of: int = 1,
    *,
    max_length: int | None = None,
    lengths: bool | Collection[str] = False,
    mask: bool | Collection[str] = False,
) -> dict[Any, Any]:
    """:func:`pad_collate` of a batch given column by column, as table sources read it.

    List columns come as :class:`~stoker._sources.columns.Ragged` (values and offsets)
    and are padded without an array per record; the batch is exactly
    ``pad_collate`` of the same rows as records.

    Example:
        >>> import numpy as np
        >>> from stoker._sources.columns import Ragged
        >>> cols = {"t": Ragged(np.array([1, 2, 3]), np.array([0, 2, 3])), "y": np.array([7, 8])}
        >>> batch = pad_columns(cols, max_length=2, mask=True)
        >>> batch["t"].tolist(), batch["y"].tolist(), batch["t_mask"].tolist()
        ([[1, 2], [3, 0]], [7, 8], [[True, True], [True, False]])
    """
    pad = _Padding(pad_value, multiple_of, max_length)
    as_lists = {k: list(v) if isinstance(v, np.ndarray) else v for k, v in columns.items()}
    return _pad_columns(as_lists, pad, lengths, mask)


def column_collate(collate_fn: object) -> Callable[[Mapping[str, Any]], Any] | None:
    """The column form of ``collate_fn`` when it is :func:`pad_collate` (or a
    ``functools.partial`` of it), else None."""
    args: tuple[Any, ...] = ()
    keywords: dict[str, Any] = {}
    while isinstance(collate_fn, functools.partial):
        args = (*collate_fn.args, *args)
        keywords = {**collate_fn.keywords, **keywords}
        collate_fn = collate_fn.func
    if collate_fn is not pad_collate:
        return None
    return functools.partial(pad_columns, *args, **keywords)


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise CollateError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _pad_columns(
    columns: Mapping[Any, Any],
    pad: _Padding,
    lengths: bool | Collection[str],
    mask: bool | Collection[str],
) -> dict[Any, Any]:
    keys = list(columns)
    fills = pad.fills
    if isinstance(fills, Mapping):
        unknown = sorted(set(fills) - set(keys), key=str)
        if unknown:
            raise CollateError(
                f"pad_value names fields {unknown} that the records do not have; "
                f"they have {sorted(keys, key=str)}"
            )
    batch: dict[Any, Any] = {}
    found: dict[Any, np.ndarray] = {}  # field -> lengths, for every sequence field
    for k, column in columns.items():
        fill = fills.get(k, 0) if isinstance(fills, Mapping) else fills
        batch[k] = pad.column(column, fill, f"batch[{k!r}]", found, k)
    for option, suffix in ((lengths, LENGTHS_SUFFIX), (mask, MASK_SUFFIX)):
        if option is False:
            continue
        if isinstance(option, bool):
            names = list(found)
        else:
            names = [option] if isinstance(option, str) else list(option)
        for k in names:
            if k not in found:
                raise CollateError(
                    f"{suffix[1:]}= names {k!r}, which is not a sequence field of the "
                    f"records; their sequence fields are {sorted(found, key=str)}"
                )
            name = f"{k}{suffix}"
            if name in batch:
                raise CollateError(
                    f"cannot add {name!r}: the records already have a field of that name; "
                    f"rename it in a map, or leave {suffix[1:]}= off"
                )
            n = found[k]
            if suffix == LENGTHS_SUFFIX:
                batch[name] = n
            else:
                width = batch[k].shape[1]
                batch[name] = np.arange(width) < n[:, None]
    return batch


class _Padding:
    """The padding options of one call, and the column-by-column padding itself."""

    def __init__(self, fills: Any, multiple_of: int, max_length: int | None) -> None:
        multiple_of = _positive_int(multiple_of, "multiple_of")
        if max_length is not None:
            max_length = _positive_int(max_length, "max_length")
            if max_length % multiple_of:
                raise CollateError(
                    f"max_length={max_length} is not a multiple of multiple_of={multiple_of}: "
                    "every batch is max_length long; choose a max_length that is a multiple"
                )
        self.fills = fills
        self._multiple = multiple_of
        self._max_length = max_length

    def _width(self, longest: int, axis0: bool) -> int:
        if axis0 and self._max_length is not None:
            return self._max_length
        m = self._multiple
        return -(-longest // m) * m

    def column(
        self,
        column: list[Any] | Ragged,
        fill: Any,
        where: str,
        found: dict[Any, np.ndarray] | None = None,
        key: Any = None,
    ) -> Any:
        """The collated ``column``: sequences padded, containers walked, the rest stacked.

        The lengths of a padded sequence column are put in ``found[key]``.
        """
        if isinstance(column, Ragged):
            padded, n = self._ragged(column, fill, where)
            if found is not None:
                found[key] = n
            return padded
        first = column[0]
        if _is_tensor(first):
            try:
                column = [c.numpy() if _is_tensor(c) else c for c in column]
            except (TypeError, RuntimeError):
                return _collate(column, None, where)  # on a GPU: stacked by torch, unpadded
            first = column[0]
        kind = _sequence_kind(column)
        if kind == "arrays":
            padded, n = self._arrays(column, fill, where)
        elif kind == "numbers":
            padded, n = self._lists(column, fill, where)
        elif kind == "mixed":
            padded, n = self._arrays(_as_arrays(column, where), fill, where)
        elif isinstance(first, Mapping):
            return {
                k: self.column(values, fill, f"{where}[{k!r}]")
                for k, values in _columns(column, where).items()
            }
        elif isinstance(first, tuple | list) and not is_namedtuple(first):
            n_fields = len(first)
            for r in column:
                if not isinstance(r, tuple | list) or len(r) != n_fields:
                    got = len(r) if isinstance(r, tuple | list) else type(r).__name__
                    raise CollateError(
                        f"cannot collate {where}: sequences of length {n_fields} and {got}"
                    )
            fields = [
                self.column([r[j] for r in column], fill, f"{where}[{j}]") for j in range(n_fields)
            ]
            return tuple(fields) if isinstance(first, tuple) else fields
        else:
            return _collate(column, None, where)
        if found is not None:
            found[key] = n
        return padded

    def _ragged(self, column: Ragged, fill: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
        n = column.lengths()
        longest = int(n.max()) if len(n) else 0
        width = self._width(longest, True)
        if len(n) <= _ROW_BY_ROW:  # one slice copy a row: no index arrays the batch's size
            out = self._full((len(n), width), fill, column.dtype, where)
            cut = np.minimum(n, width)
            # Rows gathered from several blocks are read where they lie (copied once).
            for row, piece, k in zip(out, column.pieces(), cut.tolist(), strict=True):
                row[:k] = piece[:k]
            return out, cut
        flat = column.values[int(column.offsets[0]) : int(column.offsets[-1])]
        if longest > width:  # keep the first ``width`` values of every row
            within = np.arange(len(flat)) - np.repeat(column.offsets[:-1] - column.offsets[0], n)
            flat = flat[within < width]
            n = np.minimum(n, width)
        return self._scatter(flat, n, width, fill, where), n

    def _lists(self, column: list[Any], fill: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
        n = np.array([len(c) for c in column], dtype=np.int64)
        longest = int(n.max())
        width = self._width(longest, True)
        if longest > width:
            column = [c[:width] for c in column]
            n = np.minimum(n, width)
        flat = np.array(list(itertools.chain.from_iterable(column)))
        if flat.dtype.kind not in "biufc":
            raise CollateError(f"cannot pad {where}: lists of {flat.dtype} values")
        return self._scatter(flat, n, width, fill, where), n

    def _arrays(self, column: list[Any], fill: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
        ndim = column[0].ndim
        if ndim == 1:  # the hot path (token arrays): NumPy checks the dimensions
            try:
                n = np.array([len(c) for c in column], dtype=np.int64)
                longest = int(n.max())
                width = self._width(longest, True)
                if longest > width:
                    column = [c[:width] for c in column]
                    n = np.minimum(n, width)
                flat = np.concatenate(column)
            except (TypeError, ValueError):
                pass  # not all 1-D arrays: the checks below say which
            else:
                if flat.ndim == 1 and len(flat) == int(n.sum()):
                    return self._scatter(flat, n, width, fill, where), n
        for c in column:
            if not isinstance(c, np.ndarray) or c.ndim != ndim:
                got = c.ndim if isinstance(c, np.ndarray) else type(c).__name__
                raise CollateError(
                    f"cannot pad {where}: arrays of {ndim} and {got} dimensions in one batch"
                )
        n = np.array([c.shape[0] for c in column], dtype=np.int64)
        longest = int(n.max())
        width = self._width(longest, True)
        if longest > width:
            column = [c[:width] for c in column]
            n = np.minimum(n, width)
        if ndim == 1:
            return self._scatter(np.concatenate(column), n, width, fill, where), n
        rest = (self._width(max(c.shape[d] for c in column), False) for d in range(1, ndim))
        shape = (width, *rest)
        out = self._full((len(column), *shape), fill, np.result_type(*column), where)
        for row, c in zip(out, column, strict=True):
            row[tuple(slice(0, s) for s in c.shape)] = c
        return out, n

    def _scatter(
        self, flat: np.ndarray, n: np.ndarray, width: int, fill: Any, where: str
    ) -> np.ndarray:
        """Rows of lengths ``n``, concatenated in ``flat``, padded to ``width``."""
        out = self._full((len(n), width), fill, flat.dtype, where)
        out[np.arange(width) < n[:, None]] = flat
        return out

    @staticmethod
    def _full(shape: tuple[int, ...], fill: Any, dtype: Any, where: str) -> np.ndarray:
        try:
            return np.full(shape, fill, dtype=dtype)
        except (OverflowError, TypeError, ValueError) as exc:
            raise CollateError(
                f"cannot pad {where} with {fill!r}: {exc}; choose a pad_value that "
                f"{np.dtype(dtype)} can hold"
            ) from exc


def _sequence_kind(column: list[Any]) -> str:
    """How to pad ``column``: "arrays" (NumPy arrays), "numbers" (lists of numbers:
    token lists, empty ones too), "mixed" (lists of lists, or lists and arrays: made
    arrays first) or "" (not sequences: scalars, or lists holding a record's fields,
    such as ``[image, label]``)."""
    first = column[0]
    if isinstance(first, np.ndarray) and first.ndim >= 1:
        if first.ndim == 1 or all(type(c) is np.ndarray for c in column):
            return "arrays"  # 1-D: checked while padding, at no extra cost
    elif not isinstance(first, list):
        return ""
    lists = [c for c in column if isinstance(c, list)]
    if len(lists) + sum(isinstance(c, np.ndarray) and c.ndim >= 1 for c in column) < len(column):
        return ""  # something else among them: let collation name it
    head = next((c[0] for c in lists if c), None)
    if head is not None and not isinstance(head, (*_NUMBER, list)):
        return ""
    if len(lists) == len(column) and (head is None or isinstance(head, _NUMBER)):
        return "numbers"
    return "mixed"


_NUMBER = (int, float, np.number, np.bool_)


def _as_arrays(column: list[Any], where: str) -> list[np.ndarray]:
    try:
        arrays = [np.asarray(c) for c in column]
    except ValueError as exc:
        raise CollateError(f"cannot pad {where}: {exc}") from exc
    if any(a.dtype.kind not in "biufc" for a in arrays):
        raise CollateError(f"cannot pad {where}: nested lists that are not rectangular")
    return arrays


def _columns(records: Sequence[Any], where: str) -> dict[Any, list[Any]]:
    """The records' fields, column by column; every record must have the first's keys."""
    first = records[0]
    n = len(first)
    try:
        # Equal sizes, and every key of the first found in each: the same keys.
        if all(len(r) == n for r in records):
            return {k: [r[k] for r in records] for k in first}
    except (KeyError, TypeError, IndexError):
        pass
    bad = next(r for r in records if not isinstance(r, Mapping) or r.keys() != first.keys())
    got = sorted(bad, key=str) if isinstance(bad, Mapping) else type(bad).__name__
    raise CollateError(f"cannot collate {where}: keys {sorted(first, key=str)} vs {got}")
