"""The pipeline for process workers, with ``multiprocessing`` objects passed at start.

A ``multiprocessing.Value``, ``Array``, ``Lock``, ``Queue`` (and the like) may only
reach another process by inheritance: as an argument of the ``Process`` being
started, where multiprocessing pickles it with the handles the child needs (or, with
``fork``, the child simply has it). Pickled into bytes earlier, it fails with
"Synchronized objects should only be shared between processes through inheritance".

So :func:`dumps_keeping_inherited` cloudpickles the pipeline with every such object
replaced by a number and returns the objects apart; the executor passes both to the
worker as ``Process`` arguments, and :func:`loads_with_inherited` puts them back. A
dataset holding a shared counter or a lock then works under every start method, as
with PyTorch's loader.
"""

from __future__ import annotations

import io
import pickle
import types
from multiprocessing import connection, queues, sharedctypes, synchronize
from multiprocessing.reduction import ForkingPickler
from typing import Any

import cloudpickle

from .pickling import dumps_for_workers

__all__ = ["dumps_keeping_inherited", "loads_with_inherited"]

_INHERITED = (
    synchronize.SemLock,  # Lock, RLock, Semaphore
    synchronize.Condition,
    sharedctypes.SynchronizedBase,  # Value, Array
    queues.Queue,  # and JoinableQueue
    queues.SimpleQueue,
    connection.Connection,
)


def _inherited(obj: object) -> bool:
    """True for an object that only inheritance can give to a child process."""
    if isinstance(obj, _INHERITED):
        return True
    # RawValue / RawArray: ctypes objects in multiprocessing's shared heap.
    reducers: dict[type, Any] = getattr(ForkingPickler, "_extra_reducers", {})
    return type(obj) in reducers and hasattr(obj, "_wrapper")


class _Pickler(cloudpickle.Pickler):  # type: ignore[misc]
    def __init__(self, file: io.BytesIO, kept: list[Any], met: list[Any] | None) -> None:
        super().__init__(file, protocol=5)
        self._kept = kept
        self._numbers: dict[int, int] = {}
        self._met = met

    def persistent_id(self, obj: Any) -> int | None:
        if self._met is not None and isinstance(obj, types.FunctionType | type):
            self._met.append(obj)
        if not _inherited(obj):
            return None
        number = self._numbers.get(id(obj))
        if number is None:
            number = self._numbers[id(obj)] = len(self._kept)
            self._kept.append(obj)
        return number


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, kept: list[Any]) -> None:
        super().__init__(io.BytesIO(data))
        self._kept = kept

    def persistent_load(self, pid: Any) -> Any:
        return self._kept[pid]


def dumps_keeping_inherited(value: Any, met: list[Any] | None = None) -> tuple[bytes, list[Any]]:
    """``value`` cloudpickled, and the objects to pass at process start, kept apart;
    the functions and classes the pickle met are added to ``met`` when it is given.

    Example:
        >>> import multiprocessing
        >>> counter = multiprocessing.get_context("spawn").Value("i", 7)
        >>> data, kept = dumps_keeping_inherited({"count": counter})
        >>> kept == [counter], loads_with_inherited(data, kept)["count"] is counter
        (True, True)

    Errors:
        NotPicklable: naming the part of ``value`` that cannot be sent.
    """
    kept: list[Any] = []
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, kept, met).dump(value)
    except (TypeError, pickle.PicklingError, AttributeError):
        return dumps_for_workers(value), []  # raises, naming the part that fails
    return buffer.getvalue(), kept


def loads_with_inherited(data: bytes, kept: list[Any]) -> Any:
    """The inverse of :func:`dumps_keeping_inherited`, in the worker."""
    return _Unpickler(data, kept).load()
