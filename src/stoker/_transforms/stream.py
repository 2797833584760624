"""Stream stages (``map``, ``filter``, ``batch`` on an ``IterDataset``) and their cursors.

A stage describes; a cursor reads. ``_open(ctx, state)`` returns a cursor whose
``state_dict()`` mirrors the stage tree (own counters plus ``"parent"``); opening
reads nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._collate import default_collate
from .._context import Context
from .._iterdataset import Cursor, IterDataset, StreamCursor, StreamNode, parent_state, state_count
from .._rng import reused_record_rng
from .._typing import is_marked, may_share
from ..errors import ConfigError
from .map import require_callable

if TYPE_CHECKING:
    from .._hosts import Shard

__all__ = ["BatchedStream", "FilteredStream", "MappedStream"]

T = TypeVar("T")
U = TypeVar("U")
State = dict[str, Any]


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

    @property
    def opens_with_state(self) -> bool:
        return self._parent.opens_with_state

    def _next_pass_state(self, end: State | None, shard: Shard) -> State | None:
        # The stage's own counters start afresh over its parent's next pass.
        own = None if end is None else parent_state(end, type(self).__name__)
        parent = self._parent._next_pass_state(own, shard)
        return None if parent is None else self._fresh(parent)

    def _fresh(self, parent: State) -> State:
        """The state of this stage at the start of a pass over its parent at ``parent``."""
        return {"parent": parent}

    @property
    def shares_process(self) -> bool:
        return self._parent.shares_process

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

    @property
    def shares_process(self) -> bool:
        return may_share(self._fn) and self._parent.shares_process

    def _deal_state(self, parts: Sequence[tuple[Shard, State | None]], new: Shard) -> State:
        # A seeded map's index goes on from the records mapped by all readers together.
        total = sum(state_count(state, "count", "map") for _, state in parts)
        return {"count": total, **super()._deal_state(parts, new)}

    def _fresh(self, parent: State) -> State:
        return {"count": 0, "parent": parent}

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

    @property
    def shares_process(self) -> bool:
        return may_share(self._pred) and self._parent.shares_process

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

    @property
    def shares_process(self) -> bool:
        return may_share(self._collate) and self._parent.shares_process

    def _open(self, ctx: Context, state: State | None) -> Cursor[Any]:
        parent = self._parent._open(ctx.child(0), parent_state(state, "batch"))
        return _BatchedCursor(parent, self._size, self._drop, self._collate)
