"""``Dataset.lengths``: one length per record, for token-budget batching.

A table source answers for a column from the column alone (Arrow list offsets and
string lengths, or its decoded blocks read in order); any other dataset reads its
records in blocks and measures them with ``len(record[key])`` or ``key(record)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._context import Context, Skip
from ..errors import ConfigError, NotSupportedError

__all__ = ["column_lengths", "record_lengths"]

_BLOCK = 8192


def record_lengths(dataset: Any, key: str | Callable[[Any], int]) -> NDArray[np.int64]:
    """The length of every record of a map-style ``dataset`` (see ``Dataset.lengths``)."""
    if isinstance(key, str):
        fast = dataset._column_lengths(key)
        if fast is not NotImplemented:
            return np.asarray(fast, dtype=np.int64)
        measure: Callable[[Any], int] = lambda record: len(record[key])  # noqa: E731
    elif callable(key):
        measure = key
    else:
        raise ConfigError(
            f"lengths() takes a column or key name, or a function of a record, got {key!r}"
        )
    if dataset.may_skip:
        raise NotSupportedError(
            "lengths() of a filtered dataset: a removed record has no length; take the "
            "lengths before the filter, or filter by length in the batch sampler"
        )
    n = len(dataset)
    out = np.empty(n, dtype=np.int64)
    ctx = Context(0, 0)
    for start in range(0, n, _BLOCK):
        idx = np.arange(start, min(n, start + _BLOCK), dtype=np.int64)
        for offset, record in enumerate(dataset._fetch(idx, ctx)):
            if isinstance(record, Skip):
                raise NotSupportedError(f"record {start + offset} was removed: it has no length")
            try:
                out[start + offset] = int(measure(record))
            except (KeyError, TypeError, IndexError) as exc:
                raise ConfigError(
                    f"cannot measure record {start + offset} with {key!r}: {exc!r}"
                ) from exc
    return out


def column_lengths(columns: Any, key: str) -> NDArray[np.int64]:
    """Lengths of one column of a batch of columns (``stoker._sources.columns``)."""
    from .columns import Ragged

    col = columns[key]
    if isinstance(col, Ragged):
        return np.asarray(col.lengths(), dtype=np.int64)
    if isinstance(col, np.ndarray):
        if col.ndim < 2:
            raise ConfigError(f"column {key!r} holds scalars: it has no length per record")
        return np.full(col.shape[0], col.shape[1], dtype=np.int64)
    return np.array([len(v) for v in col], dtype=np.int64)


def arrow_lengths(array: Any, key: str) -> NDArray[np.int64]:
    """Lengths of an Arrow (chunked) array of lists, strings or binary, from offsets."""
    from .extras import require

    pa = require("pyarrow", "arrow")
    pc = require("pyarrow.compute", "arrow")
    kind = array.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        lengths = pc.list_value_length(array)
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        lengths = pc.utf8_length(array)
    elif pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        lengths = pc.binary_length(array)
    else:
        raise ConfigError(f"column {key!r} is {kind}: it has no length per record")
    return np.asarray(lengths.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)


def table_lengths(dataset: Any, key: str) -> NDArray[np.int64]:
    """A table source's column lengths, read in blocks in row order."""
    if key not in dataset.columns:
        raise ConfigError(f"no column {key!r}: the source has {dataset.columns}")
    n = len(dataset)
    parts = [
        column_lengths(dataset._read_columns(np.arange(s, min(n, s + 65536), dtype=np.int64)), key)
        for s in range(0, n, 65536)
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
