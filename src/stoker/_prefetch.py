"""``Prefetcher``: a bounded window of results produced ahead of the consumer.

With ``depth >= 1`` one background thread runs ``produce()`` until ``depth`` results
wait in the window, so loading overlaps the training step. With ``depth == 0`` the
caller's thread produces each result when asked.

``depth=None`` decides from the first ``_PROBES`` results, produced on the caller's
thread: it times producing a result (p) and the caller's work between two ``get()``
calls (g, the training step). A background thread can hide at most min(p, g) per
result, and a hand-off between threads costs ~10-30 µs on an idle interpreter and
~50 µs when both threads run Python (they take turns on the GIL). So the thread
starts, with a window of ``DEFAULT_DEPTH``, only when the median of min(p, g) is at
least ``THREAD_THRESHOLD``; otherwise results stay on the caller's thread, where the
hand-off would cost more than the overlap could win.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ._config import DEFAULT_DEPTH
from ._deadline import remaining, timeout_error
from ._exec.threads import contained
from .errors import IteratorFailed, LoaderTimeout, StateError, WorkerCrashed

__all__ = [
    "DEFAULT_DEPTH",
    "THREAD_THRESHOLD",
    "Prefetcher",
    "is_batch_error",
    "remaining",
    "timeout_error",
]

Item = tuple[Any, dict[str, Any], int]


T = TypeVar("T")


def is_batch_error(exc: BaseException) -> bool:
    """True for an error of one batch (raised by user code: a dataset, a map, a
    collate function), after which the next batch can still be loaded.

    Ctrl-C and ``SystemExit``, a crashed worker, a closed loader and a state that
    does not fit end the pass instead.

    Example:
        >>> is_batch_error(ValueError("bad record")), is_batch_error(KeyboardInterrupt())
        (True, False)
    """
    return isinstance(exc, Exception) and not isinstance(
        exc, WorkerCrashed | IteratorFailed | StateError
    )


class Raised:
    """An error of one batch, kept in the window in that batch's place."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


THREAD_THRESHOLD = 200e-6
_PROBES = 4
_JOIN_SECONDS = 5.0


class Prefetcher(Generic[T]):
    """Runs ``produce`` (None, or raising ``StopIteration``, means "no more") ahead of :meth:`get`.

    Example:
        >>> items = iter(range(3))
        >>> p = Prefetcher(lambda: next(items, None), depth=1, timeout=None, name="demo")
        >>> [p.get(), p.get(), p.get()]
        [0, 1, 2]
        >>> p.close()

    Resources:
        Owns at most one daemon thread. :meth:`close` (idempotent) stops it and wakes
        every wait; the owner calls it when it is closed or garbage collected.

    Errors:
        An exception raised by ``produce`` is re-raised by the next :meth:`get`;
        with ``keep_going``, an error of one batch (:func:`is_batch_error`) leaves
        the following results to come, else it is the last.
        :class:`~stoker.errors.LoaderTimeout` when nothing arrives within ``timeout``.
    """

    def __init__(
        self,
        produce: Callable[[], T | None],
        depth: int | None,
        timeout: float | None,
        name: str,
        *,
        keep_going: bool = False,
    ) -> None:
        self._produce = produce
        self._keep_going = keep_going
        self._depth = depth
        self._timeout = timeout
        self._name = name
        self._cond = threading.Condition()
        self._window: deque[T | Raised] = deque()
        self._error: BaseException | None = None
        self._finished = False  # the producer returned None or raised
        self._closed = False
        self._thread: threading.Thread | None = None
        self._probe_seconds: list[float] = []  # min(produce, caller's work) per result
        # False once Ctrl-C interrupted a result being produced on the caller's thread
        # (it may be half made); Ctrl-C while waiting for a result loses nothing.
        self.intact = True
        self._returned_at: float | None = None
        self.produce_seconds = 0.0
        self.wait_seconds = 0.0
        self.idle_seconds = 0.0  # the background thread waited for room in a full window

    @property
    def thread(self) -> threading.Thread | None:
        """The background thread, once started."""
        return self._thread

    @property
    def depth(self) -> int:
        """Results produced ahead (0: on the caller's thread)."""
        return self._depth or 0 if self._thread is not None else 0

    @property
    def mode(self) -> str:
        """Where results are produced: "background thread" or "caller thread"."""
        if self._thread is not None:
            return f"background thread, {self._depth} in flight"
        if self._depth is None:
            return "caller thread (deciding)"
        return "caller thread"

    def get(self) -> T:
        """The next result; ``StopIteration`` after the last one."""
        if self._thread is None:
            if self._depth == 0 or (self._depth is None and not self._decide()):
                return self._get_inline()
            self._start()
        return self._get_threaded()

    def _decide(self) -> bool:
        """True once the probes say a background thread pays off."""
        if len(self._probe_seconds) < _PROBES:
            return False
        if statistics.median(self._probe_seconds[:_PROBES]) < THREAD_THRESHOLD:
            self._depth = 0
            return False
        self._depth = DEFAULT_DEPTH
        return True

    def _get_inline(self) -> T:
        if self._closed or self._finished:
            raise StopIteration
        start = time.perf_counter()
        try:
            item = self._produce()
        except StopIteration:
            item = None
        except LoaderTimeout:
            raise  # the producer is waiting on workers: asking again may succeed
        except BaseException as exc:
            if not (self._keep_going and is_batch_error(exc)):
                self._finished = True
            if isinstance(exc, KeyboardInterrupt):
                self.intact = False
            raise
        end = time.perf_counter()
        self.produce_seconds += end - start
        self.wait_seconds += end - start  # the caller waited while it was produced
        if self._depth is None:
            if self._returned_at is not None:
                self._probe_seconds.append(min(end - start, start - self._returned_at))
            self._returned_at = end
        if item is None:
            self._finished = True
            raise StopIteration
        return item

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        cond, window, depth = self._cond, self._window, self._depth or DEFAULT_DEPTH
        while True:
            with cond:
                if len(window) >= depth:  # full: the consumer is the limit (for the stats)
                    idle = time.perf_counter()
                    while len(window) >= depth and not self._closed:
                        cond.wait()
                    self.idle_seconds += time.perf_counter() - idle
                if self._closed:
                    return
            start = time.perf_counter()
            try:
                item = self._produce()
            except StopIteration:
                item = None
            except BaseException as raised:
                exc = contained(raised, "the prefetch thread")  # sys.exit() ends no program
                if isinstance(exc, KeyboardInterrupt):
                    self.intact = False  # raised by the producer: the pass ends here
                with cond:
                    if self._keep_going and is_batch_error(exc):
                        window.append(Raised(exc))  # in its batch's place; go on
                        cond.notify_all()
                        continue
                    self._error, self._finished = exc, True
                    cond.notify_all()
                return
            self.produce_seconds += time.perf_counter() - start
            with cond:
                if item is None:
                    self._finished = True
                else:
                    window.append(item)
                cond.notify_all()
                if item is None:
                    return

    def _get_threaded(self) -> T:
        cond = self._cond
        start = time.perf_counter()
        deadline = None if self._timeout is None else start + self._timeout
        with cond:
            while not self._window:
                if self._closed:
                    raise StopIteration
                if self._finished:
                    error, self._error = self._error, None
                    self.wait_seconds += time.perf_counter() - start
                    if error is not None:
                        raise error
                    raise StopIteration
                left = remaining(deadline)
                if left is not None and left <= 0:
                    raise timeout_error(self._timeout)
                cond.wait(left)  # Ctrl-C: nothing lost
            item = self._window[0]
            self._window.popleft()
            cond.notify_all()
        self.wait_seconds += time.perf_counter() - start
        if isinstance(item, Raised):
            raise item.error
        return item

    def close(self) -> None:
        """Stop producing, drop the results in flight, and end the thread."""
        with self._cond:
            self._closed = True
            self._window.clear()
            self._cond.notify_all()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(_JOIN_SECONDS)
