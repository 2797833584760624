"""Checks the JAX adapters make when they wrap a loader, before any batch is read.

A loader knows the rows of its batches before reading them (``batch_size``, and
the short last batch of an epoch under ``last_batch="keep"``); rows that cannot be
split over the devices of the batch axis are refused when the adapter is built,
not after an epoch of good batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from jax.sharding import Sharding

from .._tree import is_dataclass_instance
from ._split import check_rows
from ._tree import _as_sharding

__all__ = ["check_loader_rows"]


def _shardings(spec: object) -> Iterator[Sharding]:
    """Every sharding in a sharding tree (a sharding, device, preset, or containers)."""
    one = _as_sharding(spec)
    if one is not None:
        yield one
    elif isinstance(spec, Mapping):
        for child in spec.values():
            yield from _shardings(child)
    elif isinstance(spec, tuple | list):
        for child in spec:
            yield from _shardings(child)
    elif is_dataclass_instance(spec):
        for field in dataclasses.fields(spec):
            yield from _shardings(getattr(spec, field.name))


def check_loader_rows(iterable: object, spec: object, processes: int) -> None:
    """Refuse now a loader whose batches' rows will not split over ``spec``'s devices.

    ``iterable`` is checked only when it is a stoker loader (it knows its rows);
    ``processes`` is the number of hosts whose rows make one global batch.

    Errors:
        ConfigError: a ``batch_size``, or the short last batch of an epoch, whose
            rows do not split evenly over the devices that share the batch axis (the
            message says which ``batch_size`` works, and suggests
            ``last_batch="drop"``).
    """
    row_counts = getattr(iterable, "_row_counts", None)
    if not callable(row_counts):
        return
    counts: tuple[int, ...] = row_counts()
    for sharding in _shardings(spec):
        for i, rows in enumerate(counts):
            what = "the loader's batch_size" if i == 0 else "the last batch of an epoch"
            check_rows(what, rows, sharding, processes)
