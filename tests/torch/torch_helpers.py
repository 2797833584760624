"""Datasets and comparisons shared by the PyTorch adapter tests.

The datasets live in a module of their own so that worker processes started by
any method can import them by name.
"""

from __future__ import annotations

import collections
import random
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

Pair = collections.namedtuple("Pair", "index label")


def assert_same(a: Any, b: Any, where: str = "batch") -> None:
    """Exactly the same batch: structure and container types, tensor dtypes and values."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{where}: tensor vs {type(b).__name__}"
        assert a.dtype == b.dtype, f"{where}: {a.dtype} vs {b.dtype}"
        assert a.shape == b.shape, f"{where}: {tuple(a.shape)} vs {tuple(b.shape)}"
        assert torch.equal(a, b), f"{where}: {a} vs {b}"
        return
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys {list(a)} vs {list(b)}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, list | tuple):
        assert len(a) == len(b), f"{where}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def assert_same_batches(expected: list[Any], got: list[Any]) -> None:
    assert len(expected) == len(got), f"{len(expected)} batches vs {len(got)}"
    for k, (a, b) in enumerate(zip(expected, got, strict=True)):
        assert_same(a, b, f"batch {k}")


class Records(Dataset):  # type: ignore[type-arg]
    """Records of every kind ``default_collate`` handles."""

    def __init__(self, n: int = 11) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {
            "tensor": torch.full((2, 3), i, dtype=torch.float32),
            "long": torch.tensor(i),
            "array": np.arange(4, dtype=np.int16) * i,
            "int": i,
            "float": i / 4,
            "bool": i % 3 == 0,
            "np_scalar": np.float32(i) / 2,
            "str": f"record-{i}",
            "tuple": (i, f"t{i}", np.uint8(i)),
            "pair": Pair(i, f"p{i}"),
            "list": [i, i * 2],
        }


class Tuples(Dataset):  # type: ignore[type-arg]
    """(tensor, label) pairs, as most vision datasets yield."""

    def __init__(self, n: int = 10) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.arange(3, dtype=torch.float64) + i, i


class Bulk(Dataset):  # type: ignore[type-arg]
    """A dataset that reads a whole batch in one ``__getitems__`` call."""

    def __init__(self, n: int = 12) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        raise AssertionError("__getitems__ should be used")

    def __getitems__(self, indices: list[int]) -> list[tuple[int, float]]:
        return [(i, i * 0.5) for i in indices]


class Range(IterableDataset):  # type: ignore[type-arg]
    """``range(start, end)``, split between workers with ``get_worker_info()``
    (the example of PyTorch's documentation)."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end

    def __iter__(self) -> Any:
        info = get_worker_info()
        if info is None:
            return iter(range(self.start, self.end))
        per_worker = -(-(self.end - self.start) // info.num_workers)
        start = self.start + info.id * per_worker
        return iter(range(start, min(start + per_worker, self.end)))


class WholeRange(IterableDataset):  # type: ignore[type-arg]
    """``range(start, end)`` configured by a ``worker_init_fn`` (PyTorch's other example)."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end

    def __len__(self) -> int:
        return self.end - self.start

    def __iter__(self) -> Any:
        return iter(range(self.start, self.end))


def split_range(worker_id: int) -> None:
    """The ``worker_init_fn`` of PyTorch's documentation: configure this worker's copy."""
    info = get_worker_info()
    assert info is not None
    assert info.id == worker_id
    dataset = info.dataset
    start, end = dataset.start, dataset.end
    per_worker = -(-(end - start) // info.num_workers)
    dataset.start = start + worker_id * per_worker
    dataset.end = min(dataset.start + per_worker, end)


class WorkerDraws(Dataset):  # type: ignore[type-arg]
    """Each record says which worker built it, its seeds and one draw of every RNG."""

    def __init__(self, n: int = 24) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, Any]:
        info = get_worker_info()
        assert info is not None
        return {
            "index": i,
            "worker": info.id,
            "num_workers": info.num_workers,
            "seed": info.seed,
            "initial_seed": torch.initial_seed(),
            "own_dataset": isinstance(info.dataset, WorkerDraws),
            "threads": torch.get_num_threads(),
            "numpy": int(np.random.randint(1 << 30)),
            "random": random.random(),
            "torch": int(torch.randint(1 << 30, ()).item()),
        }


def reseed_numpy(worker_id: int) -> None:
    """A ``worker_init_fn`` that seeds NumPy by the worker id only."""
    np.random.seed(1000 + worker_id)


def seed_from_torch(worker_id: int) -> None:
    """The ``seed_worker`` recipe of PyTorch's reproducibility notes."""
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


def first_label(records: list[tuple[Any, int]]) -> dict[str, Any]:
    """A custom ``collate_fn`` returning something ``default_collate`` would not."""
    return {"labels": [r[1] for r in records], "count": len(records)}


def label_of(record: tuple[Any, int]) -> dict[str, Any]:
    """A custom ``collate_fn`` for ``batch_size=None``: called on each record."""
    return {"label": record[1], "values": record[0]}
