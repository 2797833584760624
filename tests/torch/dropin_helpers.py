"""Datasets and samplers for the drop-in tests of PyTorch behaviours users rely on.

They live in a module of their own so that worker processes started by any method
can import them by name.
"""

from __future__ import annotations

import multiprocessing.sharedctypes
import random
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info


class Indexed(Dataset):  # type: ignore[type-arg]
    """Record ``i`` is ``i``; a list of indices (bulk loading) gives ``[100 * i, ...]``."""

    def __init__(self, n: int = 10) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, list):
            return torch.tensor(index) * 100
        return torch.tensor(index)


class Growing(Dataset):  # type: ignore[type-arg]
    """A list that may grow after the loader is built."""

    def __init__(self, n: int) -> None:
        self.items = list(range(n))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> int:
        return self.items[i]


class ShuffledShards(IterableDataset):  # type: ignore[type-arg]
    """Each worker shuffles its shard with ``random`` (seeded by the worker's base seed)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        info = get_worker_info()
        wid, count = (0, 1) if info is None else (info.id, info.num_workers)
        mine = list(range(wid, self.n, count))
        random.shuffle(mine)
        return iter(mine)


class Failing(Dataset):  # type: ignore[type-arg]
    """Record ``i`` is ``i``, but reading ``bad`` raises ``ValueError``."""

    def __init__(self, n: int = 10, bad: int = 3) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            raise ValueError(f"bad record {i}")
        return i


class CountedStream(IterableDataset):  # type: ignore[type-arg]
    """A stream with its own state (torchdata's ``Stateful``): the next record."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.next = 0

    def __iter__(self) -> Iterator[int]:
        while self.next < self.n:
            self.next += 1
            yield self.next - 1

    def state_dict(self) -> dict[str, Any]:
        return {"next": self.next}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.next = state["next"]


class SelfIterator(IterableDataset):  # type: ignore[type-arg]
    """A dataset that is its own iterator, with its own state."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.i = 0

    def __iter__(self) -> SelfIterator:
        return self

    def __next__(self) -> int:
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i - 1

    def state_dict(self) -> dict[str, Any]:
        return {"i": self.i}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.i = state["i"]


class EpochCountingSampler:
    """A sampler whose order depends on how many epochs it has walked (its state)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.epochs = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[int]:
        shift = self.epochs
        self.epochs += 1
        return iter([(i + 3 * shift) % self.n for i in range(self.n)])

    def state_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.epochs = state["epochs"]


class SharedCounter(Dataset):  # type: ignore[type-arg]
    """Counts reads in a ``multiprocessing.Value`` under a ``Lock``, and keeps a ``Queue``."""

    def __init__(self, ctx: Any, n: int = 8) -> None:
        self.n = n
        self.count: multiprocessing.sharedctypes.Synchronized[int] = ctx.Value("i", 0)
        self.lock = ctx.Lock()
        self.queue = ctx.Queue()

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        with self.lock:
            self.count.value += 1
        return i
