"""``shuffle``: a fresh random order of the records every epoch."""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from .._context import Context, Skip
from .._dataset import Dataset, UnaryNode
from .._rng import epoch_rng
from ..errors import ConfigError

__all__ = ["ShuffleDataset"]

T = TypeVar("T")

_SALT = 0x5348_5546  # keeps this stage's permutations apart from the samplers'


class ShuffleDataset(UnaryNode[T]):
    """Record ``i`` is ``parent[perm[i]]``, ``perm`` drawn from (seed, epoch).

    The permutation of the current epoch is kept (8 bytes per record) and rebuilt
    lazily after unpickling. Built by ``Dataset.shuffle``.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(5).shuffle(seed=0)
        >>> sorted(ds[i] for i in (0, 1, 2, 3, 4))
        [0, 1, 2, 3, 4]

    Errors:
        ConfigError: ``seed`` is not an int >= 0.
    """

    _keeps_indices = False  # its index i is another index of its parent

    _cache: tuple[int, np.ndarray] | None = None

    def __init__(self, parent: Dataset[T], seed: int) -> None:
        if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
            raise ConfigError(f"shuffle() needs seed as an int >= 0, got {seed!r}")
        super().__init__(parent)
        self._seed = int(seed)

    def permutation(self, epoch: int) -> np.ndarray:
        """The parent indices in this stage's order for ``epoch`` (int64, do not modify)."""
        cache = self._cache
        if cache is not None and cache[0] == epoch:
            return cache[1]
        perm = epoch_rng(self._seed, epoch, _SALT).permutation(self._len)
        self._cache = (epoch, perm)
        return perm

    def _parent_index(self, index: int, ctx: Context) -> int:
        return int(self.permutation(ctx.epoch)[index])

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[T | Skip]:
        return self._parent._fetch(self.permutation(ctx.epoch)[indices], ctx.child(0))

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        return self._parent._gather(self.permutation(ctx.epoch)[indices], ctx.child(0), out)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_cache", None)  # rebuilt on first use
        return state
