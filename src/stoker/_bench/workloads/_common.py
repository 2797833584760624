"""Pieces shared by several workloads."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = [
    "BATCH_SIZE",
    "IndexFn",
    "OrderSampler",
    "QuietTorchLoader",
    "index_batches",
    "sequence_batches",
]

BATCH_SIZE = 256


def sequence_batches(data: Sequence[int], batch_size: int) -> Iterator[np.ndarray]:
    """The expected batches of a sequence of ints read in order, as int64 arrays."""
    for start in range(0, len(data), batch_size):
        yield np.asarray(data[start : start + batch_size], dtype=np.int64)


def int_record(index: int, length: int) -> np.ndarray:
    """A small int64 record: ``length * index + arange(length)``."""
    return np.arange(length, dtype=np.int64) + length * int(index)


def int_record_batches(n: int, batch_size: int, length: int) -> Iterator[np.ndarray]:
    """The batches of the records ``int_record(0 .. n - 1, length)``, in order."""
    for start in range(0, n, batch_size):
        stop = min(n, start + batch_size)
        yield np.stack([int_record(i, length) for i in range(start, stop)])


def index_batches(order: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """``order`` cut into consecutive batches of ``batch_size`` indices (the last may be short)."""
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


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


class IndexFn:
    """A map-style dataset for torch: record ``i`` is ``fn(i)``, for ``i`` below ``length``.

    ``fn`` must be picklable (a module-level function) when torch uses spawn or
    forkserver workers.
    """

    def __init__(self, length: int, fn: Callable[[int], Any]) -> None:
        self._length = length
        self._fn = fn

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Any:
        return self._fn(index)


# torch warns when num_workers is above its suggestion for the machine (the core count);
# the workloads that go beyond it do so on purpose (they wait on simulated I/O).
_TOO_MANY_WORKERS = "This DataLoader will create"


class QuietTorchLoader:
    """``torch.utils.data.DataLoader(dataset, **kwargs)`` without its too-many-workers warning.

    Building the loader and each ``iter()`` run with that one warning ignored; the
    batches come straight from torch's own iterator.
    """

    def __init__(self, torch: Any, dataset: Any, **kwargs: Any) -> None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _TOO_MANY_WORKERS, UserWarning)
            self._loader = torch.utils.data.DataLoader(dataset, **kwargs)

    def __iter__(self) -> Iterator[Any]:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", _TOO_MANY_WORKERS, UserWarning)
            return iter(self._loader)
