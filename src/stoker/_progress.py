"""Progress: a tqdm bar and periodic log lines, both drawn from ``it.stats()``.

The hot path costs one clock read per batch: the bar is updated, the stats are
taken and a log line is written only every :data:`REFRESH_SECONDS` (bar) or
``log_every`` seconds (log), however small the batches.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any, Generic

from typing_extensions import TypeVar

from ._stats import LoaderStats

if TYPE_CHECKING:
    from tqdm import tqdm

__all__ = [
    "DEFAULT_LOG_EVERY",
    "REFRESH_SECONDS",
    "Monitor",
    "Progress",
    "logger",
    "progress",
    "stats_while_alive",
]

logger = logging.getLogger("stoker")
"""The ``stoker`` logger: periodic one-line summaries are INFO records of it."""

DEFAULT_LOG_EVERY = 60.0
"""Seconds between summaries when the ``stoker`` logger is enabled for INFO and
``log_every`` is not given."""

REFRESH_SECONDS = 0.5
"""Seconds between updates of a progress bar."""

B = TypeVar("B", default=Any)


def stats_while_alive(ref: weakref.ref[Any]) -> Callable[[], LoaderStats | None]:
    """``ref()``'s stats while it lives: a monitor must not keep its iterator alive."""

    def stats() -> LoaderStats | None:
        it = ref()
        return it.stats() if it is not None else None

    return stats


class Monitor:
    """Updates a progress bar and writes log lines from an iterator's counters.

    ``stats`` returns the iterator's :class:`~stoker.LoaderStats` (or None once it is
    gone); ``total`` is the number of batches expected (None: unknown).

    Example:
        >>> import io, stoker as sk
        >>> it = iter(sk.DataLoader(sk.range(0, 8), batch_size=4))
        >>> out = io.StringIO()
        >>> m = Monitor(it.stats, total=2, bar=True, log_every=None, file=out, desc="demo")
        >>> for _ in it:
        ...     m.tick()
        >>> m.close()
        >>> "2/2" in out.getvalue()
        True

    Resources:
        Owns a tqdm bar when ``bar`` is true; :meth:`close` (idempotent) closes it.
    """

    def __init__(
        self,
        stats: Callable[[], LoaderStats | None],
        *,
        total: int | None,
        bar: bool,
        log_every: float | None,
        file: IO[str] | None = None,
        desc: str | None = None,
    ) -> None:
        self._stats = stats
        self._total = total
        self._desc = desc or "stoker"
        self._bar: tqdm[Any] | None = None
        if bar:
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                desc=self._desc,
                unit="batch",
                file=file,
                mininterval=REFRESH_SECONDS,
                dynamic_ncols=True,
            )
        self._log_every: float | None = None
        if log_every is not None or logger.isEnabledFor(logging.INFO):
            self._log_every = DEFAULT_LOG_EVERY if log_every is None else log_every
        now = time.perf_counter()
        self._pending = 0
        self._batches = 0
        self._next_bar = now + REFRESH_SECONDS if self._bar is not None else float("inf")
        self._next_log = now + self._log_every if self._log_every is not None else float("inf")
        self._next = min(self._next_bar, self._next_log)
        self._closed = False

    @property
    def active(self) -> bool:
        """True when there is a bar to update or a log to write."""
        return self._bar is not None or self._log_every is not None

    def tick(self) -> None:
        """Count one batch; refresh the bar or log a line when their time has come."""
        self._pending += 1
        now = time.perf_counter()
        if now >= self._next:
            self._flush(now)

    def _flush(self, now: float) -> None:
        self._batches += self._pending
        pending, self._pending = self._pending, 0
        stats = self._stats()
        if self._bar is not None and now >= self._next_bar:
            if stats is not None:
                self._bar.set_postfix_str(postfix(stats), refresh=False)
            self._bar.update(pending)
            self._next_bar = now + REFRESH_SECONDS
        elif self._bar is not None:
            self._bar.update(pending)
        if self._log_every is not None and now >= self._next_log:
            if stats is not None:
                logger.info("%s", summary(stats, self._desc, self._total))
            self._next_log = now + self._log_every
        self._next = min(self._next_bar, self._next_log)

    def close(self, *, finished: bool = False) -> None:
        """Bring the bar up to date and close it; log a last summary at the end of a
        pass (``finished``) when logging is on (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._batches += self._pending
        stats = self._stats()
        if self._bar is not None:
            if stats is not None:
                self._bar.set_postfix_str(postfix(stats), refresh=False)
            self._bar.update(self._pending)
            self._bar.close()
        self._pending = 0
        if finished and self._log_every is not None and stats is not None:
            logger.info("%s (done)", summary(stats, self._desc, self._total))


def postfix(stats: LoaderStats) -> str:
    """The bar's postfix: samples/s and the verdict's kind and stage."""
    verdict = stats.verdict
    kind = verdict.kind + (f" ({verdict.stage})" if verdict.stage else "")
    return f"{stats.samples_per_second:,.0f} samples/s, {kind}"


def summary(stats: LoaderStats, desc: str, total: int | None) -> str:
    """One log line: progress, rates and the verdict."""
    done = f"{stats.batches:,}" + (f"/{total:,}" if total is not None else "")
    return (
        f"{desc}: {done} batches, {stats.samples_per_second:,.0f} samples/s, "
        f"{stats.batches_per_second:,.1f} batches/s; {stats.bottleneck}"
    )


class Progress(Generic[B]):
    """An iterator that shows a tqdm bar while it passes on another's batches.

    Built by :func:`progress`. It has the wrapped iterator's ``state_dict()`` and
    ``stats()``, and ``len()`` where the wrapped iterator has one.

    Resources:
        Owns the bar; it closes at the end of the pass, on :meth:`close`, or on
        leaving a ``with`` block.
    """

    def __init__(self, iterator: Iterator[B], *, file: IO[str] | None, desc: str | None) -> None:
        self._it = iterator
        stats = getattr(iterator, "stats", None)
        self._stats_of = stats if callable(stats) else None
        total: int | None
        try:
            total = len(iterator)  # type: ignore[arg-type]
        except TypeError:
            total = None
        self._monitor = Monitor(
            self._stats, total=total, bar=True, log_every=None, file=file, desc=desc
        )

    def _stats(self) -> LoaderStats | None:
        stats = self._stats_of() if self._stats_of is not None else None
        return stats if isinstance(stats, LoaderStats) else None

    def __iter__(self) -> Progress[B]:
        return self

    def __next__(self) -> B:
        try:
            batch = next(self._it)
        except StopIteration:
            self._monitor.close(finished=True)
            raise
        self._monitor.tick()
        return batch

    def __len__(self) -> int:
        return len(self._it)  # type: ignore[arg-type]

    def state_dict(self) -> dict[str, Any]:
        """The wrapped iterator's state."""
        state: dict[str, Any] = self._it.state_dict()  # type: ignore[attr-defined]
        return state

    def stats(self) -> LoaderStats | None:
        """The wrapped iterator's :class:`~stoker.LoaderStats` (None if it has none)."""
        return self._stats()

    def close(self) -> None:
        """Close the bar and the wrapped iterator (idempotent)."""
        self._monitor.close()
        close = getattr(self._it, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> Progress[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress(
    loader: Iterable[B], *, file: IO[str] | None = None, desc: str | None = None
) -> Progress[B]:
    """Iterate ``loader`` (a loader or one of its iterators) with a tqdm progress bar.

    The bar shows batches against the total where it is known (``len(it)``), and in
    its postfix the samples per second and the verdict of ``it.stats()``; it is
    refreshed twice a second, not every batch. ``file`` is where the bar is drawn
    (stderr by default).

    Example:
        >>> import io, stoker as sk
        >>> loader = sk.DataLoader(sk.range(0, 10), batch_size=5)
        >>> out = io.StringIO()
        >>> [b.tolist() for b in sk.progress(loader, file=out)]
        [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
        >>> "2/2" in out.getvalue()
        True
    """
    return Progress(iter(loader), file=file, desc=desc)
