"""Stream stages (``map``, ``filter``, ``batch`` on an ``IterDataset``) and their cursors.

A stage describes; a cursor reads. ``_open(ctx, state)`` returns a cursor whose
``state_dict()`` mirrors the stage tree (own counters plus ``"parent"``); opening
reads nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._batching.collate import default_collate
from .._context import DEFAULT_CONTEXT, Context
from .._dataset import IterDataset, StreamCursor
from .._rng import reused_record_rng
from .._typing import is_marked
from ..errors import ConfigError, StateError
from .map import require_callable

if TYPE_CHECKING:
    from .._hosts import Shard

__all__ = [
    "BatchedStream",
    "Cursor",
    "FilteredStream",
    "MappedStream",
    "StreamNode",
    "parent_state",
    "state_count",
]

T = TypeVar("T")
U = TypeVar("U")
State = dict[str, Any]


def parent_state(state: State | None, what: str, key: str = "parent") -> Any:
    """``state[key]`` (None without a state); StateError when the key is missing."""
    if state is not None and (not isinstance(state, dict) or key not in state):
        raise StateError(f"the state of {what} must be a dict with key {key!r}, got {state!r}")
    return None if state is None else state[key]


def state_count(state: State | None, key: str, what: str) -> int:
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

    def state_dict(self) -> State:
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

    _pending: State | None = None
    _live: Cursor[T] | None = None

    def _open(self, ctx: Context, state: State | None) -> Cursor[T]:
        raise NotImplementedError

    @property
    def elastic(self) -> bool:
        """True when a state resumes under any ``num_workers`` and host count.

        An elastic stream keeps its state per unit of data (a shard), not per reader,
        so the states of all readers can be dealt anew to other readers
        (``_deal_state``). Tar shards are elastic, and so are ``map``, ``filter`` and
        ``batch`` over them; other streams resume only under the same ``num_workers``.
        """
        return False

    def _deal_state(self, parts: Sequence[tuple[Shard, State | None]], new: Shard) -> State:
        """The state of reader ``new`` (index of count) when the readers ``parts`` (the
        shard each read and its state; None: not started) are dealt anew. Elastic only."""
        raise NotImplementedError(f"{type(self).__name__} is not elastic")

    def __iter__(self) -> Iterator[T]:
        state, self._pending = self._pending, None
        self._live = self._open(DEFAULT_CONTEXT, state)
        return self._live

    def state_dict(self) -> State:
        """The state of the iterator most recently returned by ``iter()``."""
        if self._live is not None:
            return self._live.state_dict()
        if self._pending is not None:
            return self._pending
        return self._open(DEFAULT_CONTEXT, None).state_dict()

    def load_state_dict(self, state: State) -> None:
        """Make the next ``iter()`` continue from ``state`` (its shape is checked now)."""
        self._open(DEFAULT_CONTEXT, state)
        self._pending, self._live = state, None

    def __getstate__(self) -> State:
        state = self.__dict__.copy()
        state.pop("_live", None)  # an open iterator belongs to this process
        return state


class _PassThrough(StreamNode[T]):
    """A stage that is elastic when its parent is; its own state is only ``"parent"``."""

    _parent: IterDataset[Any]

    @property
    def elastic(self) -> bool:
        parent = self._parent
        return isinstance(parent, StreamNode) and parent.elastic

    @property
    def may_skip(self) -> bool:
        return self._parent.may_skip

    @property
    def releases_gil(self) -> bool:
        return self._parent.releases_gil

    def _deal_state(self, parts: Sequence[tuple[Shard, State | None]], new: Shard) -> State:
        parent = self._parent
        if not isinstance(parent, StreamNode):
            raise NotImplementedError(f"{type(self).__name__} is not elastic")
        own = [(shard, parent_state(state, type(self).__name__)) for shard, state in parts]
        return {"parent": parent._deal_state(own, new)}


class _MappedCursor(Cursor[U]):
    def __init__(
        self, parent: StreamCursor[Any], fn: Callable[..., U], ctx: Context | None, count: int
    ) -> None:
        self._parent, self._fn, self._ctx, self._count = parent, fn, ctx, count

    def __next__(self) -> U:
        record = next(self._parent)
        index = self._count
        self._count = index + 1
        ctx = self._ctx
        if ctx is None:
            return self._fn(record)
        return self._fn(record, reused_record_rng(ctx.seed, ctx.epoch, index, ctx.path))

    def state_dict(self) -> State:
        return {"count": self._count, "parent": self._parent.state_dict()}


class MappedStream(_PassThrough[U]):
    """``fn`` applied to every record of a stream; built by ``IterDataset.map``.

    With ``seeded=True`` the generator comes from (seed, epoch, n, stage) where n
    counts the records this stage has mapped; it is valid only during the call.

    Example:
        >>> import stoker as sk
        >>> list(sk.from_iterable(lambda: range(3)).map(lambda x: -x))
        [0, -1, -2]

    Errors:
        TypeError: ``fn`` is not callable.
    """

    def __init__(
        self, parent: IterDataset[Any], fn: Callable[..., U], seeded: bool = False
    ) -> None:
        require_callable(fn, "map")
        self._parent, self._fn, self._seeded = parent, fn, bool(seeded)

    @property
    def releases_gil(self) -> bool:
        return is_marked(self._fn) and self._parent.releases_gil

    def _deal_state(self, parts: Sequence[tuple[Shard, State | None]], new: Shard) -> State:
        # A seeded map's index goes on from the records mapped by all readers together.
        total = sum(state_count(state, "count", "map") for _, state in parts)
        return {"count": total, **super()._deal_state(parts, new)}

    def _open(self, ctx: Context, state: State | None) -> Cursor[U]:
        count = state_count(state, "count", "map")
        parent = self._parent._open(ctx.child(0), parent_state(state, "map"))
        return _MappedCursor(parent, self._fn, ctx if self._seeded else None, count)


class _FilteredCursor(Cursor[T]):
    def __init__(self, parent: StreamCursor[T], pred: Callable[[T], Any]) -> None:
        self._parent, self._pred = parent, pred

    def __next__(self) -> T:
        parent, pred = self._parent, self._pred
        while True:
            record: T = next(parent)
            if pred(record):
                return record


class FilteredStream(_PassThrough[T]):
    """The records of a stream for which ``pred`` is true; built by ``IterDataset.filter``.

    Example:
        >>> import stoker as sk
        >>> list(sk.from_iterable(lambda: range(6)).filter(lambda x: x % 2))
        [1, 3, 5]

    Errors:
        TypeError: ``pred`` is not callable.
    """

    def __init__(self, parent: IterDataset[T], pred: Callable[[T], Any]) -> None:
        require_callable(pred, "filter")
        self._parent, self._pred = parent, pred

    @property
    def may_skip(self) -> bool:
        return True

    @property
    def releases_gil(self) -> bool:
        return is_marked(self._pred) and self._parent.releases_gil

    def _open(self, ctx: Context, state: State | None) -> Cursor[T]:
        parent = self._parent._open(ctx.child(0), parent_state(state, "filter"))
        return _FilteredCursor(parent, self._pred)


class _BatchedCursor(Cursor[Any]):
    def __init__(
        self, parent: StreamCursor[Any], size: int, drop: bool, collate: Callable[[list[Any]], Any]
    ) -> None:
        self._parent, self._size, self._drop, self._collate = parent, size, drop, collate
        self._done = False

    def __next__(self) -> Any:
        records: list[Any] = []
        if not self._done:
            try:
                for _ in range(self._size):
                    records.append(next(self._parent))
            except StopIteration:
                self._done = True
        if not records or (self._drop and len(records) < self._size):
            raise StopIteration
        return self._collate(records)


class BatchedStream(_PassThrough[Any], Generic[T]):
    """Consecutive records of a stream, collated in groups; built by ``IterDataset.batch``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: range(5)).batch(2, collate_fn=list)
        >>> list(ds)
        [[0, 1], [2, 3], [4]]

    Errors:
        ConfigError: ``batch_size`` is not an int >= 1.
        TypeError: ``collate_fn`` is neither None nor callable.
    """

    def __init__(
        self,
        parent: IterDataset[T],
        batch_size: int,
        *,
        drop_remainder: bool = False,
        collate_fn: Callable[[list[T]], Any] | None = None,
    ) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
            raise ConfigError(f"batch() needs batch_size as an int >= 1, got {batch_size!r}")
        if collate_fn is not None:
            require_callable(collate_fn, "batch(collate_fn=...)")
        self._parent, self._size, self._drop = parent, batch_size, bool(drop_remainder)
        self._collate = collate_fn if collate_fn is not None else default_collate

    @property
    def releases_gil(self) -> bool:
        return is_marked(self._collate) and self._parent.releases_gil

    def _open(self, ctx: Context, state: State | None) -> Cursor[Any]:
        parent = self._parent._open(ctx.child(0), parent_state(state, "batch"))
        return _BatchedCursor(parent, self._size, self._drop, self._collate)
