"""``shard``: every ``count``-th record starting at ``index``, in equal parts."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from .._context import Context, Skip
from .._dataset import Dataset, UnaryNode
from .._hosts import Shard
from ..errors import ConfigError

__all__ = ["ShardDataset"]

T = TypeVar("T")


class ShardDataset(UnaryNode[T]):
    """Record ``i`` is ``parent[index + i * count]``; every shard has ``len // count`` records.

    The last ``len(parent) % count`` records belong to no shard, so that every
    host or worker reads the same number of records. Built by ``Dataset.shard``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(7).shard(2, 3)
        >>> len(ds), ds[0], ds[1]
        (2, 2, 5)

    Errors:
        ConfigError: ``index`` outside ``[0, count)``, ``count < 1``, or fewer
            records than shards (every shard would be empty).
    """

    _keeps_indices = False  # its index i is another index of its parent

    def __init__(self, parent: Dataset[T], index: int, count: int) -> None:
        shard = Shard(index, count)
        n = len(parent)
        if n < shard.count:
            raise ConfigError(
                f"shard({index}, {count}) of a dataset with {n} records would be empty: "
                f"use at most {n} shards"
            )
        super().__init__(parent)
        self._index = shard.index
        self._count = shard.count
        self._len = n // shard.count

    def _parent_indices(self, indices: np.ndarray) -> np.ndarray:
        if self._count == 1:
            return indices
        return indices * self._count + self._index

    def _parent_index(self, index: int, ctx: Context) -> int:
        return index * self._count + self._index

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        return self._parent._fetch(self._parent_indices(indices), ctx.child(0))

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        return self._parent._gather(self._parent_indices(indices), ctx.child(0), out)

    def __repr__(self) -> str:
        return f"ShardDataset(index={self._index}, count={self._count}, len={self._len})"
