"""``zip``: records of several datasets side by side, as tuples."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from .._context import SKIP, Context, Skip
from .._dataset import Dataset, DatasetNode
from ..errors import ConfigError
from .concat import check_parts

__all__ = ["ZipDataset", "zip"]


class ZipDataset(DatasetNode[tuple[Any, ...]]):
    """Record ``i`` is ``(a[i], b[i], ...)``; see :func:`zip`.

    Example:
        >>> import stoker as sk
        >>> sk.zip(sk.range(3), sk.from_sequence("abc"))[1]
        (1, 'b')

    Errors:
        ConfigError: see :func:`zip`.
    """

    def __init__(self, datasets: list[Dataset[Any]], strict: bool) -> None:
        lengths = [len(ds) for ds in datasets]
        if strict and len(set(lengths)) > 1:
            raise ConfigError(
                f"zip() needs datasets of equal length, got lengths {lengths}: "
                "pass strict=False to stop at the shortest"
            )
        self._parts = datasets
        self._len = min(lengths)

    def __len__(self) -> int:
        return self._len

    @property
    def may_skip(self) -> bool:
        return any(ds.may_skip for ds in self._parts)

    @property
    def releases_gil(self) -> bool:
        return all(ds.releases_gil for ds in self._parts)

    def _record_name(self, index: int, ctx: Context) -> str | None:
        names = [ds._record_name(index, ctx.child(k)) for k, ds in enumerate(self._parts)]
        known = [name for name in names if name is not None]
        return " + ".join(known) if known else None

    @property
    def shares_process(self) -> bool:
        return all(ds.shares_process for ds in self._parts)

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[tuple[Any, ...] | Skip]:
        columns = [ds._fetch(indices, ctx.child(k)) for k, ds in enumerate(self._parts)]
        records: list[tuple[Any, ...] | Skip] = list(builtins.zip(*columns, strict=True))
        if self.may_skip:
            for column in columns:
                for j, record in enumerate(column):
                    if record is SKIP:
                        records[j] = SKIP
        return records

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        batches = []
        for k, ds in enumerate(self._parts):
            batch = ds._gather(indices, ctx.child(k), None if out is None else out[k])
            if batch is NotImplemented:
                return NotImplemented
            batches.append(batch)
        return tuple(batches)


def zip(*datasets: Dataset[Any], strict: bool = True) -> ZipDataset:
    """Records of several datasets side by side: record ``i`` is ``(a[i], b[i], ...)``.

    A record removed by a filter in any of the datasets is removed from the zip.

    Args:
        *datasets: map-style datasets.
        strict: require equal lengths (the default); with ``strict=False`` the zip
            stops at the shortest dataset.

    Returns:
        A :class:`ZipDataset` of tuples.

    Example:
        >>> import stoker as sk
        >>> len(sk.zip(sk.range(3), sk.range(5), strict=False))
        3

    Errors:
        ConfigError: no datasets, an argument that is not a map-style ``Dataset``, or
            lengths that differ under ``strict=True`` (the message lists them).
    """
    return ZipDataset(check_parts(list(datasets), "zip"), bool(strict))
