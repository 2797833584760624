"""``range``: the integers of a Python-style range as records."""

from __future__ import annotations

import builtins
import operator
from typing import Any, SupportsIndex

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode
from ..errors import ConfigError

__all__ = ["RangeDataset", "range"]

_INT64 = np.iinfo(np.int64)


class RangeDataset(DatasetNode[int]):
    """The integers ``start, start + step, ...`` below ``stop``; built by :func:`range`.

    Records are Python ints; a batch is gathered as one int64 array without a loop.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(10, 0, -3)
        >>> [ds[i] for i in (0, 1, 2, 3)]
        [10, 7, 4, 1]

    Errors:
        ConfigError: see :func:`range`.
    """

    def __init__(self, start: int, stop: int, step: int) -> None:
        if step == 0:
            raise ConfigError("range() step must not be zero: use a positive or negative step")
        values = builtins.range(start, stop, step)
        if values and not (
            _INT64.min <= min(values[0], values[-1]) and max(values[0], values[-1]) <= _INT64.max
        ):
            raise ConfigError(
                f"range({start}, {stop}, {step}) has values outside int64; "
                "keep start and stop within [-2**63, 2**63)"
            )
        self._start = start
        self._step = step
        self._len = len(values)

    @property
    def releases_gil(self) -> bool:
        return True  # index arithmetic and NumPy

    def __len__(self) -> int:
        return self._len

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[int | Skip]:
        start, step = self._start, self._step
        if step != 1:
            indices = indices * step
        if start:
            indices = indices + start
        return indices.tolist()  # type: ignore[no-any-return]

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        out = np.multiply(indices, self._step, out=out, dtype=np.int64)
        if self._start:
            out += self._start
        return out

    def __repr__(self) -> str:
        stop = self._start + self._len * self._step
        return f"RangeDataset({self._start}, {stop}, {self._step})"


def range(
    start: SupportsIndex, stop: SupportsIndex | None = None, step: SupportsIndex = 1
) -> RangeDataset:
    """A map-style dataset of integers, with the arguments of Python's ``range``.

    ``range(stop)`` counts from 0; ``range(start, stop, step)`` as usual.

    Args:
        start: the first value (or ``stop`` when it is the only argument).
        stop: the end, not included.
        step: the distance between values; negative to count down.

    Returns:
        A :class:`RangeDataset` whose record ``i`` is ``start + i * step``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(5)
        >>> len(ds), ds[4]
        (5, 4)

    Errors:
        ConfigError: ``step`` is zero, or a value does not fit in int64.
        TypeError: an argument is not an integer.
    """
    first = operator.index(start)
    if stop is None:
        first, end = 0, first
    else:
        end = operator.index(stop)
    return RangeDataset(first, end, operator.index(step))
