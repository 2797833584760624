"""In-memory data handed to process workers as shared memory instead of a copy each.

A loader pickles its pipeline once for its process workers, inside
:func:`~stoker._shm.sharing_for_workers`. There, :func:`~stoker.from_sequence`
and :func:`~stoker.from_arrays` pickle their data as references to shared-memory
segments (:mod:`stoker._shm`): the data is copied into a segment once, every
worker maps the same pages, and memory does not grow with the number of workers. A
worker reading Python records no longer touches the parent's objects either, so the
copy-on-read growth that reference counting causes in forked workers does not happen.

* :class:`SharedRecords`: Python records, each pickled on its own, in one segment.
* :class:`SharedArray`: a C-contiguous copy of one NumPy array in one segment; it
  unpickles as a read-only NumPy array viewing the segment.

Any other pickling (saving a dataset or an iterator) copies the data as before.
"""

from __future__ import annotations

import io
import operator
import pickle
import threading
import types
import weakref
from array import array as IntArray
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import cloudpickle
import numpy as np

from .._shm import Segment, SegmentHandle, attach

__all__ = ["SharedArray", "SharedRecords", "share_lock", "shareable"]

share_lock = threading.RLock()
"""Held while a dataset creates its shared copy, so that two threads make only one.

Reentrant: a record may itself hold a dataset that shares its data while pickled.
"""

_CHUNK = 1 << 22
"""Pickled records are gathered in pieces of about this many bytes, each dropped as
soon as it is in the segment: the full data is never held twice."""


def _by_value(obj: Any) -> bool:
    """True for a class or function that a worker may not find by its name."""
    if not isinstance(obj, type | types.FunctionType):
        return False
    qualname = getattr(obj, "__qualname__", "")
    return obj.__module__ == "__main__" or "<locals>" in qualname or "<lambda>" in qualname


class _Pickler(pickle.Pickler):
    """Pickles classes and functions defined in ``__main__`` or in a function as numbers.

    The objects themselves go into ``objects``, which travels once with the reference
    to the segment (pickled by cloudpickle, so by value), instead of in every record.
    """

    def __init__(self, file: io.BytesIO, objects: list[Any], numbers: dict[int, int]) -> None:
        super().__init__(file, protocol=5)
        self._objects = objects
        self._numbers = numbers

    def persistent_id(self, obj: Any) -> int | None:
        if not _by_value(obj):
            return None
        number = self._numbers.get(id(obj))
        if number is None:
            number = self._numbers[id(obj)] = len(self._objects)
            self._objects.append(obj)
        return number


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: memoryview, objects: tuple[Any, ...]) -> None:
        super().__init__(io.BytesIO(data))
        self._objects = objects

    def persistent_load(self, pid: Any) -> Any:
        return self._objects[pid]


def _dumps(record: Any, objects: list[Any], numbers: dict[int, int]) -> bytes:
    """``record`` pickled with protocol 5; cloudpickle only where plain pickle cannot."""
    try:
        data = pickle.dumps(record, protocol=5)
        if b"__main__" not in data:  # nothing a worker might fail to import by name
            return data
    except (pickle.PicklingError, AttributeError, TypeError):
        pass
    file = io.BytesIO()
    try:
        _Pickler(file, objects, numbers).dump(record)
        return file.getvalue()
    except (pickle.PicklingError, AttributeError, TypeError):
        return cloudpickle.dumps(record, protocol=5)  # type: ignore[no-any-return]


class SharedRecords(Sequence[Any]):
    """Python records in one shared-memory segment; pickles as a small reference.

    The segment holds ``len + 1`` int64 offsets, then the records, each pickled on
    its own: record ``i`` is unpickled from ``payload[offsets[i]:offsets[i + 1]]``,
    so every read returns a fresh object.

    Example:
        >>> shared = SharedRecords.from_records(["a", {"b": 1}, None])
        >>> len(shared), shared.get(1), shared.get_many([2, 0])
        (3, {'b': 1}, [None, 'a'])
        >>> shared.close()

    Resources:
        Built by :meth:`from_records`, it owns its segment: the segment is released by
        :meth:`close` or when the object is garbage collected, after which no other
        process can attach it. Unpickled in another process, it maps the segment for
        as long as it lives; pickled again there, it pickles as a plain list.

    Errors:
        IndexError: an index outside ``[-len, len)``.
    """

    def __init__(
        self, segment: Segment, count: int, objects: tuple[Any, ...] = (), *, owner: bool
    ) -> None:
        head = 8 * (count + 1)
        self._segment = segment
        self._count = count
        self._objects = objects
        self._offsets: np.ndarray = segment.array[:head].view(np.int64)
        self._payload: memoryview = segment.array[head:].data
        self._load: Callable[[memoryview], Any] = (
            (lambda data: _Unpickler(data, objects).load()) if objects else pickle.loads
        )
        self._owner = owner
        if owner:
            self._release = weakref.finalize(self, segment.close)

    @classmethod
    def from_records(cls, records: Sequence[Any]) -> SharedRecords:
        """Pickle ``records`` one by one into a new segment owned by the result."""
        sizes = IntArray("q")
        chunks = [bytearray()]
        objects: list[Any] = []
        numbers: dict[int, int] = {}
        for record in records:
            data = _dumps(record, objects, numbers)
            sizes.append(len(data))
            chunks[-1] += data
            del data
            if len(chunks[-1]) >= _CHUNK:
                chunks.append(bytearray())
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(sizes, dtype=np.int64), out=offsets[1:])
        head = offsets.nbytes
        segment = Segment(head + int(offsets[-1]), "records")
        try:
            segment.array[:head] = offsets.view(np.uint8)
            position = head
            chunks.reverse()
            while chunks:
                chunk = chunks.pop()
                segment.array[position : position + len(chunk)] = np.frombuffer(chunk, np.uint8)
                position += len(chunk)
                del chunk  # each piece goes as soon as it is copied
        except BaseException:
            segment.close()
            raise
        return cls(segment, len(sizes), tuple(objects), owner=True)

    def __len__(self) -> int:
        return self._count

    def get(self, index: int) -> Any:
        """Record ``index``, unpickled afresh."""
        i = operator.index(index)
        if not -self._count <= i < self._count:
            raise IndexError(f"record {index} is out of range for {self._count} records")
        i %= self._count
        start, end = self._offsets[i : i + 2].tolist()
        return self._load(self._payload[start:end])

    def get_many(self, indices: Sequence[int] | np.ndarray) -> list[Any]:
        """The records at ``indices``, in that order, each unpickled afresh."""
        keys = np.asarray(indices, dtype=np.int64)
        if keys.ndim != 1:
            raise IndexError(f"indices must be one-dimensional, got shape {keys.shape}")
        if keys.size:
            lo, hi = int(keys.min()), int(keys.max())
            if lo < -self._count or hi >= self._count:
                bad = lo if lo < -self._count else hi
                raise IndexError(f"record {bad} is out of range for {self._count} records")
            if lo < 0:
                keys = keys % self._count
        starts = self._offsets[keys].tolist()
        ends = self._offsets[keys + 1].tolist()
        payload, load = self._payload, self._load
        return [load(payload[a:b]) for a, b in zip(starts, ends, strict=True)]

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.get_many(range(self._count)[index])
        return self.get(index)

    def __iter__(self) -> Iterator[Any]:
        for i in range(self._count):
            yield self.get(i)

    def close(self) -> None:
        """Release the segment now (idempotent); records already read stay valid."""
        if self._owner:
            self._release()

    def __reduce__(self) -> tuple[Any, ...]:
        if self._owner:
            return (_attach_records, (self._segment.handle, self._count, self._objects))
        return (list, (list(self),))  # the owner's handle may not outlive this copy

    def __repr__(self) -> str:
        return f"SharedRecords(len={self._count}, bytes={self._segment.size})"


def _attach_records(handle: SegmentHandle, count: int, objects: tuple[Any, ...]) -> SharedRecords:
    return SharedRecords(attach(handle), count, objects, owner=False)


def shareable(array: np.ndarray) -> bool:
    """True when ``array`` can live in a segment: it has bytes and holds no Python objects."""
    return array.nbytes > 0 and not array.dtype.hasobject


class SharedArray:
    """A C-contiguous copy of an array in its own segment, for process workers.

    The copy holds the elements ``array`` shows (a strided view copies only what
    it views, not its base). Pickled, it is a reference to the segment, and it
    unpickles in a worker as a read-only NumPy array of the same dtype and shape
    that views the segment.

    Example:
        >>> import numpy as np
        >>> shared = SharedArray(np.arange(12).reshape(3, 4)[:, ::2])
        >>> shared.array.tolist(), shared.array.flags.c_contiguous
        ([[0, 2], [4, 6], [8, 10]], True)
        >>> shared.close()

    Resources:
        It owns its segment, released by :meth:`close` or when the object is garbage
        collected; ``array`` stays valid in this process after that, but no other
        process can attach the segment any more. An unpickled array keeps its mapping
        alive for as long as it (or a view of it) lives.

    Errors:
        ValueError: ``array`` is empty or holds Python objects (see :func:`shareable`).
    """

    def __init__(self, array: np.ndarray) -> None:
        if not shareable(array):
            raise ValueError(
                f"cannot share an array of dtype {array.dtype} and shape {array.shape}: "
                "it is empty or holds Python objects"
            )
        segment = Segment(array.nbytes, "array")
        try:
            view = segment.array.view(array.dtype).reshape(array.shape)
            np.copyto(view, array, casting="no")
        except BaseException:
            segment.close()
            raise
        self.array: np.ndarray = view
        self._segment = segment
        self._release = weakref.finalize(self, segment.close)

    def close(self) -> None:
        """Release the segment now (idempotent)."""
        self._release()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_attach_array, (self._segment.handle, self.array.dtype, self.array.shape))

    def __repr__(self) -> str:
        return f"SharedArray({self.array.dtype}{list(self.array.shape)})"


def _attach_array(handle: SegmentHandle, dtype: np.dtype[Any], shape: tuple[int, ...]) -> Any:
    view = attach(handle).array.view(dtype).reshape(shape)
    view.flags.writeable = False  # one worker must not change what the others read
    return view
