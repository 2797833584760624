"""``IterDataset.shuffle(window)``: a windowed shuffle whose state is a cursor, not a buffer.

The stream is cut into windows of ``window`` consecutive records; each window is
emitted in an order drawn from (seed, epoch, reader, window number). The state is
the upstream state at the window's start, the window number and how many of its
records were emitted, so it stays as small as the upstream's: resuming restores the
upstream at the window's start, reads the window again and skips what was emitted.
"""

from __future__ import annotations

from typing import Any, TypeVar

from .._context import Context
from .._iterdataset import Cursor, IterDataset, StreamCursor, StreamNode, parent_state, state_count
from .._rng import epoch_rng
from ..errors import ConfigError

__all__ = ["ShuffledStream"]

T = TypeVar("T")
State = dict[str, Any]

_SALT = 0x5357_494E  # keeps window orders apart from other per-epoch draws


class _WindowCursor(Cursor[T]):
    def __init__(
        self, parent: StreamCursor[T], size: int, key: tuple[int, ...], state: State | None
    ) -> None:
        self._parent, self._size, self._key = parent, size, key
        self._window = state_count(state, "window", "shuffle")
        self._emitted = state_count(state, "emitted", "shuffle")
        self._start: State | None = None if state is None else state["parent"]
        self._records: list[T] | None = None  # the window, in emission order

    def _fill(self) -> list[T]:
        if self._start is None:
            self._start = self._parent.state_dict()
        records: list[T] = []
        for _ in range(self._size):
            try:
                records.append(next(self._parent))
            except StopIteration:
                break
        seed, epoch, *rest = self._key
        order = epoch_rng(seed, epoch, _SALT, *rest, self._window).permutation(len(records))
        self._records = [records[i] for i in order.tolist()]
        return self._records

    def __next__(self) -> T:
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
        if records is not None and self._emitted == len(records) == self._size:
            # A full window is done: name the next one rather than re-read this one.
            return {"window": self._window + 1, "emitted": 0, "parent": self._parent.state_dict()}
        start = self._start if self._start is not None else self._parent.state_dict()
        return {"window": self._window, "emitted": self._emitted, "parent": start}


class ShuffledStream(StreamNode[T]):
    """A stream emitted window by window, each in a random order; built by
    ``IterDataset.shuffle``.

    Memory: one window of records (and its order) per reader. The state holds no
    records: the upstream state at the window's start and two counters.

    Example:
        >>> import stoker as sk
        >>> ds = sk.from_iterable(lambda: range(6)).shuffle(window=3, seed=0)
        >>> records = list(ds)
        >>> sorted(records[:3]), sorted(records[3:])
        ([0, 1, 2], [3, 4, 5])

    Errors:
        ConfigError: ``window`` is not an int >= 1, ``seed`` neither None nor an int >= 0.
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
    def shares_process(self) -> bool:
        return self._parent.shares_process

    def _open(self, ctx: Context, state: State | None) -> Cursor[T]:
        start = parent_state(state, "shuffle")
        parent = self._parent._open(ctx.child(0), start)
        seed = self._seed if self._seed is not None else ctx.seed
        key = (seed, ctx.epoch, ctx.shard.index, ctx.shard.count, *ctx.path)
        return _WindowCursor(parent, self._window, key, state)

    def __repr__(self) -> str:
        return f"ShuffledStream(window={self._window}, seed={self._seed})"
