"""``batch_size=None`` with a sampler: each item the sampler yields reads ``dataset[item]``.

PyTorch's loader without automatic batching calls ``dataset[item]`` for every item
its sampler yields: an index, or a whole list of indices when the sampler yields
lists (bulk loading: one ``__getitem__`` call for many records). stoker's jobs carry
integer indices, so :class:`ItemBatches` turns each item into a one-job batch of
indices and :class:`ItemReader` reads it back: an index ``i`` travels as ``[i]``, a
list ``[a, b]`` as ``[n + a, n + b]`` (``n`` is the dataset's length), which tells a
list of one index from an index.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode

__all__ = ["FirstRecord", "ItemBatches", "ItemReader"]


class ItemBatches:
    """A batch sampler over ``sampler``'s items, encoded as the module says.

    Example:
        >>> list(ItemBatches([2, [0, 1]], [5, 6, 7]))
        [[2], [3, 4]]
    """

    def __init__(self, sampler: Any, dataset: Any) -> None:
        self.sampler = sampler
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.sampler)

    def __iter__(self) -> Iterator[list[int]]:
        n = len(self.dataset)
        for item in self.sampler:
            if isinstance(item, list | tuple | np.ndarray) or _is_vector(item):
                yield [n + operator.index(i) for i in item]
            else:
                yield [operator.index(item)]


def _is_vector(item: Any) -> bool:
    ndim = getattr(item, "ndim", None)
    return isinstance(ndim, int) and ndim > 0


class ItemReader(DatasetNode[Any]):
    """The dataset seen through :class:`ItemBatches`: length ``2 n``, one record a job."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return 2 * len(self.dataset)

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[Any | Skip]:
        n = len(self.dataset)
        keys = indices.tolist()
        if len(keys) == 1 and keys[0] < n:
            return [self.dataset[keys[0]]]
        return [self.dataset[[k - n for k in keys]]]


class FirstRecord:
    """The ``collate_fn`` of an item job: the user's ``collate_fn`` on its one record."""

    def __init__(self, collate_fn: Any) -> None:
        self.collate_fn = collate_fn

    def __call__(self, records: list[Any]) -> Any:
        (record,) = records
        return self.collate_fn(record)
