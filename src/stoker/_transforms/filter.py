"""``filter``: keep the records for which a predicate is true, lazily."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from .._context import SKIP, Context, Skip
from .._dataset import Dataset, UnaryNode
from .._typing import is_marked, may_share
from .map import require_callable

__all__ = ["FilterDataset"]

T = TypeVar("T")


class FilterDataset(UnaryNode[T]):
    """The parent's records, with ``SKIP`` where ``pred(record)`` is false.

    The length stays the parent's (an upper bound): a loader fills each batch with
    the next records that pass. ``ds[i]`` on a removed record raises
    :class:`~stoker.errors.FilteredOut`. Built by ``Dataset.filter``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(6).filter(lambda x: x % 2 == 0)
        >>> len(ds), ds[4]
        (6, 4)

    Errors:
        TypeError: ``pred`` is not callable.
        FilteredOut: ``ds[i]`` for a record that ``pred`` rejects.
    """

    def __init__(self, parent: Dataset[T], pred: Callable[[T], Any]) -> None:
        require_callable(pred, "filter")
        super().__init__(parent)
        self._pred = pred

    @property
    def may_skip(self) -> bool:
        return True

    @property
    def releases_gil(self) -> bool:
        return is_marked(self._pred) and self._parent.releases_gil

    @property
    def shares_process(self) -> bool:
        return may_share(self._pred) and self._parent.shares_process

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        pred = self._pred
        return [
            r if r is not SKIP and pred(r) else SKIP
            for r in self._parent._fetch(indices, ctx.child(0))
        ]
