"""``MixedStream``: streams read in changing proportions (``sk.mix`` over ``IterDataset``s).

Record ``n`` of a reader of the mixture comes from the source that the golden-ratio
draw of ``n`` picks under the weights in force at ``n`` (see
:mod:`stoker._sampling.mixture`); the draw's start comes from (seed, epoch, stage,
reader). The state is every source's own state plus the mixer's cursor: records
handed out, per-source counts and restarts, which sources ran out, and the weight
changes applied so far (``[[record, weights], ...]``).

With workers, each worker reads its part of every source (as any stream is split)
and mixes them with its own cursor, so a mixture is deterministic for (seed,
num_workers) and resumes exactly under the same ``num_workers``.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from .._context import Context
from .._iterdataset import Cursor, IterDataset, StreamCursor, StreamNode, parent_state
from .._sampling.mixture import PHI, low_discrepancy_start
from .._sampling.schedule import Change, check_changes
from .._stats import SourceShare
from ..errors import ConfigError, NotSupportedError, StateError
from .mix import _Mixing, shares

__all__ = ["MixedStream"]

T = TypeVar("T")
State = dict[str, Any]


class MixedStream(_Mixing, StreamNode[T]):
    """Streams read in changing proportions; built by :func:`stoker.mix`.

    Example:
        >>> import stoker as sk
        >>> a = sk.from_iterable(lambda: iter("aaaaaa"))
        >>> b = sk.from_iterable(lambda: iter("bbb"))
        >>> "".join(sk.mix([a, b], weights=[2, 1], on_exhausted="drop"))
        'ababaabaa'

    Resources:
        None of its own; each source's cursor is opened lazily and read in order.

    Errors:
        ConfigError: see :func:`stoker.mix`. NotSupportedError: ``set_weights``
            after the mixture was sent to process workers (they read a copy).
        StateError: a state whose mixture names other sources or another rule.
    """

    def __init__(
        self,
        parts: Sequence[IterDataset[T]],
        names: list[str],
        weights: Any,
        *,
        schedule: Any,
        on_exhausted: str,
    ) -> None:
        if not parts:
            raise ConfigError("mix() needs at least one source, got none")
        self._parts: list[IterDataset[T]] = list(parts)
        self._init_mixing(names, weights, schedule, on_exhausted)
        self._pid = os.getpid()
        self._shipped = False

    @property
    def may_skip(self) -> bool:
        return any(part.may_skip for part in self._parts)

    @property
    def releases_gil(self) -> bool:
        return all(part.releases_gil for part in self._parts)  # the mixer only picks

    @property
    def shares_process(self) -> bool:
        return all(part.shares_process for part in self._parts)

    def _mixture_report(self, state: dict[str, Any] | None) -> list[SourceShare]:
        counts = [0] * len(self.names)
        weights: list[float] | None = None
        for mixer in _mixers(state, len(self.names)):
            counts = [c + int(x) for c, x in zip(counts, mixer["counts"], strict=True)]
            changes = mixer["weights"]
            weights = list(changes[-1][1]) if changes else None
        return shares(self.names, weights or self.weights, counts)

    def _check_settable(self) -> None:
        if self._shipped:
            raise NotSupportedError(
                "this stream mixture was sent to process workers (or pickled), which read "
                "a copy of its weights: a change would not reach them. Give the changes up "
                "front with mix(..., schedule=[(record, weights), ...]), or read with "
                "worker_mode='thread' or num_workers=0"
            )

    def _open(self, ctx: Context, state: State | None) -> Cursor[T]:
        mixer = None if state is None else parent_state(state, "mix", "mixer")
        parents = None if state is None else parent_state(state, "mix", "parents")
        count = len(self._parts)
        if parents is not None and (not isinstance(parents, list) or len(parents) != count):
            raise StateError(
                f"the state of mix() holds {len(parents) if isinstance(parents, list) else '?'} "
                f"source states, but this mixture has {count} sources {self.names}: restore "
                "into a mixture of the same sources"
            )
        return _MixedCursor(self, ctx, mixer, parents)

    def __getstate__(self) -> State:
        if os.getpid() == self._pid:
            self._shipped = True  # a process worker reads a copy from now on
        state = super().__getstate__()
        state["_shipped"] = False
        return state


def _mixers(state: object, count: int) -> list[Mapping[str, Any]]:
    """Every mixer entry in a loader state tree (one per reader)."""
    found: list[Mapping[str, Any]] = []
    if isinstance(state, Mapping):
        mixer = state.get("mixer")
        if isinstance(mixer, Mapping) and len(mixer.get("counts", ())) == count:
            found.append(mixer)
        for value in state.values():
            found.extend(_mixers(value, count))
    elif isinstance(state, list):
        for value in state:
            found.extend(_mixers(value, count))
    return found


class _MixedCursor(Cursor[T]):
    def __init__(
        self,
        node: MixedStream[T],
        ctx: Context,
        mixer: Any,
        parents: list[State | None] | None,
    ) -> None:
        self._node = node
        self._ctx = ctx
        count = len(node.names)
        salt = (ctx.epoch, ctx.shard.index, ctx.shard.count, *ctx.path)
        self._u0 = low_discrepancy_start(ctx.seed, *salt)
        self._states: list[State | None] = list(parents) if parents is not None else [None] * count
        self._cursors: list[StreamCursor[T] | None] = [None] * count
        self._fresh = [False] * count  # opened anew by a restart and not read since
        self._lock = threading.Lock()  # set_weights (any thread) against reading
        weights = node._control.read()
        if mixer is None:
            self._emitted = 0
            self._counts = [0] * count
            self._restarts = [0] * count
            self._out = [False] * count
            start = node._schedule_at(0)
            self._changes: list[Change] = [[0, start if start is not None else weights]]
        else:
            self._load(mixer, count)
        self._cdf: list[float] = []
        self._cdf_key: tuple[Any, ...] = ()
        node._control.listen(self)

    def weights_changed(self, weights: list[float]) -> None:
        """``set_weights``: the change applies from the next record not yet read."""
        with self._lock:
            self._record(self._emitted, list(weights))

    def _load(self, mixer: Any, count: int) -> None:
        node = self._node
        if not isinstance(mixer, Mapping):
            raise StateError(f"the state of mix() must hold a dict 'mixer', got {mixer!r}")
        if mixer.get("sources") != node.names or mixer.get("on_exhausted") != node.on_exhausted:
            raise StateError(
                f"the state was saved by a mixture of sources {mixer.get('sources')!r} "
                f"with on_exhausted={mixer.get('on_exhausted')!r}, but this mixture has "
                f"sources {node.names} with on_exhausted={node.on_exhausted!r}: restore "
                "into a mixture of the same sources and rule"
            )
        try:
            self._emitted = int(mixer["emitted"])
            self._counts = [int(x) for x in mixer["counts"]]
            self._restarts = [int(x) for x in mixer["restarts"]]
            self._out = [bool(x) for x in mixer["out"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise StateError(
                f"the state of mix() is damaged ({exc!r}): pass it unchanged"
            ) from None
        if not (len(self._counts) == len(self._restarts) == len(self._out) == count):
            raise StateError(f"the state of mix() names {len(self._counts)} sources, not {count}")
        self._changes = check_changes(mixer.get("weights"), count, "mix()")
        node._control.adopt(list(self._changes[-1][1]))

    # -- weights --------------------------------------------------------------------

    def _sync(self) -> None:
        node, n = self._node, self._emitted
        if node._schedule is not None:
            w = node._schedule.at(n)
            if w is not None and w != self._weights(n):
                self._record(n, w)

    def _record(self, n: int, weights: list[float]) -> None:
        changes = self._changes
        while len(changes) > 1 and changes[-1][0] > n:
            changes.pop()
        if self._weights(n) == weights:
            return
        if changes[-1][0] == n:
            changes[-1][1] = weights
        else:
            changes.append([n, weights])

    def _weights(self, n: int) -> list[float]:
        k = bisect.bisect_right([c[0] for c in self._changes], n) - 1
        return list(self._changes[max(k, 0)][1])

    def _pick(self) -> int | None:
        """The source of record ``emitted`` under the weights in force; None: none left."""
        n, changes = self._emitted, self._changes
        at = bisect.bisect_right([c[0] for c in changes], n) - 1
        weights = changes[max(at, 0)][1]
        key = (at, tuple(weights), tuple(self._out))
        if key != self._cdf_key:
            w = [0.0 if out else x for x, out in zip(weights, self._out, strict=True)]
            total = sum(w)
            if total <= 0:
                return None
            cdf, acc = [], 0.0
            for x in w:
                acc += x / total
                cdf.append(acc)
            last = max(k for k, x in enumerate(w) if x > 0)
            for k in range(last, len(cdf)):
                cdf[k] = 2.0
            self._cdf, self._cdf_key = cdf, key
        u = (self._u0 + n * PHI) % 1.0
        return bisect.bisect_right(self._cdf, u)

    # -- reading --------------------------------------------------------------------

    def _source(self, k: int) -> StreamCursor[T]:
        cursor = self._cursors[k]
        if cursor is None:
            part = self._node._parts[k]
            cursor = self._cursors[k] = part._open(self._ctx.child(k), self._states[k])
        return cursor

    def __next__(self) -> T:
        with self._lock:
            return self._next()

    def _next(self) -> T:
        self._sync()
        rule = self._node.on_exhausted
        while True:
            k = self._pick()
            if k is None:
                raise StopIteration
            try:
                record = next(self._source(k))
            except StopIteration:
                if rule == "stop":
                    self._out = [True] * len(self._out)
                    raise
                if rule == "restart" and not self._fresh[k]:
                    self._restarts[k] += 1
                    self._states[k], self._cursors[k] = None, None
                    self._fresh[k] = True
                    continue
                self._out[k] = True  # "drop", or a source that is empty right after a restart
                continue
            self._fresh[k] = False
            self._counts[k] += 1
            self._emitted += 1
            return record

    def state_dict(self) -> State:
        parents = [
            cursor.state_dict() if cursor is not None else state
            for cursor, state in zip(self._cursors, self._states, strict=True)
        ]
        return {
            "mixer": {
                "sources": self._node.names,
                "on_exhausted": self._node.on_exhausted,
                "emitted": self._emitted,
                "counts": list(self._counts),
                "restarts": list(self._restarts),
                "out": list(self._out),
                "weights": self._changes,
            },
            "parents": parents,
        }
