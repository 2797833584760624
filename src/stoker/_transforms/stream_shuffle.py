"""``IterDataset.shuffle(window)``: a windowed shuffle whose state is a cursor, not a buffer.

The stream is cut into windows of ``window`` consecutive records; each window is
emitted in an order drawn from (seed, epoch, reader, window number). The state is
the upstream state at the window's start, the window number and how many of its
records were emitted, so it stays as small as the upstream's: resuming restores the
upstream at the window's start, reads the window again and skips what was emitted.

Over an elastic stream (tar shards) the shuffle is elastic too. A window that was
partly emitted when the state was saved is a unit of its own: the state also holds
the upstream state at the window's end (``"after"``) and the window's length
(``"size"``). Dealt to another number of readers, each unfinished window goes whole
to one new reader, which reads it again from its start, emits in the same order
what was not emitted yet (``"pending"``), then goes on with its share of the
upstream from the windows' ends. Every record is emitted once: the windows hold the
records before each ``after``, the upstream's deal the records from it on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._context import Context
from .._iterdataset import Cursor, IterDataset, StreamCursor, StreamNode, parent_state, state_count
from .._rng import epoch_rng
from ..errors import ConfigError, StateError

if TYPE_CHECKING:
    from .._hosts import Shard

__all__ = ["ShuffledStream"]

T = TypeVar("T")
State = dict[str, Any]

_SALT = 0x5357_494E  # keeps window orders apart from other per-epoch draws


def _order(key: Sequence[int], window: int, count: int) -> list[int]:
    """The emission order of a window of ``count`` records (a function of its key)."""
    seed, epoch, *rest = key
    order: list[int] = epoch_rng(seed, epoch, _SALT, *rest, window).permutation(count).tolist()
    return order


def _pending(state: State | None) -> list[State]:
    """The validated ``"pending"`` windows of a state (none in states of older versions)."""
    units = [] if state is None else state.get("pending", [])
    ok = isinstance(units, list) and all(
        isinstance(u, dict)
        and {"parent", "size", "emitted", "reader", "window"} <= u.keys()
        and all(isinstance(u[k], int) and u[k] >= 0 for k in ("size", "emitted", "window"))
        and u["emitted"] < u["size"]
        and isinstance(u["reader"], list)
        and len(u["reader"]) == 2
        for u in units
    )
    if not ok:
        raise StateError(
            "the state of shuffle has a damaged 'pending' list (windows still to emit): "
            "pass a state saved by a loader over the same stream, unchanged"
        )
    return [dict(u) for u in units]


class _WindowCursor(Cursor[T]):
    def __init__(
        self,
        parent: StreamCursor[T],
        size: int,
        key: tuple[int, ...],
        state: State | None,
        reopen: Callable[[State | None], StreamCursor[T]],
    ) -> None:
        self._parent, self._size, self._key, self._reopen = parent, size, key, reopen
        self._window = state_count(state, "window", "shuffle")
        self._emitted = state_count(state, "emitted", "shuffle")
        self._start: State | None = None if state is None else state["parent"]
        self._records: list[T] | None = None  # the window, in emission order
        # The window's length and the upstream state at its end, once it is read (or
        # as a restored state recorded them).
        self._count = 0 if state is None else state.get("size", 0)
        self._after: State | None = None if state is None else state.get("after")
        self._pending = _pending(state)
        self._unit: list[T] | None = None  # the first pending window, in emission order

    def _fill(self) -> list[T]:
        if self._start is None:
            self._start = self._parent.state_dict()
        records: list[T] = []
        for _ in range(self._size):
            try:
                records.append(next(self._parent))
            except StopIteration:
                break
        self._after, self._count = self._parent.state_dict(), len(records)
        self._records = [records[i] for i in _order(self._key, self._window, len(records))]
        return self._records

    def _reread(self, unit: State) -> list[T]:
        """The records of a pending window, read again from its start."""
        upstream = self._reopen(unit["parent"])
        records: list[T] = []
        for _ in range(unit["size"]):
            try:
                records.append(next(upstream))
            except StopIteration:
                raise StateError(
                    f"a shuffle window of {unit['size']} records saved in the state reads "
                    f"back as {len(records)}: the stream's data changed since it was saved"
                ) from None
        return records

    def _next_pending(self) -> T | None:
        """The next record of the windows dealt to this reader by a resume, if any."""
        while self._pending:
            unit = self._pending[0]
            if self._unit is None:
                records = self._reread(unit)
                key = (*self._key[:2], *unit["reader"], *self._key[4:])
                self._unit = [records[i] for i in _order(key, unit["window"], len(records))]
            if unit["emitted"] < len(self._unit):
                record = self._unit[unit["emitted"]]
                unit["emitted"] += 1
                if unit["emitted"] == len(self._unit):
                    self._pending, self._unit = self._pending[1:], None
                return record
            self._pending, self._unit = self._pending[1:], None
        return None

    def __next__(self) -> T:
        if self._pending:
            record = self._next_pending()
            if record is not None:
                return record
        records = self._records if self._records is not None else self._fill()
        if self._emitted >= len(records):
            if len(records) < self._size:
                raise StopIteration
            # The next window starts where this one ended.
            self._window += 1
            self._emitted = 0
            self._start = self._parent.state_dict()
            records = self._fill()
            if not records:
                raise StopIteration
        record = records[self._emitted]
        self._emitted += 1
        return record

    def state_dict(self) -> State:
        records = self._records
        pending = [dict(u) for u in self._pending]
        if records is not None and self._emitted == len(records) == self._size:
            # A full window is done: name the next one rather than re-read this one.
            after = self._parent.state_dict()
            return self._state(self._window + 1, 0, after, 0, None, pending)
        start = self._start if self._start is not None else self._parent.state_dict()
        if self._emitted:
            return self._state(
                self._window, self._emitted, start, self._count, self._after, pending
            )
        return self._state(self._window, 0, start, 0, None, pending)

    @staticmethod
    def _state(
        window: int, emitted: int, start: Any, size: int, after: Any, pending: list[State]
    ) -> State:
        return {
            "window": window,
            "emitted": emitted,
            "parent": start,
            "size": size,
            "after": after,
            "pending": pending,
        }


class ShuffledStream(StreamNode[T]):
    """A stream emitted window by window, each in a random order; built by
    ``IterDataset.shuffle``.

    Memory: one window of records (and its order) per reader. The state holds no
    records: the upstream state at the window's start and two counters (and, for a
    window partly emitted, the upstream state at its end and its length). Elastic
    when its upstream is (tar shards): it resumes under any ``num_workers`` and host
    count, every record once.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: range(6)).shuffle(window=3, seed=0)
        >>> records = list(ds)
        >>> sorted(records[:3]), sorted(records[3:])
        ([0, 1, 2], [3, 4, 5])

    Errors:
        ConfigError: ``window`` is not an int >= 1, ``seed`` neither None nor an int >= 0.
        StateError: a damaged state.
    """

    def __init__(self, parent: IterDataset[T], window: int, seed: int | None = None) -> None:
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise ConfigError(
                f"shuffle() on a stream needs window as an int >= 1 (records held in "
                f"memory at once), got {window!r}"
            )
        if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
            raise ConfigError(f"shuffle() needs seed as an int >= 0 or None, got {seed!r}")
        self._parent, self._window, self._seed = parent, window, seed

    @property
    def may_skip(self) -> bool:
        return self._parent.may_skip

    @property
    def releases_gil(self) -> bool:
        return self._parent.releases_gil  # a window of references, reordered

    @property
    def elastic(self) -> bool:
        parent = self._parent
        return isinstance(parent, StreamNode) and parent.elastic

    @property
    def shares_process(self) -> bool:
        return self._parent.shares_process

    def _open(self, ctx: Context, state: State | None) -> Cursor[T]:
        start = parent_state(state, "shuffle")
        inner = ctx.child(0)
        parent = self._parent._open(inner, start)
        seed = self._seed if self._seed is not None else ctx.seed
        key = (seed, ctx.epoch, ctx.shard.index, ctx.shard.count, *ctx.path)

        def reopen(at: State | None) -> StreamCursor[T]:
            return self._parent._open(inner, at)

        return _WindowCursor(parent, self._window, key, state, reopen)

    def _deal_state(self, parts: Sequence[tuple[Shard, State | None]], new: Shard) -> State:
        """Partly emitted windows go whole, in turn, to the new readers; the upstream
        is dealt from each window's end (see the module docstring)."""
        parent = self._parent
        if not isinstance(parent, StreamNode) or not parent.elastic:
            raise NotImplementedError("a shuffle over a stream that is not elastic")
        units: list[State] = []
        upstream: list[tuple[Shard, State | None]] = []
        for reader, state in parts:
            if state is None:
                upstream.append((reader, None))
                continue
            start = parent_state(state, "shuffle")
            units.extend(_pending(state))
            emitted = state_count(state, "emitted", "shuffle")
            size = state_count(state, "size", "shuffle") if "size" in state else 0
            after = state.get("after")
            if not emitted:
                upstream.append((reader, start))
                continue
            if after is None or not 0 < emitted <= size:
                raise StateError(
                    "this shuffled stream's state was saved in the middle of a window "
                    "without where the window ends (a state of an older version, or "
                    "damaged): resume it under the num_workers and host count it was "
                    "saved with"
                )
            if emitted < size:  # the rest of the window goes whole to one new reader
                window = state_count(state, "window", "shuffle")
                units.append(
                    {
                        "parent": start,
                        "size": size,
                        "emitted": emitted,
                        "reader": [reader.index, reader.count],
                        "window": window,
                    }
                )
            upstream.append((reader, after))
        return {
            "window": 0,
            "emitted": 0,
            "parent": parent._deal_state(upstream, new),
            "size": 0,
            "after": None,
            "pending": units[new.index :: new.count],
        }

    def __repr__(self) -> str:
        return f"ShuffledStream(window={self._window}, seed={self._seed})"
