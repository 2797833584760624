"""Read-ahead for framework adapters: place the next batches early, report the last one.

A device adapter wants the next ``depth`` batches already on their way to the
accelerator while the current step runs. ``PlacedIterator`` pulls batches from a
loader iterator, calls ``place`` on each as soon as it is pulled (an asynchronous
copy in PyTorch and JAX), and yields them in order. Its batches in flight are kept
by a job window (``stoker._window``), the one mechanism every loader pass uses: a
job pulls and places one batch, run on this thread as soon as it is planned. Its
``state_dict()`` is the state the source had right after the last batch *yielded*,
never after the ones held ahead, so a checkpoint taken in a training step resumes
exactly there.

``PlacedLoader`` is the re-iterable form: each ``iter()`` is a fresh pass of the
source (the next epoch of a :class:`~stoker.DataLoader`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from ._epoch.jobs import Done, Job
from ._exec.eager import EagerExecutor
from ._exec.jobs import Tally
from ._window import JobWindow
from .errors import ConfigError

__all__ = ["PlacedIterator", "PlacedLoader", "check_depth", "placed"]

T = TypeVar("T")
U = TypeVar("U")


def check_depth(depth: object) -> int:
    """``depth`` as batches held ahead, or a ConfigError saying what is allowed."""
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise ConfigError(f"prefetch must be an int >= 0 (batches placed ahead), got {depth!r}")
    return depth


def _state_of(source: object) -> dict[str, Any] | None:
    get = getattr(source, "state_dict", None)
    if get is None:
        return None
    state: dict[str, Any] = get()
    return state


class _PlacePlan(Generic[T, U]):
    """The plan of a read-ahead: each job pulls the next batch of ``source`` and
    places it; the batches come out in order, each with the source's state after it.

    It is a plan like the loader's (``stoker._epoch.plan.EpochPlan``), run by the
    same job window, so the read-ahead keeps its work in flight as every pass does.
    After the source ended or raised, no job is planned.
    """

    job_per_batch = False
    parts = 0

    def __init__(self, source: Iterator[T], place: Callable[[T], U]) -> None:
        self._source = source
        self._place = place
        self._seq = 0
        self._ended = False
        self._ready: deque[tuple[U, dict[str, Any] | None]] = deque()

    def next_job(self, token: int) -> Job | None:
        if self._ended:
            return None
        job = Job(self._seq, "local", (), f"batch {self._seq} read ahead", token=token)
        job.read = self._pull
        self._seq += 1
        return job

    def _pull(self) -> Done:
        try:
            batch = next(self._source)
        except StopIteration:
            self._ended = True
            return Done(_END)
        except Exception:
            self._ended = True  # raised in its turn, after the batches placed before it
            raise
        state = _state_of(self._source)
        try:
            placed = self._place(batch)
        except Exception:
            self._ended = True
            raise
        return Done((placed, state))

    def take(self, job: Job, done: Done) -> int | None:
        if done.value is not _END:
            self._ready.append(done.value)
        return None

    def ready(self, ended: bool) -> tuple[U, dict[str, Any] | None, int] | None:
        if not self._ready:
            return None
        placed, state = self._ready.popleft()
        return placed, state, 1  # state None: a source without state_dict()

    def wants(self, jobs: Sequence[Job]) -> Job | None:
        return jobs[0] if jobs else None

    def state(self) -> dict[str, Any]:
        return {}  # the iterator keeps the source's state (_state_of), not the window

    def final_state(self) -> dict[str, Any]:
        return {}

    def final_keep(self) -> object:
        return None

    def close(self) -> None:
        self._ended = True
        self._ready.clear()


_END = object()  # a job's value after the source's last batch


class PlacedIterator(Generic[T, U]):
    """Yields ``place(batch)`` for every batch of ``source``, placing ``depth`` ahead.

    The batches are pulled and placed by the jobs of a job window (the loader's own
    mechanism, ``stoker._window``) that runs each job on this thread as it plans it,
    ``depth`` jobs ahead of the batch handed out.

    ``finish`` (optional) runs on a placed batch just before it is yielded: PyTorch
    uses it to make the current CUDA stream wait for the copy.

    An error raised by the source or by ``place`` while reading ahead is raised only
    after the batches already placed were yielded, so the state stays that of the
    last good batch. Ctrl-C while the source waits for a batch leaves the batches
    held ahead as they were: the next ``next()`` goes on.

    Example:
        >>> import stoker as sk
        >>> loader = sk.DataLoader(sk.range(0, 6), batch_size=2)
        >>> it = PlacedIterator(iter(loader), lambda b: b * 10, depth=2)
        >>> next(it).tolist()
        [0, 10]
        >>> it.state_dict()["batches"]  # two more batches are held, but one was yielded
        1
    """

    def __init__(
        self,
        source: Iterator[T],
        place: Callable[[T], U],
        depth: int,
        finish: Callable[[U], U] | None = None,
    ) -> None:
        self._source = source
        self._finish = finish
        self._plan: _PlacePlan[T, U] = _PlacePlan(source, place)
        self._window = JobWindow(
            self._plan,  # type: ignore[arg-type]  # an EpochPlan in all the window asks
            Tally(0),
            EagerExecutor(),
            depth=check_depth(depth),  # the window keeps at least 1
            ordered=True,
            timeout=None,
            start_state={},
        )
        self._state = _state_of(source)
        self._ended = False

    def __iter__(self) -> Iterator[U]:
        return self

    def __next__(self) -> U:
        if self._ended:
            raise StopIteration
        try:
            placed, state, _ = self._window.get()
        except StopIteration:
            self._ended = True
            self._state = _state_of(self._source)  # the end: the next epoch's start
            raise
        except KeyboardInterrupt:
            raise  # the window and the source go on from where they were
        except BaseException:
            self._ended = True  # the source's error, after the batches placed before it
            raise
        self._state = state
        result: U = placed
        if self._finish is not None:
            result = self._finish(result)
        return result

    def state_dict(self) -> dict[str, Any]:
        """The source's state right after the last batch this iterator yielded.

        Errors:
            TypeError: the source has no ``state_dict()``.
        """
        if self._state is None:
            raise TypeError(
                f"{type(self._source).__name__} has no state_dict(); wrap a stoker "
                "DataLoader (or one of its iterators) to get a resumable state"
            )
        return self._state

    def stats(self) -> Any:
        """The source iterator's :class:`~stoker.LoaderStats`."""
        return self._source.stats()  # type: ignore[attr-defined]

    def close(self) -> None:
        """Drop the batches held ahead and close the source (idempotent)."""
        self._ended = True
        self._window.close()
        self._plan.close()
        close = getattr(self._source, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> PlacedIterator[T, U]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PlacedLoader(Generic[T, U]):
    """A re-iterable :class:`PlacedIterator`: each ``iter()`` starts a fresh pass.

    ``state_dict()`` / ``load_state_dict()`` follow the torchdata convention: the
    state of the most recent pass (after its last yielded batch), and the state the
    next pass starts from.
    """

    def __init__(
        self,
        source: Iterable[T],
        place: Callable[[T], U],
        depth: int,
        finish: Callable[[U], U] | None = None,
    ) -> None:
        self._source = source
        self._place = place
        self._depth = check_depth(depth)
        self._finish = finish
        self._last: PlacedIterator[T, U] | None = None

    @property
    def source(self) -> Iterable[T]:
        """The wrapped loader."""
        return self._source

    def __iter__(self) -> PlacedIterator[T, U]:
        it = PlacedIterator(iter(self._source), self._place, self._depth, self._finish)
        self._last = it
        return it

    def __len__(self) -> int:
        return len(self._source)  # type: ignore[arg-type]

    def state_dict(self) -> dict[str, Any]:
        """The most recent pass's state; before any pass, the source's own."""
        if self._last is not None and self._last._state is not None:
            return self._last.state_dict()
        state = _state_of(self._source)
        if state is None:
            raise TypeError(f"{type(self._source).__name__} has no state_dict()")
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` resume at ``state``."""
        load = getattr(self._source, "load_state_dict", None)
        if load is None:
            raise TypeError(f"{type(self._source).__name__} has no load_state_dict()")
        self._last = None
        load(state)


def placed(
    iterable: Iterable[T],
    place: Callable[[T], U],
    depth: int,
    finish: Callable[[U], U] | None = None,
) -> PlacedIterator[T, U] | PlacedLoader[T, U]:
    """What an adapter returns: one pass for an iterator, a re-iterable for a loader.

    Example:
        >>> import stoker as sk
        >>> type(placed(sk.range(0, 4), int, 2)).__name__
        'PlacedLoader'
        >>> type(placed(iter(sk.range(0, 4)), int, 2)).__name__
        'PlacedIterator'
    """
    if isinstance(iterable, Iterator):
        return PlacedIterator(iterable, place, depth, finish)
    return PlacedLoader(iterable, place, depth, finish)
