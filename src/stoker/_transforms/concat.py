"""``concat``: datasets one after the other; also the part-wise reads shared with ``mix``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from .._context import Context, Skip
from .._dataset import Dataset, DatasetNode
from .._iterdataset import IterDataset
from ..errors import ConfigError

__all__ = ["ConcatDataset", "check_parts", "concat", "fetch_parts", "gather_parts"]

T = TypeVar("T")


def check_parts(datasets: object, what: str) -> list[Dataset[Any]]:
    """The datasets of ``concat([...])`` / ``mix([...])`` as a list, or ConfigError."""
    if isinstance(datasets, Dataset | IterDataset) or not isinstance(datasets, Sequence):
        raise ConfigError(f"{what}() takes a list of datasets: {what}([a, b])")
    if not datasets:
        raise ConfigError(f"{what}() needs at least one dataset, got an empty list")
    for k, ds in enumerate(datasets):
        if not isinstance(ds, Dataset):
            hint = (
                "streams are not supported here"
                if isinstance(ds, IterDataset)
                else "wrap plain sequences with sk.from_sequence(...)"
            )
            raise ConfigError(
                f"{what}() needs map-style datasets, item {k} is a {type(ds).__name__}: {hint}"
            )
        if ds._mixture() is not None:  # its order is the loader's: it would not mix here
            raise ConfigError(
                f"{what}() over sk.mix (item {k}): a mixture decides the order a loader "
                f"reads its sources in, which {what}() would lose; give all the sources "
                "to one sk.mix([...]) (with map or filter on top as needed)"
            )
        if ds._packer(1) is not None:
            raise ConfigError(
                f"{what}() over a packed dataset (item {k}): rows are packed as the loader "
                f"reads, so pack last: sk.pack(sk.{what}(...), length)"
            )
    return list(datasets)


def _groups(part_of: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(part, positions) for every part that occurs in ``part_of``, positions in order."""
    order = np.argsort(part_of, kind="stable")
    ordered = part_of[order]
    cuts = np.flatnonzero(ordered[1:] != ordered[:-1]) + 1
    return [(int(part_of[g[0]]), g) for g in np.split(order, cuts)]


def fetch_parts(
    parts: list[Dataset[Any]], part_of: np.ndarray, local: np.ndarray, ctx: Context
) -> list[Any]:
    """The records at (part_of[i], local[i]); part ``k`` reads with ``ctx.child(k)``."""
    if part_of.size == 0 or part_of.min() == part_of.max():
        k = int(part_of[0]) if part_of.size else 0
        return parts[k]._fetch(local, ctx.child(k))
    records: list[Any] = [None] * len(part_of)
    for k, positions in _groups(part_of):
        got = parts[k]._fetch(local[positions], ctx.child(k))
        for position, record in zip(positions.tolist(), got, strict=True):
            records[position] = record
    return records


def _concat_trees(trees: list[Any]) -> Any:
    first = trees[0]
    if isinstance(first, np.ndarray):
        ok = all(isinstance(t, np.ndarray) and t.shape[1:] == first.shape[1:] for t in trees)
        return np.concatenate(trees) if ok else None
    if isinstance(first, dict):
        if not all(isinstance(t, dict) and t.keys() == first.keys() for t in trees):
            return None
        joined = {key: _concat_trees([t[key] for t in trees]) for key in first}
        return None if any(v is None for v in joined.values()) else joined
    if isinstance(first, tuple | list):
        if not all(type(t) is type(first) and len(t) == len(first) for t in trees):
            return None
        items = [_concat_trees([t[j] for t in trees]) for j in range(len(first))]
        return None if any(v is None for v in items) else type(first)(items)
    return None


def _take_tree(tree: Any, order: np.ndarray, out: Any | None) -> Any:
    if isinstance(tree, np.ndarray):
        return tree.take(order, 0, out, "clip")
    if isinstance(tree, dict):
        return {k: _take_tree(v, order, None if out is None else out[k]) for k, v in tree.items()}
    return type(tree)(
        _take_tree(v, order, None if out is None else out[j]) for j, v in enumerate(tree)
    )


def gather_parts(
    parts: list[Dataset[Any]],
    part_of: np.ndarray,
    local: np.ndarray,
    ctx: Context,
    out: Any | None,
) -> Any:
    """The collated batch for (part_of[i], local[i]), or NotImplemented."""
    if part_of.size == 0 or part_of.min() == part_of.max():
        k = int(part_of[0]) if part_of.size else 0
        return parts[k]._gather(local, ctx.child(k), out)
    groups = _groups(part_of)
    trees = [parts[k]._gather(local[positions], ctx.child(k), None) for k, positions in groups]
    if any(t is NotImplemented for t in trees):
        return NotImplemented
    joined = _concat_trees(trees)
    if joined is None:  # the parts disagree; let the record path report it
        return NotImplemented
    order = np.argsort(np.concatenate([positions for _, positions in groups]))
    return _take_tree(joined, order, out)


class ConcatDataset(DatasetNode[T]):
    """The records of several datasets, one dataset after the other; see :func:`concat`.

    Example:
        >>> import stoker as sk
        >>> ds = sk.concat([sk.range(2), sk.range(10, 12)])
        >>> [ds[i] for i in (0, 1, 2, 3)]
        [0, 1, 10, 11]

    Errors:
        ConfigError: see :func:`concat`.
    """

    def __init__(self, datasets: Sequence[Dataset[T]]) -> None:
        self._parts: list[Dataset[Any]] = check_parts(datasets, "concat")
        lengths = np.array([len(ds) for ds in self._parts], dtype=np.int64)
        self._ends = np.cumsum(lengths)
        self._starts = self._ends - lengths

    def __len__(self) -> int:
        return int(self._ends[-1])

    @property
    def may_skip(self) -> bool:
        return any(ds.may_skip for ds in self._parts)

    @property
    def releases_gil(self) -> bool:
        return all(ds.releases_gil for ds in self._parts)

    @property
    def shares_process(self) -> bool:
        return all(ds.shares_process for ds in self._parts)

    def _locate(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        part_of = np.searchsorted(self._ends, indices, side="right")
        return part_of, indices - self._starts[part_of]

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        return fetch_parts(self._parts, *self._locate(indices), ctx)

    def _record_name(self, index: int, ctx: Context) -> str | None:
        part_of, local = self._locate(np.array([index], dtype=np.int64))
        k = int(part_of[0])
        return self._parts[k]._record_name(int(local[0]), ctx.child(k))

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        return gather_parts(self._parts, *self._locate(indices), ctx, out)


def concat(datasets: Sequence[Dataset[T]]) -> ConcatDataset[T]:
    """The records of ``datasets`` one after the other, lazily.

    Index ``i`` falls in the first dataset while ``i < len(datasets[0])``, and so on.
    A batch that spans several datasets is read with one call per dataset.

    Args:
        datasets: a list of map-style datasets (empty ones are allowed).

    Returns:
        A :class:`ConcatDataset` of length ``sum(len(d) for d in datasets)``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.concat([sk.from_sequence("ab"), sk.from_sequence("xyz")])
        >>> len(ds), ds[2]
        (5, 'x')

    Errors:
        ConfigError: ``datasets`` is empty or not a list, or holds something that is not
            a map-style ``Dataset`` (wrap plain sequences with ``sk.from_sequence``).
    """
    return ConcatDataset(datasets)
