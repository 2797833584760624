"""``as_dataset``: accept what a PyTorch user passes (sequences, torch datasets, iterables)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .._context import Context, Skip
from .._dataset import Dataset, DatasetNode
from .._iterdataset import IterDataset
from .._torch_types import is_torch_data
from ..errors import ConfigError
from .arrow import frame_kind, from_pandas, from_polars

__all__ = ["IndexableDataset", "IterableAdapter", "as_dataset"]


class IndexableDataset(DatasetNode[Any]):
    """Any object with ``__len__`` and ``__getitem__`` (a list, a PyTorch ``Dataset``).

    Uses the object's ``__getitems__`` for a whole batch when it has one.

    Example:
        >>> IndexableDataset(["a", "b"])[1]
        'b'
    """

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._bulk = callable(getattr(obj, "__getitems__", None))

    def __len__(self) -> int:
        return len(self._obj)

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[Any | Skip]:
        if self._bulk:
            return list(self._obj.__getitems__(indices.tolist()))
        obj = self._obj
        return [obj[i] for i in indices.tolist()]


class IterableAdapter(IterDataset[Any]):
    """Any re-iterable object (a PyTorch ``IterableDataset``); uses its
    ``state_dict``/``load_state_dict`` when it has them, else resumes by counting."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __iter__(self) -> Iterator[Any]:
        return iter(self._obj)

    def state_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = self._obj.state_dict()
        return result

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._obj.load_state_dict(state)


def as_dataset(obj: Any) -> Dataset[Any] | IterDataset[Any]:
    """Return ``obj`` as a stoker dataset.

    Example:
        >>> len(as_dataset([1, 2, 3]))
        3

    A Polars or pandas ``DataFrame`` is read as by ``sk.from_polars`` / ``sk.from_pandas``
    (records are rows as dicts), never as a sequence of one-row frames.

    Errors:
        ConfigError: a one-shot iterator (a generator), or an object that is neither
            indexable nor iterable.
    """
    if isinstance(obj, Dataset | IterDataset):
        return obj
    # A PyTorch IterableDataset is a stream, even with __len__ (and torch's __getitem__ stub).
    if is_torch_data(obj, "IterableDataset"):
        if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
            return IterableAdapter(obj)
        return _CountingAdapter(obj)
    kind = frame_kind(obj)
    if kind == "polars":  # indexing a frame gives one-row frames or columns, not records
        return from_polars(obj)
    if kind == "pandas":
        return from_pandas(obj)
    if hasattr(obj, "__len__") and hasattr(obj, "__getitem__") and not isinstance(obj, dict):
        return IndexableDataset(obj)
    if isinstance(obj, Iterator):
        raise ConfigError(
            f"{type(obj).__name__} is a one-shot iterator, which cannot be read again next "
            "epoch or after a restore; pass a factory: sk.from_iterable(lambda: make_records())"
        )
    if hasattr(obj, "__iter__"):
        if hasattr(obj, "state_dict") and hasattr(obj, "load_state_dict"):
            return IterableAdapter(obj)
        return _CountingAdapter(obj)
    raise ConfigError(
        f"cannot load from {type(obj).__name__}: pass a sk.Dataset, an object with __len__ "
        "and __getitem__, or an iterable"
    )


class _CountingAdapter(IterDataset[Any]):
    """A re-iterable object without state methods: resumes by counting records."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __iter__(self) -> Iterator[Any]:
        return iter(self._obj)
