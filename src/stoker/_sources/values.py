"""Column kinds of the row sources (SQLite, JSONL, CSV): fixed once, checked per batch.

SQLite is dynamically typed, and JSON and CSV carry no schema at all, so a column's
kind is decided when the dataset is built (from a declared type or a sample of rows)
and every batch is converted to it. A value that does not fit is a
:class:`RecordValueError` naming the column and the row, never a batch of another
dtype:

============  ===================  ==========================================
kind          batch column         missing value (NULL, JSON null, empty CSV)
============  ===================  ==========================================
``"int"``     int64 array          error
``"float"``   float64 array        NaN
``"bool"``    bool array           error
``"str"``     list of ``str``      error
``"bytes"``   list of ``bytes``    error
``"list[int]"``    :class:`Ragged`  error (JSON lists of ints: int64 values)
``"list[float]"``  :class:`Ragged`  error (JSON lists of numbers: float64 values)
``"object"``  list of values       kept as ``None``
============  ===================  ==========================================
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import RecordValueError
from .columns import Column, Ragged

__all__ = ["KINDS", "RecordValueError", "infer_kind", "take_rows", "to_column"]

KINDS = ("int", "float", "bool", "str", "bytes", "list[int]", "list[float]", "object")


def _python_kind(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes"
    if isinstance(value, list) and all(_number(v) for v in value):
        if not value:
            return "list"
        return "list[int]" if all(isinstance(v, int) for v in value) else "list[float]"
    return "object"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def infer_kind(values: Sequence[Any]) -> str | None:
    """The kind of a column from a sample of its values (None: only missing values).

    Ints and floats together make ``"float"``; any other mix makes ``"object"``.

    Example:
        >>> infer_kind([1, 2.5, None]), infer_kind(["a"]), infer_kind([[1], [2, 3]])
        ('float', 'str', 'list[int]')
    """
    kinds = {_python_kind(v) for v in values} - {None}
    if "list" in kinds:  # an empty list fits either list kind
        kinds = (kinds - {"list"}) or {"list[float]"}
    if not kinds:
        return None
    if kinds == {"int", "float"}:
        return "float"
    if kinds == {"list[int]", "list[float]"}:
        return "list[float]"
    if len(kinds) == 1:
        return kinds.pop()
    return "object"


def _bad(
    values: Sequence[Any],
    kind: str,
    name: str,
    where: Callable[[int], str],
    ok: Callable[[Any], bool],
) -> RecordValueError:
    row = next((i for i, v in enumerate(values) if not ok(v)), 0)
    value = values[row] if values else None
    what = "a missing value (NULL/null/empty)" if value is None else f"{value!r:.60}"
    return RecordValueError(
        f"column {name!r} holds {what} at {where(row)}, but its kind was fixed as {kind!r} "
        "when the dataset was built: make the data fit (a CAST or COALESCE in an SQL "
        "query, dtypes= for CSV), or read the column as another kind"
    )


def to_column(values: Sequence[Any], kind: str, name: str, where: Callable[[int], str]) -> Column:
    """The batch column of ``values`` (one per row) converted to ``kind``.

    ``where(row)`` describes a row for error messages.

    Example:
        >>> to_column([1.5, None], "float", "x", str).tolist()
        [1.5, nan]

    Errors:
        RecordValueError: a value that does not fit ``kind`` (naming column and row).
    """
    n = len(values)
    if kind in ("int", "float", "bool"):
        want = {"int": np.int64, "float": np.float64, "bool": np.bool_}[kind]
        allowed = {"int": "i", "float": "if", "bool": "b"}[kind]
        if n == 0:
            return np.empty(0, dtype=want)
        array = np.array(values)
        if array.dtype.kind == "O" and kind == "float":
            array = np.array([np.nan if v is None else v for v in values])
        if array.dtype.kind not in allowed or array.ndim != 1:
            if kind == "float":
                ok: Callable[[Any], bool] = _number
            elif kind == "int":
                ok = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
            else:
                ok = lambda v: isinstance(v, bool)  # noqa: E731
            raise _bad(values, kind, name, where, ok)
        return array.astype(want, copy=False)
    if kind == "str":
        if set(map(type, values)) - {str}:
            raise _bad(values, kind, name, where, lambda v: type(v) is str)
        return list(values)
    if kind == "bytes":
        if set(map(type, values)) - {bytes}:
            raise _bad(values, kind, name, where, lambda v: type(v) is bytes)
        return list(values)
    if kind in ("list[int]", "list[float]"):
        if not all(type(v) is list for v in values):
            raise _bad(values, kind, name, where, lambda v: type(v) is list)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(v) for v in values], out=offsets[1:])
        flat = list(itertools.chain.from_iterable(values))
        array = np.array(flat) if flat else np.empty(0, dtype=np.int64)
        allowed = "i" if kind == "list[int]" else "if"
        if array.dtype.kind not in allowed or array.ndim != 1:
            raise _bad(
                values,
                kind,
                name,
                where,
                lambda v: all(
                    _number(x) and (kind == "list[float]" or isinstance(x, int)) for x in v
                ),
            )
        return Ragged(array.astype(np.int64 if kind == "list[int]" else np.float64), offsets)
    return list(values)


def take_rows(column: Column, positions: np.ndarray) -> Column:
    """The rows of ``column`` at ``positions``, in that order.

    Example:
        >>> take_rows(["a", "b"], np.array([1, 1, 0]))
        ['b', 'b', 'a']
    """
    if len(positions) == len(column) and (np.diff(positions) == 1).all():
        return column
    if isinstance(column, np.ndarray):
        taken: np.ndarray = column[positions]
        return taken
    if isinstance(column, Ragged):
        lengths = column.lengths()[positions]
        offsets = np.zeros(len(positions) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        starts = column.offsets[:-1][positions]
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
        return Ragged(column.values[gather], offsets)
    return [column[i] for i in positions.tolist()]
