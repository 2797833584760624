"""``RandomSampler``: a fresh permutation of the indices in every epoch."""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

import numpy as np

from .._rng import epoch_rng
from .base import (
    EpochOrder,
    IndexArray,
    IndexCursor,
    Sampler,
    SamplerCursor,
    as_length,
    check_int,
)

__all__ = ["RandomSampler"]


class _Permutation(EpochOrder):
    def __init__(self, sampler: RandomSampler, epoch: int) -> None:
        self._sampler = sampler
        self._epoch = epoch

    def indices(self, start: int, stop: int) -> IndexArray:
        perm: IndexArray | None = self._cache
        if perm is None:
            perm = self._cache = self._sampler.permutation(self._epoch)
        return perm[start:stop].copy()


class RandomSampler(Sampler):
    """Every index once per epoch, in an order drawn afresh for each epoch.

    The permutation of epoch ``e`` depends only on ``(seed, e)``, so a saved position
    is two integers and the permutation is recomputed on restore. The sampler keeps the
    most recent epoch's permutation, so that several cursors of one epoch share it.

    Args:
        n: the number of indices, or a sized object (a dataset) whose length it is.
        seed: an int >= 0.

    Example:
        >>> from stoker import RandomSampler
        >>> sampler = RandomSampler(5, seed=0)
        >>> sorted(sampler.cursor(epoch=0).take(5).tolist())
        [0, 1, 2, 3, 4]

    Errors:
        ConfigError: ``n`` or ``seed`` is negative or not an int.
        StateError: ``restore`` with a state from a sampler of another kind, length or seed.
    """

    def __init__(self, n: int | Sized, seed: int = 0) -> None:
        super().__init__()
        self._n = as_length(n, "RandomSampler(n)")
        self._seed = check_int(seed, "seed", minimum=0)
        self._cache: tuple[int, IndexArray] | None = None

    @property
    def source_len(self) -> int:
        return self._n

    @property
    def seed(self) -> int:
        """The seed the permutations are drawn from."""
        return self._seed

    def __len__(self) -> int:
        return self._n

    def permutation(self, epoch: int) -> IndexArray:
        """Return epoch ``epoch``'s order as a read-only int64 array.

        Errors:
            ConfigError: ``epoch`` is not an int >= 0.
        """
        epoch = check_int(epoch, "epoch", minimum=0)
        cached = self._cache
        if cached is not None and cached[0] == epoch:
            return cached[1]
        perm = epoch_rng(self._seed, epoch).permutation(self._n).astype(np.int64, copy=False)
        perm.flags.writeable = False
        self._cache = (epoch, perm)
        return perm

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "seed": self._seed}

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        return IndexCursor(self, _Permutation(self, epoch), epoch, position)

    def __repr__(self) -> str:
        return f"RandomSampler({self._n}, seed={self._seed})"
