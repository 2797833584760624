"""``map``: a function applied to every record, lazily."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from .._context import SKIP, Context, Skip
from .._dataset import Dataset, UnaryNode
from .._rng import reused_record_rng
from .._stats import add_transform_time
from .._typing import factory_usage, is_marked, may_share

__all__ = ["MapDataset", "require_callable"]

U = TypeVar("U")


def require_callable(fn: object, what: str) -> None:
    """Raise ``TypeError("<what>() needs a callable, got <type>")`` unless ``fn`` is
    callable; also for a factory of operations passed uncalled (``sk.vision.normalize``
    instead of ``sk.vision.normalize()``), saying how it is used."""
    if not callable(fn):
        raise TypeError(f"{what}() needs a callable, got {type(fn).__name__}")
    usage = factory_usage(fn)
    if usage is not None:
        name = f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', '')}".strip(".")
        raise TypeError(
            f"{what}() was given {name}, which builds an operation rather than applying "
            f"one: call it first, as in {usage}"
        )


class MapDataset(UnaryNode[U]):
    """Record ``i`` is ``fn(parent[i])``; built by ``Dataset.map``.

    With ``seeded=True`` it is ``fn(parent[i], rng)``, where ``rng`` is a NumPy
    generator derived from (seed, epoch, i, this stage's place in the pipeline):
    the draws do not depend on workers, threads or the order of computation. The
    generator is reused between records, so it is valid only during the call.

    Exceptions raised by ``fn`` propagate unchanged.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(4).map(lambda x, rng: x + rng.random(), seeded=True)
        >>> ds[2] == ds[2], int(ds[2])
        (True, 2)

    Errors:
        TypeError: ``fn`` is not callable.
    """

    def __init__(self, parent: Dataset[Any], fn: Callable[..., U], seeded: bool = False) -> None:
        require_callable(fn, "map")
        super().__init__(parent)
        self._fn = fn
        self._seeded = bool(seeded)

    @property
    def releases_gil(self) -> bool:
        return is_marked(self._fn) and self._parent.releases_gil

    @property
    def shares_process(self) -> bool:
        return may_share(self._fn) and self._parent.shares_process

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[U | Skip]:
        records = self._parent._fetch(indices, ctx.child(0))
        start = time.perf_counter()  # the stats tell map time from source reads
        try:
            return self._apply(records, indices, ctx)
        finally:
            add_transform_time(time.perf_counter() - start)

    def _fetch_each(self, indices: np.ndarray, ctx: Context) -> Iterator[U | Skip]:
        # Record by record through every map of a chain: each record is made whole
        # (read, decode, augment) before the next, and the memory of its steps is
        # reused by the next record instead of a batch of each step living at once.
        records = self._parent._fetch_each(indices, ctx.child(0))
        return self._each(records, indices, ctx)

    def _each(
        self, records: Iterator[Any], indices: np.ndarray, ctx: Context
    ) -> Iterator[U | Skip]:
        fn, clock = self._fn, time.perf_counter
        seed, epoch, path = ctx.seed, ctx.epoch, ctx.path
        # No zip nor enumerate: their reused result tuple would hold the last record
        # while the next one is made.
        for i in indices.tolist():
            r = next(records)
            if r is SKIP:
                yield SKIP
                continue
            start = clock()
            try:
                made = fn(r, reused_record_rng(seed, epoch, i, path)) if self._seeded else fn(r)
            finally:
                add_transform_time(clock() - start)
            del r  # neither this step's input nor its output outlives its record
            yield made
            del made

    def _apply(self, records: list[Any], indices: np.ndarray, ctx: Context) -> list[U | Skip]:
        fn = self._fn
        if self._seeded:
            seed, epoch, path = ctx.seed, ctx.epoch, ctx.path
            return [
                SKIP if r is SKIP else fn(r, reused_record_rng(seed, epoch, i, path))
                for r, i in zip(records, indices.tolist(), strict=True)
            ]
        if self._parent.may_skip:
            return [SKIP if r is SKIP else fn(r) for r in records]
        return list(map(fn, records))
