"""The exceptions stoker raises.

Every error stoker raises on purpose derives from :class:`StokerError`::

    StokerError
    ├── StateError (also ValueError)   a saved state that does not fit this loader
    ├── ConfigError (also ValueError)  an argument that cannot work, raised when the loader is built
    │   └── NotPicklable (also TypeError)  a part of the pipeline that cannot go to process workers
    ├── CollateError (also ValueError) records that cannot be stacked into one batch
    ├── NotSupportedError              a combination stoker does not offer (yet)
    │   └── MissingExtra (also ImportError)  a source's optional dependency is not installed
    ├── FilteredOut (also LookupError) ``ds[i]`` on a record that a filter removed
    ├── IteratorFailed (also RuntimeError)  ``next()`` on an iterator that already raised
    ├── WorkerError                    an exception in a worker that could not be rebuilt as itself
    │   └── WorkerCrashed              a worker process died (signal, segfault, out of memory)
    ├── LoaderTimeout (also TimeoutError)  no batch arrived within ``timeout`` seconds
    ├── RecordValueError (also ValueError)  a value read from a source that does not fit its column
    ├── TarShardError (also ValueError)  a tar shard with an unsafe member, truncated or corrupt
    ├── RemoteReadError (also OSError)  a remote read that failed on every try its budget allowed
    └── DecodeError (also ValueError)  an image that cannot be decoded (``stoker.vision``)

Errors raised by user code (a ``map`` function, a dataset's ``__getitem__``) reach the
caller as their own type, with the sample index and batch index attached as notes.
"""

from __future__ import annotations

__all__ = [
    "CollateError",
    "ConfigError",
    "DecodeError",
    "FilteredOut",
    "IteratorFailed",
    "LoaderTimeout",
    "MissingExtra",
    "NotPicklable",
    "NotSupportedError",
    "RecordValueError",
    "RemoteReadError",
    "StateError",
    "StokerError",
    "TarShardError",
    "WorkerCrashed",
    "WorkerError",
]


class StokerError(Exception):
    """Root of every error that stoker raises on purpose."""


class ConfigError(StokerError, ValueError):
    """An argument or a combination of arguments that cannot work.

    Raised when the loader or dataset is built, before any record is read.
    """


class StateError(StokerError, ValueError):
    """A saved state that does not fit the loader it is restored into.

    The message says which field differs (dataset length, seed, batch size, ...)
    and what the state expected.
    """


class CollateError(StokerError, ValueError):
    """Records of one batch that cannot be stacked, e.g. arrays of different shapes."""


class NotSupportedError(StokerError, NotImplementedError):
    """A feature or combination of options that stoker does not offer (yet)."""


class NotPicklable(ConfigError, TypeError):
    """A part of the pipeline that cannot be sent to process workers.

    The message names the part (``.dataset.fn``, ``[0]``, ...) and how to make it
    picklable or open it in each worker. Also a ``TypeError`` (what pickling raises),
    so existing handlers still catch it.
    """


class MissingExtra(NotSupportedError, ImportError):
    """An optional dependency that a source needs is not installed.

    The message names the ``pip install 'stoker[extra]'`` that installs it.
    """


class RecordValueError(StokerError, ValueError):
    """A value read from a source that does not fit its column's kind.

    The kind was fixed when the dataset was built; the message names the column and
    the row, and how to make the data fit (a cast in the query, ``dtypes=``).
    """


class FilteredOut(StokerError, LookupError):
    """``dataset[i]`` was asked for a record that a ``filter`` removed."""


class IteratorFailed(StokerError, RuntimeError):
    """``next()`` on a loader iterator after loading raised (or was interrupted) in it.

    The iterator does not pretend the epoch ended. Its ``state_dict()`` is still the
    state after the last batch it yielded: resume from there with a new iterator.
    The original exception is the ``__cause__``.
    """


class WorkerError(StokerError):
    """An exception raised in a worker that could not be re-raised as its own type.

    Attributes:
        sample_index: the dataset index of the record being loaded, if known.
        batch_index: the index of the batch (within its epoch) being built, if known.
        worker_traceback: the traceback text as formatted in the worker.
    """

    def __init__(
        self,
        message: str,
        *,
        sample_index: int | None = None,
        batch_index: int | None = None,
        worker_traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.sample_index = sample_index
        self.batch_index = batch_index
        self.worker_traceback = worker_traceback


class WorkerCrashed(WorkerError):
    """A worker process ended without reporting an error (killed by a signal, crashed).

    Attributes:
        pid: the worker's process id, where it is known.
        signal: the signal that ended it (9 for SIGKILL), or None when it exited.
    """

    pid: int | None = None
    signal: int | None = None


class LoaderTimeout(StokerError, TimeoutError):
    """No batch arrived within the loader's ``timeout``."""


class TarShardError(StokerError, ValueError):
    """A tar shard that cannot be read safely: an unsafe member, a truncated or corrupt file."""


class RemoteReadError(StokerError, OSError):
    """A remote read (an fsspec URL) that failed on every try its retry budget allowed.

    The store kept answering with throttling (HTTP 429, 503), server errors, resets,
    timeouts or truncated bodies. The message names the URL, the tries made, the
    time they took and the last answer, and how to get through: a bigger budget
    (``retry=sk.RetryPolicy(attempts=..., total_seconds=...)``) or fewer requests in
    flight (``concurrency=``). Also an ``OSError``, as every other failed read is.

    Attributes:
        url: the URL that could not be read.
        attempts: the tries made.
        last_error: the last answer or exception, in words (``"HTTP 503 (...)"``).
        seconds: the time from the first try to the last failure.
    """

    url: str
    attempts: int
    last_error: str
    seconds: float
    _budget: int

    def __init__(
        self, url: str, attempts: int, last_error: str, seconds: float, budget: int = 0
    ) -> None:
        budget = budget or attempts
        super().__init__(
            f"reading {url!r} failed {attempts} times over {seconds:.1f} s (last: "
            f"{last_error}); the store is throttling or failing: raise the budget "
            f"(retry=stoker.RetryPolicy(attempts={2 * budget}, total_seconds=...)) or "
            "send fewer requests at once (a lower concurrency= on the source, or fewer "
            "workers)"
        )
        self.url = url
        self.attempts = attempts
        self.last_error = last_error
        self.seconds = seconds
        self._budget = budget

    def __reduce__(self) -> tuple[object, ...]:
        args = (self.url, self.attempts, self.last_error, self.seconds, self._budget)
        return (type(self), args, dict(self.__dict__))  # notes and the sample index too


class DecodeError(StokerError, ValueError):
    """An image that cannot be decoded: corrupt, truncated, or not an image.

    The message names the file when the record says which it is (a ``from_files``
    path, a tar shard's member). In a loader, a note (PEP 678) adds the sample index,
    the batch and the file the source read the record from; ``on_error="skip"``
    skips such records.
    """
