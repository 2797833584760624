"""``from_sequence``: records held in a Python sequence (a list, a tuple, ...)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode
from .._shm import is_sharing
from ..errors import ConfigError
from .shared import SharedArray, SharedRecords, share_lock

__all__ = ["InMemoryDataset", "from_sequence"]

T = TypeVar("T")

_NUMERIC = {int: np.int64, float: np.float64, bool: np.bool_}


def _numeric_copy(seq: Sequence[Any]) -> np.ndarray | None:
    """A NumPy copy of ``seq`` when every element is a Python int, float or bool of one type."""
    if len(seq) == 0:
        return None
    kind = type(seq[0])
    dtype = _NUMERIC.get(kind)
    if dtype is None or set(map(type, seq)) != {kind}:
        return None
    try:
        array: np.ndarray = np.asarray(seq, dtype=dtype)
    except (OverflowError, ValueError, TypeError):  # ints beyond int64
        return None
    return array if array.shape == (len(seq),) else None


def _hint(obj: object) -> str:
    if isinstance(obj, np.ndarray):
        return "use sk.from_arrays(array) for NumPy arrays"
    return "use sk.from_iterable(factory) for streams, or wrap it with list(...)"


class InMemoryDataset(DatasetNode[T]):
    """The records of a Python sequence, by index; built by :func:`from_sequence`.

    The sequence is referenced, not copied: do not change it while it is in use.
    A sequence of plain ints, floats or bools (all of one type) also gets a compact
    NumPy copy, which serves whole batches with one vectorised gather and is what
    a pickled dataset carries.

    Process workers share one copy instead of each unpickling its own: when the
    loader pickles the pipeline for them, the records are pickled one by one into
    a shared-memory segment (the NumPy copy, when there is one, is copied into a
    segment as is), and a worker reads record ``i`` from there. That copy is made
    the first time and reused by every later loader over this dataset.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_sequence(["a", "b", "c"])
        >>> len(ds), ds[1]
        (3, 'b')

    Resources:
        The shared copy, once made, belongs to this dataset: its segment is released
        when the dataset is garbage collected. A worker's copy of the dataset maps
        the segment for as long as that copy lives.

    Errors:
        ConfigError: ``seq`` is not a sequence (see :func:`from_sequence`).
    """

    _shared: SharedRecords | SharedArray | None = None

    def __init__(self, seq: Sequence[T]) -> None:
        if not isinstance(seq, Sequence):
            raise ConfigError(
                f"from_sequence() needs a sequence (list, tuple, ...), "
                f"got {type(seq).__name__}: {_hint(seq)}"
            )
        self._seq: Sequence[T] = seq
        self._len = len(seq)
        self._array = _numeric_copy(seq)
        self._shared = None

    @property
    def releases_gil(self) -> bool:
        return True  # list lookups

    def __len__(self) -> int:
        return self._len

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        array = self._array
        if array is not None:
            # tolist() turns int64/float64/bool back into the exact Python objects.
            return array.take(indices, None, None, "clip").tolist()  # type: ignore[no-any-return]
        if isinstance(self._seq, SharedRecords):  # in a process worker
            return self._seq.get_many(indices)
        keys = indices.tolist()
        if len(keys) > 1:
            return list(operator.itemgetter(*keys)(self._seq))
        return [self._seq[i] for i in keys]

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        array = self._array
        if array is None:
            return NotImplemented
        return array.take(indices, 0, out, "clip")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_shared"] = None
        if self._array is not None:
            state["_seq"] = ()  # the array holds the same records, more compactly
        if is_sharing() and self._len:
            shared = self._share()
            state["_array" if self._array is not None else "_seq"] = shared
        return state

    def _share(self) -> SharedRecords | SharedArray:
        """The copy of the records that process workers map (made once, then cached)."""
        with share_lock:
            if self._shared is None:
                array = self._array
                self._shared = (
                    SharedRecords.from_records(self._seq) if array is None else SharedArray(array)
                )
            return self._shared


def from_sequence(seq: Sequence[T]) -> InMemoryDataset[T]:
    """A map-style dataset over the records of a list, a tuple or any ``Sequence``.

    Args:
        seq: the records; kept by reference, so do not change it while it is in use.

    Returns:
        An :class:`InMemoryDataset` whose record ``i`` is ``seq[i]``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_sequence([10, 20, 30]).map(lambda x: x + 1)
        >>> ds[2]
        31

    Errors:
        ConfigError: ``seq`` is not a ``Sequence`` (a generator, a set, a NumPy array);
            the message points to :func:`from_iterable` or :func:`from_arrays`.
    """
    return InMemoryDataset(seq)
