"""Mixture weights that change while a run trains: checks, the live weights, schedules.

A mixture's weights at record ``r`` (records counted from the start of epoch 0) come
from one of three places: the weights given when it was built, ``set_weights(w)``
called while it is read (a :class:`WeightControl` that every cursor of this process
looks at before it plans more records), or a schedule given up front
(:class:`Schedule`: ``(record, weights)`` pairs or a function of the record).

Cursors write down every change they apply as ``[position, weights]`` in a list that
the states they save carry (O(number of changes)), so a restore replays them exactly.
"""

from __future__ import annotations

import bisect
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError, StateError

__all__ = ["Change", "Schedule", "WeightControl", "check_weights", "weights_at"]

Change = list[Any]
"""``[position, [w_0, ..., w_{k-1}]]``: weights (normalised) in force from ``position`` on."""


def check_weights(weights: Any, names: Sequence[str], what: str) -> list[float]:
    """``weights`` (one per source, or a dict by source name) normalised to sum 1.

    Example:
        >>> check_weights([3, 1], ["a", "b"], "mix()")
        [0.75, 0.25]
        >>> check_weights({"b": 1, "a": 1}, ["a", "b"], "mix()")
        [0.5, 0.5]

    Errors:
        ConfigError: not numbers, the wrong count or unknown names, a negative, NaN or
            infinite weight, or all zero; the message names the values.
    """
    count = len(names)
    if isinstance(weights, Mapping):
        unknown = sorted(set(map(str, weights)) - set(names))
        missing = [n for n in names if n not in weights]
        if unknown or missing:
            raise ConfigError(
                f"{what} weights by name must name every source once: sources {list(names)}, "
                f"got {dict(weights)!r} (unknown {unknown}, missing {missing})"
            )
        weights = [weights[n] for n in names]
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} weights must be numbers, got {weights!r}") from None
    if w.shape != (count,):
        raise ConfigError(
            f"{what} needs one weight per source: {count} sources {list(names)}, "
            f"got weights {weights!r}"
        )
    bad = [f"{names[k]}={w[k]}" for k in range(count) if not math.isfinite(w[k]) or w[k] < 0]
    if bad:
        raise ConfigError(
            f"{what} weights must be finite and >= 0, got {', '.join(bad)} in {weights!r}: "
            "use 0 to leave a source out"
        )
    if w.sum() <= 0:
        raise ConfigError(
            f"{what} weights are all zero ({weights!r}): at least one source needs a "
            "positive weight"
        )
    return [float(x) for x in w / w.sum()]


class WeightControl:
    """The weights a user sets while the mixture is read, shared by its cursors.

    ``set`` hands the new weights at once to every live cursor of this process
    (``listen``), which writes the change down at its next position not yet planned:
    a state saved right after ``set_weights`` already names the change.
    """

    def __init__(self, weights: list[float]) -> None:
        self._lock = threading.Lock()
        self.weights = weights
        self._listeners: weakref.WeakSet[Any] = weakref.WeakSet()

    def set(self, weights: list[float]) -> None:
        with self._lock:
            self.weights = weights
            listeners = list(self._listeners)
        for listener in listeners:
            listener.weights_changed(weights)

    def listen(self, cursor: Any) -> None:
        """Tell ``cursor`` (an object with ``weights_changed(w)``) about every change."""
        with self._lock:
            self._listeners.add(cursor)

    def adopt(self, weights: list[float]) -> None:
        """Take ``weights`` as the current ones without announcing a change (restore)."""
        with self._lock:
            self.weights = weights

    def read(self) -> list[float]:
        with self._lock:
            return self.weights

    def __getstate__(self) -> dict[str, Any]:
        return {"weights": self.weights}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.Lock()
        self.weights = state["weights"]
        self._listeners = weakref.WeakSet()


class Schedule:
    """Weights given up front as a function of the record count ``r`` (from the start
    of epoch 0): sorted ``(record, weights)`` pairs, or a callable ``r -> weights``.

    Example:
        >>> s = Schedule([(0, [1, 0]), (100, [1, 1])], ["a", "b"], "mix()")
        >>> s.at(99), s.at(100), s.next_change(0)
        ([1.0, 0.0], [0.5, 0.5], 100)

    Errors:
        ConfigError: pairs whose records are not ints >= 0 or not increasing, a
            callable that is not one, or bad weights (see :func:`check_weights`).
    """

    def __init__(self, schedule: Any, names: Sequence[str], what: str) -> None:
        self._names = list(names)
        self._what = what
        self._fn: Callable[[int], Any] | None = None
        self._steps: list[int] = []
        self._weights: list[list[float]] = []
        if callable(schedule):
            self._fn = schedule
            return
        if isinstance(schedule, str | bytes | Mapping) or not isinstance(schedule, Sequence):
            raise ConfigError(
                f"{what} schedule must be a list of (record, weights) pairs or a function "
                f"of the record count, got {type(schedule).__name__}"
            )
        if not schedule:
            raise ConfigError(f"{what} schedule is empty: give at least one (record, weights)")
        previous = -1
        for item in schedule:
            if not isinstance(item, Sequence) or len(item) != 2:
                raise ConfigError(
                    f"{what} schedule items are (record, weights) pairs, got {item!r}"
                )
            step, weights = item
            if isinstance(step, bool) or not isinstance(step, int | np.integer) or step < 0:
                raise ConfigError(f"{what} schedule records must be ints >= 0, got {step!r}")
            if step <= previous:
                raise ConfigError(
                    f"{what} schedule must be increasing in records: {step} follows "
                    f"{previous}; sort the pairs and give each record once"
                )
            previous = int(step)
            self._steps.append(int(step))
            self._weights.append(check_weights(weights, names, f"{what} schedule at {step}:"))

    @property
    def is_function(self) -> bool:
        return self._fn is not None

    def at(self, record: int) -> list[float] | None:
        """The weights in force at ``record``; None before the first pair."""
        if self._fn is not None:
            return check_weights(self._fn(record), self._names, f"{self._what} schedule({record})")
        k = bisect.bisect_right(self._steps, record) - 1
        return None if k < 0 else self._weights[k]

    def next_change(self, record: int) -> int | None:
        """The first listed record after ``record`` (None: none, or a function)."""
        k = bisect.bisect_right(self._steps, record)
        return self._steps[k] if self._fn is None and k < len(self._steps) else None


def weights_at(changes: list[Change], position: int) -> list[float]:
    """The weights in force at ``position`` according to ``changes`` (sorted)."""
    k = bisect.bisect_right([c[0] for c in changes], position) - 1
    return list(changes[max(k, 0)][1])


def check_changes(changes: object, count: int, what: str) -> list[Change]:
    """A saved list of changes: ``[[position, weights], ...]``, positions increasing.

    Errors:
        StateError: another shape, or weights for another number of sources.
    """
    ok = isinstance(changes, list) and len(changes) > 0
    previous = -1
    for c in changes if isinstance(changes, list) else []:
        if not (
            isinstance(c, list)
            and len(c) == 2
            and isinstance(c[0], int)
            and c[0] > previous
            and isinstance(c[1], list)
            and len(c[1]) == count
            and all(isinstance(x, int | float) and x >= 0 for x in c[1])
        ):
            ok = False
            break
        previous = c[0]
    if not ok:
        raise StateError(
            f"the state of {what} must hold its weight changes as [[position, "
            f"[{count} weights]], ...] with increasing positions, got {changes!r}: pass "
            "a state returned by state_dict(), unchanged"
        )
    checked: list[Any] = changes  # type: ignore[assignment]
    return [[int(c[0]), [float(x) for x in c[1]]] for c in checked]
