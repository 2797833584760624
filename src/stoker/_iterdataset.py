"""``IterDataset[T]``: a stream of records, read in order, that resumes from a state.

Like :class:`~stoker.Dataset`, a stream is an immutable description: chaining
methods (``map``, ``filter``, ``shuffle``, ``batch``) build new nodes, and nothing is
read until it is iterated. The loader opens a stream through ``_open(ctx, state)``,
which returns a cursor: an iterator whose ``state_dict()`` is the JSON state from
which ``_open`` resumes right after the last record it gave. User-written
subclasses follow PyTorch's stateful protocol instead (``__iter__``, and optionally
``state_dict`` / ``load_state_dict``); :func:`stoker._sources.iterable.open_user_stream`
wraps them.

Stoker's own streams (sources and stages alike) subclass ``StreamNode`` and read
through a ``Cursor``; both live here, below the sources that subclass them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, Protocol, TypeVar, overload

import numpy as np

from ._context import DEFAULT_CONTEXT, Context
from .errors import StateError

if TYPE_CHECKING:
    from ._hosts import Shard
    from ._stats import SourceShare
    from ._transforms.stream import BatchedStream

__all__ = [
    "Cursor",
    "IterDataset",
    "StreamCursor",
    "StreamNode",
    "parent_state",
    "state_count",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")


class StreamCursor(Protocol[T_co]):
    """An open position in a stream: an iterator that can report its state."""

    def __next__(self) -> T_co: ...

    def state_dict(self) -> dict[str, Any]: ...


class IterDataset(Generic[T]):
    """A stream of records, read in order; it resumes from a saved state.

    Subclass it and implement ``__iter__``. To resume cheaply, also implement
    ``state_dict()`` / ``load_state_dict(state)`` (PyTorch's stateful protocol: the
    state of the iterator most recently returned by ``__iter__``). Without them,
    stoker counts the records handed out and resumes by reading that many again,
    which is exact whenever ``__iter__`` yields the same records every time.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: iter(range(5))).map(lambda x: x * 2)
        >>> list(ds)
        [0, 2, 4, 6, 8]
    """

    def __iter__(self) -> Iterator[T]:
        raise NotImplementedError(f"{type(self).__name__} must implement __iter__")

    def state_dict(self) -> dict[str, Any]:
        """The state of the iterator most recently returned by ``__iter__``."""
        raise NotImplementedError(
            f"{type(self).__name__} does not implement state_dict(); "
            "stoker resumes it by counting records instead"
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``__iter__`` continue from ``state``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load_state_dict()")

    # -- the loader's protocol ------------------------------------------------------

    shards_itself: ClassVar[bool] = False
    """Set to True when ``__iter__`` reads only its worker's part of the stream (from
    ``sk.get_worker_info()``); otherwise, with several workers, each worker reads the
    whole stream and keeps every ``num_workers``-th record."""

    @property
    def may_skip(self) -> bool:
        """True when the stream may drop records of its parent (a filter in the chain)."""
        return False

    @property
    def opens_with_state(self) -> bool:
        """True when a reader's state is worth saving before its first record: it holds
        more than a position (a PyTorch dataset that keeps the process's RNG state in
        its own). Read without workers, such a stream is opened, and its state taken or
        restored, as its pass starts."""
        return False

    @property
    def releases_gil(self) -> bool:
        """True when reading the stream (this node and its parents) releases the GIL;
        see :attr:`Dataset.releases_gil`. False unless a node says otherwise."""
        return False

    @property
    def shares_process(self) -> bool:
        """True when reading the stream (this node and its parents) is safe in the
        training process; see :attr:`Dataset.shares_process`. By default
        :attr:`releases_gil`."""
        return self.releases_gil

    def _open(self, ctx: Context, state: dict[str, Any] | None) -> StreamCursor[T]:
        """Start reading at ``state`` (None: the beginning), only ``ctx.shard``'s part."""
        return open_user_stream(self, state, ctx.shard)

    def _next_pass_state(self, end: dict[str, Any] | None, shard: Shard) -> dict[str, Any] | None:
        """The state that opens reader ``shard``'s next pass, given its state ``end`` at
        the end of a pass (None: start afresh).

        A user's stream with ``state_dict()`` keeps state of its own across passes (say,
        the epochs it counted): a loader state saved at the end of an epoch carries it,
        so that a restored stream goes on as the uninterrupted one does.
        """
        return user_next_pass_state(self, end, shard)

    def _mixture_report(self, state: dict[str, Any] | None) -> list[SourceShare] | None:
        """Each mixed source's realised share at the loader ``state`` (None: no mix)."""
        parent = getattr(self, "_parent", None)
        return parent._mixture_report(state) if isinstance(parent, IterDataset) else None

    # -- chaining -------------------------------------------------------------------

    @overload
    def map(self, fn: Callable[[T], U], *, seeded: Literal[False] = False) -> IterDataset[U]: ...
    @overload
    def map(
        self, fn: Callable[[T, np.random.Generator], U], *, seeded: Literal[True]
    ) -> IterDataset[U]: ...
    def map(self, fn: Callable[..., U], *, seeded: bool = False) -> IterDataset[U]:
        """Apply ``fn`` to every record, lazily (``seeded``: as for :meth:`Dataset.map`,
        with the record's position in the stream as its index)."""
        return MappedStream(self, fn, seeded=seeded)

    def filter(self, pred: Callable[[T], bool]) -> IterDataset[T]:
        """Keep the records for which ``pred(record)`` is true, lazily."""
        return FilteredStream(self, pred)

    def shuffle(self, window: int, seed: int | None = None) -> IterDataset[T]:
        """Emit the stream window by window, each window of ``window`` records in a
        random order drawn from (seed, epoch, reader, window number).

        Memory: one window of records per reader. The state stays small (the upstream
        state at the window's start and two counters), and resuming is exact. With
        tar shards, add ``shuffle_shards=True`` to vary the shard order too; over tar
        shards the shuffle is elastic (it resumes under any ``num_workers`` and host
        count, every record once).

        Args:
            window: records shuffled together (held in memory at once).
            seed: the seed of the orders; None: the loader's seed.

        Example:
            >>> import stoker as sk
            >>> sorted(sk.from_iterable(lambda: range(5)).shuffle(window=2, seed=0))
            [0, 1, 2, 3, 4]
        """
        return ShuffledStream(self, window, seed)

    def batch(
        self,
        batch_size: int,
        *,
        drop_remainder: bool = False,
        collate_fn: Callable[[list[T]], Any] | None = None,
    ) -> BatchedStream[T]:
        """Group consecutive records into collated batches of ``batch_size``.

        Use it with ``DataLoader(..., batch_size=None)``, which then yields these
        batches as they are.
        """
        return BatchedStream(self, batch_size, drop_remainder=drop_remainder, collate_fn=collate_fn)


def parent_state(state: dict[str, Any] | None, what: str, key: str = "parent") -> Any:
    """``state[key]`` (None without a state); StateError when the key is missing."""
    if state is not None and (not isinstance(state, dict) or key not in state):
        got = f"keys {sorted(state)}" if isinstance(state, dict) else type(state).__name__
        raise StateError(
            f"the state of {what} must be a dict with key {key!r}, got {got}: pass a state "
            "saved by a loader over the same stream, with the same num_workers unless the "
            "stream is elastic"
        )
    return None if state is None else state[key]


def state_count(state: dict[str, Any] | None, key: str, what: str) -> int:
    """The counter ``state[key]`` (0 without a state); StateError unless an int >= 0."""
    value = parent_state(state, what, key)
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise StateError(f"the state of {what} needs {key!r} to be an int >= 0, got {value!r}")
    return value or 0


class Cursor(Iterator[T], Generic[T]):
    """An open position in a stream: an iterator that reports its state.

    The default state is the parent cursor's under ``"parent"``; sources override it.
    """

    _parent: StreamCursor[Any]

    def state_dict(self) -> dict[str, Any]:
        """The JSON state from which ``_open`` resumes right after the last record."""
        return {"parent": self._parent.state_dict()}


class StreamNode(IterDataset[T]):
    """Base of stoker's stream stages: ``iter()`` and the stateful protocol via ``_open``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: range(3))
        >>> next(iter(ds)), ds.state_dict()
        (0, {'steps': 1})

    Errors:
        StateError: ``load_state_dict`` with a state of another shape.
    """

    _pending: dict[str, Any] | None = None
    _live: Cursor[T] | None = None

    def _open(self, ctx: Context, state: dict[str, Any] | None) -> Cursor[T]:
        raise NotImplementedError

    @property
    def elastic(self) -> bool:
        """True when a state resumes under any ``num_workers`` and host count.

        An elastic stream keeps its state per unit of data (a shard), not per reader,
        so the states of all readers can be dealt anew to other readers
        (``_deal_state``). Tar shards are elastic, and so are ``map``, ``filter``,
        ``batch`` and ``shuffle(window)`` over them; other streams resume only under
        the same ``num_workers`` (a ``StateError`` says so).
        """
        return False

    def _deal_state(
        self, parts: Sequence[tuple[Shard, dict[str, Any] | None]], new: Shard
    ) -> dict[str, Any]:
        """The state of reader ``new`` (index of count) when the readers ``parts`` (the
        shard each read and its state; None: not started) are dealt anew. Elastic only."""
        raise NotImplementedError(f"{type(self).__name__} is not elastic")

    def _next_pass_state(self, end: dict[str, Any] | None, shard: Shard) -> dict[str, Any] | None:
        return None  # a pass of stoker's own stages is a function of (seed, epoch)

    def __iter__(self) -> Iterator[T]:
        state, self._pending = self._pending, None
        self._live = self._open(DEFAULT_CONTEXT, state)
        return self._live

    def state_dict(self) -> dict[str, Any]:
        """The state of the iterator most recently returned by ``iter()``."""
        if self._live is not None:
            return self._live.state_dict()
        if self._pending is not None:
            return self._pending
        return self._open(DEFAULT_CONTEXT, None).state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` continue from ``state`` (its shape is checked now)."""
        self._open(DEFAULT_CONTEXT, state)
        self._pending, self._live = state, None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_live", None)  # an open iterator belongs to this process
        return state


# The stage classes import IterDataset from this module, so they come last.
from ._sources.iterable import open_user_stream, user_next_pass_state  # noqa: E402
from ._transforms.stream import BatchedStream, FilteredStream, MappedStream  # noqa: E402
from ._transforms.stream_shuffle import ShuffledStream  # noqa: E402
