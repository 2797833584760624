"""``SequentialSampler``: the indices in order, the same every epoch."""

from __future__ import annotations

from collections.abc import Sized

import numpy as np

from .base import EpochOrder, IndexArray, IndexCursor, Sampler, SamplerCursor, as_length

__all__ = ["SequentialSampler"]


class _Ascending(EpochOrder):
    def indices(self, start: int, stop: int) -> IndexArray:
        return np.arange(start, stop, dtype=np.int64)


class SequentialSampler(Sampler):
    """The indices ``0, 1, ..., n - 1``, in every epoch.

    Args:
        n: the number of indices, or a sized object (a dataset) whose length it is.

    Example:
        >>> from stoker import SequentialSampler
        >>> SequentialSampler(4).cursor(epoch=7).take(10).tolist()
        [0, 1, 2, 3]

    Errors:
        ConfigError: ``n`` is negative or neither an int nor sized.
        StateError: ``restore`` with a state from another kind of sampler or length.
    """

    def __init__(self, n: int | Sized) -> None:
        super().__init__()
        self._n = as_length(n, "SequentialSampler(n)")

    @property
    def source_len(self) -> int:
        return self._n

    def __len__(self) -> int:
        return self._n

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        return IndexCursor(self, _Ascending(), epoch, position)

    def __repr__(self) -> str:
        return f"SequentialSampler({self._n})"
