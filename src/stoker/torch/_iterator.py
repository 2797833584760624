"""The drop-in loader's iterator, and the lifetime of its (non-persistent) workers."""

from __future__ import annotations

import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import stoker as sk

from .._iterator import LoaderIterator
from .._state import TORCH
from ._gradient_state import PassProgress
from ._tensors import pinned

__all__ = ["TorchLoaderIterator", "WorkerLife"]


class WorkerLife:
    """Ends a loader's workers when no iterator reads any more, unless they persist.

    PyTorch starts workers for every iterator and ends them with it, unless
    ``persistent_workers=True``; each new set starts with a new base seed. stoker's
    workers live as long as their loader; closing them when the last iterator ends
    gives the next iterator fresh workers, seeded afresh, as in PyTorch.
    """

    def __init__(self, loader: sk.DataLoader[Any], persistent: bool) -> None:
        self._loader = loader
        self._persistent = persistent
        self._active = 0
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        """An iterator is reading."""
        with self._lock:
            return self._active > 0

    def enter(self) -> None:
        """An iterator starts."""
        with self._lock:
            self._active += 1

    def leave(self) -> None:
        """An iterator ended (exhausted, closed or collected)."""
        with self._lock:
            self._active -= 1
            idle = self._active == 0
        if idle and not self._persistent:
            self._loader.close()


def _end(source: LoaderIterator[Any], life: WorkerLife, progress: PassProgress | None) -> None:
    source.close()
    life.leave()
    if progress is not None:
        progress.leave()


def _none_left(source: LoaderIterator[Any]) -> bool:
    """No batch follows the one just read (False when that is not known before reading)."""
    try:
        return len(source) == 0
    except TypeError:
        return False


def _too_many(name: str, length: int, yielded: int, workers: int) -> str:
    """PyTorch's warning, word for word, for an ``IterableDataset`` that yields more
    batches than the ``len(dataset)`` read by ``len(loader)``."""
    message = (
        f"Length of IterableDataset {name} was reported to be {length}"
        f"(when accessing len(dataloader)), but {yielded} samples have been fetched. "
    )
    if workers > 0:
        message += (
            "For multiprocessing data-loading, this could be caused by not properly configuring "
            "the IterableDataset replica at each worker. Please see "
            "https://pytorch.org/docs/stable/data.html#torch.utils.data.IterableDataset for "
            "examples."
        )
    return message


class TorchLoaderIterator:
    """One pass of a :class:`stoker.torch.DataLoader`: batches shaped as PyTorch's.

    Resources:
        Holds the workers it reads from until it is exhausted, closed or collected;
        then, without ``persistent_workers``, the loader's workers end.
    """

    def __init__(
        self,
        source: LoaderIterator[Any],
        shape: Callable[[Any], Any],
        pin: bool,
        life: WorkerLife,
        length: Callable[[], int],
        *,
        extra: Callable[[bool], dict[str, Any]],
        len_called: int | None = None,
        name: str = "",
        progress: PassProgress | None = None,
        workers: int = 0,
    ) -> None:
        self._source = source
        self._shape = shape
        self._pin = pin
        self._length = length
        self._extra = extra
        self._len_called = len_called
        self._name = name
        self._workers = workers
        self._yielded = 0
        self._done = False
        self._progress = progress  # Accelerate's GradientState reads it, when there is one
        self._finalizer = weakref.finalize(self, _end, source, life, progress)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            batch = next(self._source)
        except StopIteration:
            self._done = True
            self._finalizer()
            raise
        self._yielded += 1
        if self._progress is not None and _none_left(self._source):
            self._progress.last_batch()
        if self._len_called is not None and self._yielded > self._len_called:
            message = _too_many(self._name, self._len_called, self._yielded, self._workers)
            warnings.warn(message, stacklevel=2)
        batch = self._shape(batch)
        return pinned(batch) if self._pin else batch

    def __len__(self) -> int:
        return self._length()

    def state_dict(self) -> dict[str, Any]:
        """The JSON-serialisable state right after the last batch yielded (see
        :meth:`stoker.LoaderIterator.state_dict`), with the workers' base seed and a
        stateful sampler's state (see :meth:`stoker.torch.DataLoader.state_dict`)."""
        return {**self._source.state_dict(), TORCH: self._extra(self._done)}

    def stats(self) -> sk.LoaderStats:
        """Counters and a bottleneck verdict of this pass so far."""
        return self._source.stats()

    def close(self) -> None:
        """Stop loading (idempotent); without persistent workers, they end."""
        self._finalizer()

    def __enter__(self) -> TorchLoaderIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
