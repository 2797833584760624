"""``mix``: several datasets interleaved in fixed proportions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from .._context import Context, Skip
from .._dataset import Dataset, DatasetNode
from ..errors import ConfigError
from .concat import check_parts, fetch_parts, gather_parts

__all__ = ["MixDataset", "mix"]

T = TypeVar("T")


def _normalised(weights: Sequence[float] | None, count: int) -> list[float]:
    if weights is None:
        return [1.0 / count] * count
    try:
        w = np.asarray(weights, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"mix() weights must be numbers, got {weights!r}") from None
    if w.shape != (count,):
        raise ConfigError(
            f"mix() needs one weight per dataset: {count} datasets, got weights {weights!r}"
        )
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ConfigError(f"mix() weights must be finite, >= 0 and not all zero, got {weights!r}")
    return (w / w.sum()).tolist()  # type: ignore[no-any-return]


def _counts(lengths: list[int], weights: list[float]) -> list[int]:
    """How many records of each dataset come before the first one runs out."""
    # Record j of dataset k sits at key (j + 0.5) / w_k; the mix ends before the
    # first missing key, min_k (len_k + 0.5) / w_k.
    limit = min((n + 0.5) / w for n, w in zip(lengths, weights, strict=True) if w > 0)
    counts = []
    for n, w in zip(lengths, weights, strict=True):
        if w == 0:
            counts.append(0)
            continue
        c = min(n, max(0, math.ceil(limit * w - 0.5)))
        while c > 0 and (c - 0.5) / w >= limit:  # key of record c - 1
            c -= 1
        while c < n and (c + 0.5) / w < limit:
            c += 1
        counts.append(c)
    return counts


class MixDataset(DatasetNode[T]):
    """Several datasets interleaved in fixed proportions; see :func:`mix`.

    The (dataset, record) table is built on first use and takes 12 bytes per
    record of the mix (O(len) memory; about 36 bytes per record while it is built).

    Example:
        >>> import stoker as sk
        >>> ds = sk.mix([sk.from_sequence("aaaa"), sk.from_sequence("bb")], weights=[2, 1])
        >>> "".join(ds[i] for i in range(len(ds)))
        'abaaba'

    Errors:
        ConfigError: see :func:`mix`.
    """

    _table: tuple[np.ndarray, np.ndarray] | None = None

    def __init__(self, datasets: Sequence[Dataset[T]], weights: Sequence[float] | None) -> None:
        self._parts: list[Dataset[Any]] = check_parts(datasets, "mix")
        self._weights = _normalised(weights, len(self._parts))
        self._counts = _counts([len(ds) for ds in self._parts], self._weights)
        self._len = sum(self._counts)

    def __len__(self) -> int:
        return self._len

    @property
    def _may_skip(self) -> bool:
        return any(ds._may_skip for ds in self._parts)

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """(dataset, record) for every position of the mix: int32 and int64 arrays."""
        table = self._table
        if table is None and self._len == 0:
            table = (np.empty(0, np.int32), np.empty(0, np.int64))
        if table is None:
            pairs = list(zip(self._counts, self._weights, strict=True))
            keys = np.concatenate([(np.arange(c) + 0.5) / w for c, w in pairs if c])
            part = np.repeat(np.arange(len(pairs), dtype=np.int32), self._counts)
            local = np.concatenate([np.arange(c, dtype=np.int64) for c, _ in pairs])
            order = np.argsort(keys, kind="stable")  # ties: the earlier dataset first
            table = self._table = (part[order], local[order])
        return table

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        part, local = self.table()
        return fetch_parts(self._parts, part[indices], local[indices], ctx)

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        part, local = self.table()
        return gather_parts(self._parts, part[indices], local[indices], ctx, out)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_table", None)  # rebuilt on first use
        return state


def mix(datasets: Sequence[Dataset[T]], weights: Sequence[float] | None = None) -> MixDataset[T]:
    """Interleave datasets deterministically, dataset ``k`` taking a share ``w_k``.

    Record ``j`` of dataset ``k`` is placed at key ``(j + 0.5) / w_k`` (weights
    normalised to sum 1); the mix lists the records by key, ties going to the
    earlier dataset. It ends just before the first dataset would run out: every
    position holds a distinct record, and each prefix follows the weights as
    closely as whole records allow. Shuffle it for a random order.

    Args:
        datasets: map-style datasets.
        weights: one share per dataset (>= 0; normalised); equal shares when None.

    Returns:
        A :class:`MixDataset`.

    Example:
        >>> import stoker as sk
        >>> ds = sk.mix([sk.range(0, 100), sk.range(1000, 1100)], weights=[0.75, 0.25])
        >>> [ds[i] for i in range(8)]
        [0, 1, 1000, 2, 3, 4, 1001, 5]

    Errors:
        ConfigError: no datasets or a non-dataset item; weights of the wrong count,
            negative, NaN or infinite, or all zero.
    """
    return MixDataset(datasets, weights)
