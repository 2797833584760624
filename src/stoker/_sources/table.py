"""``TableDataset``: the base of every source whose records are rows of columns.

A table source is a *description* (paths, columns, a query): it pickles small, and
whatever it opens (files, connections, decoded blocks) is opened lazily, in each
worker, and left out of the pickle. It reads a whole batch in one call
(``_read_columns``), and the base turns those columns into records or into the
collated batch, written straight into the planned buffers.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode
from .columns import Columns, column_batch, column_records

__all__ = ["TableDataset"]


class TableDataset(DatasetNode[dict[str, Any]]):
    """Rows of a table as records (dicts column -> value), read a batch at a time.

    Subclasses implement ``__len__``, ``columns`` and ``_read_columns(indices)``, and
    list in ``_transient`` the attributes (open handles, caches) that each process
    opens for itself.

    Records hold numbers as NumPy scalars, strings as ``str``, binary as ``bytes`` and
    list columns as 1-D arrays. A batch is a dict column -> array (fixed-size lists
    as 2-D arrays; strings and binary as lists); list columns of varying length need
    ``collate_fn=sk.pad_collate`` or ``sk.pack``.
    """

    _transient: ClassVar[tuple[str, ...]] = ()

    @property
    def releases_gil(self) -> bool:
        return True  # reads run in Arrow, SQLite or NumPy

    @property
    def columns(self) -> list[str]:
        """The names of the columns read, in record order."""
        raise NotImplementedError

    def _read_columns(self, indices: np.ndarray) -> Columns:
        """The columns of the rows at ``indices`` (int64, in range), in that order."""
        raise NotImplementedError

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[dict[str, Any] | Skip]:
        return list(column_records(self._read_columns(indices)))

    def _fetch_columns(self, indices: np.ndarray, ctx: Context) -> Columns:
        return self._read_columns(indices)

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        return column_batch(self._read_columns(indices), out)

    def _column_lengths(self, key: str) -> Any:
        from .lengths import table_lengths

        return table_lengths(self, key)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in self._transient:
            state[name] = None
        return state

    def __repr__(self) -> str:
        return f"{type(self).__name__}(len={len(self)}, columns={self.columns})"
