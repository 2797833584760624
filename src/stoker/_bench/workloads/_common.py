"""Pieces shared by several workloads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

__all__ = ["BATCH_SIZE", "OrderSampler", "sequence_batches"]

BATCH_SIZE = 256


def sequence_batches(data: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """The expected batches of a sequence of ints read in order, as int64 arrays."""
    for start in range(0, len(data), batch_size):
        yield np.asarray(data[start : start + batch_size], dtype=np.int64)


class OrderSampler:
    """A PyTorch-compatible sampler that yields a fixed order of indices.

    Any iterable with ``__len__`` works as ``torch.utils.data.DataLoader(sampler=...)``,
    so this needs no torch import.
    """

    def __init__(self, order: np.ndarray) -> None:
        self._order = order

    def __iter__(self) -> Iterator[int]:
        return iter(self._order.tolist())

    def __len__(self) -> int:
        return len(self._order)
