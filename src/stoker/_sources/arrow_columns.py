"""Arrow tables as :mod:`~stoker._sources.columns`: schema checks and the conversion.

Every Arrow-backed source (Parquet, Arrow, HuggingFace datasets, Lance, Polars)
checks its schema with :func:`check_schema` when it is built, so a column that does
not exist or has a type stoker cannot batch is an error before any record is read,
and converts the table of each batch with :func:`table_columns`: numbers without a
Python object per row, list columns as :class:`~stoker._sources.columns.Ragged`.

Needs ``pyarrow`` (``pip install 'stoker[arrow]'``); imported only by those sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from .columns import Columns, Ragged
from .extras import require

pa = require("pyarrow", "arrow")
pc = require("pyarrow.compute", "arrow")

__all__ = ["check_schema", "pa", "pc", "select_columns", "table_columns"]


def _numeric(t: Any) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_temporal(t)
    )


def _string(t: Any) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or getattr(pa.types, "is_string_view", lambda _: False)(t)
        or getattr(pa.types, "is_binary_view", lambda _: False)(t)
    )


def _list(t: Any) -> bool:
    return bool(
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or getattr(pa.types, "is_list_view", lambda _: False)(t)
    )


def _fixed_list_leaf(t: Any) -> Any:
    """The numeric leaf type of nested fixed-size lists, or None."""
    while pa.types.is_fixed_size_list(t):
        t = t.value_type
    return t if _numeric(t) else None


def _supported(t: Any) -> bool:
    if pa.types.is_dictionary(t):
        return _supported(t.value_type)
    if _numeric(t) or _string(t):
        return True
    if pa.types.is_fixed_size_list(t):
        return _fixed_list_leaf(t) is not None
    if _list(t):
        value = t.value_type
        return bool(
            _numeric(value) or (pa.types.is_fixed_size_list(value) and _fixed_list_leaf(value))
        )
    return False


def select_columns(names: Sequence[str], columns: Sequence[str] | None, what: str) -> list[str]:
    """``columns`` checked against the ``names`` that exist (all of them for None).

    Errors:
        ConfigError: a column that does not exist (the message lists those that do),
            or an empty or repeated selection.
    """
    if columns is None:
        return list(names)
    if isinstance(columns, str):
        raise ConfigError(
            f"columns must be a list of names, got the string {columns!r}: use [{columns!r}]"
        )
    chosen = list(columns)
    if not chosen:
        raise ConfigError(f"columns=[] selects nothing from {what}: leave it None for every column")
    missing = [c for c in chosen if c not in names]
    if missing:
        raise ConfigError(f"{what} has no column {missing[0]!r}; its columns are {list(names)}")
    if len(set(chosen)) != len(chosen):
        raise ConfigError(f"columns {chosen} name a column twice")
    return chosen


def check_schema(schema: Any, columns: Sequence[str] | None, what: str) -> list[str]:
    """The columns to read from ``schema``, each of a type stoker can batch.

    Example:
        >>> import pyarrow as pa
        >>> check_schema(pa.schema([("x", pa.int32()), ("t", pa.list_(pa.int32()))]), None, "t")
        ['x', 't']

    Errors:
        ConfigError: a missing column (the message names those that exist) or a column
            of a type with no batch form (nested lists, structs, maps, decimals): the
            message names the column and its type.
    """
    chosen = select_columns(schema.names, columns, what)
    for name in chosen:
        t = schema.field(name).type
        if not _supported(t):
            raise ConfigError(
                f"column {name!r} of {what} has type {t}, which stoker cannot batch "
                "(supported: numbers, booleans, dates and times, strings, binary, lists and "
                "fixed-size lists of numbers); leave it out with columns=[...] or convert it "
                "with a map"
            )
    return chosen


def _nulls(array: Any, name: str) -> None:
    if array.null_count:
        raise ValueError(
            f"column {name!r} has {array.null_count} null value(s), which have "
            "no NumPy form: fill them in the data (pyarrow.compute.fill_null) or drop "
            "the rows, or leave the column out with columns=[...]"
        )


def _to_numpy(array: Any, name: str) -> np.ndarray:
    """A contiguous (possibly multi-dimensional) NumPy array for a numeric or fixed-list array."""
    t = array.type
    if pa.types.is_fixed_size_list(t):
        _nulls(array, name)
        width = t.list_size
        inner = _to_numpy(array.flatten(), name)
        return inner.reshape(len(array), width, *inner.shape[1:])
    _nulls(array, name)
    result: np.ndarray = array.to_numpy(zero_copy_only=False)
    return result


def array_column(array: Any, name: str) -> np.ndarray | Ragged | list[Any]:
    """One Arrow array (not chunked) as a column of a batch."""
    t = array.type
    if pa.types.is_dictionary(t):
        return array_column(array.dictionary_decode(), name)
    if _string(t):
        values: list[Any] = array.to_pylist()
        return values
    if _list(t):
        _nulls(array, name)
        if getattr(pa.types, "is_list_view", lambda _: False)(t):
            array = array.cast(pa.large_list(t.value_type))
        lengths = pc.list_value_length(array).to_numpy(zero_copy_only=False).astype(np.int64)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = _to_numpy(array.flatten(), name)
        return Ragged(flat, offsets)
    return _to_numpy(array, name)


def table_columns(table: Any) -> Columns:
    """Every column of an Arrow table (or record batch) as a column of a batch.

    Example:
        >>> import pyarrow as pa
        >>> cols = table_columns(pa.table({"x": [1, 2], "t": [[1], [2, 3]], "s": ["a", "b"]}))
        >>> cols["x"].tolist(), [r.tolist() for r in cols["t"].rows()], cols["s"]
        ([1, 2], [[1], [2, 3]], ['a', 'b'])
    """
    columns: Columns = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        columns[name] = array_column(column, name)
    return columns
