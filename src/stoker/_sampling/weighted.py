"""``WeightedSampler``: indices drawn in proportion to weights that may change in training."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._rng import epoch_rng
from ..errors import ConfigError, StateError
from .base import EpochOrder, IndexArray, IndexCursor, Sampler, SamplerCursor, check_int

__all__ = ["WeightedSampler"]

_BLOCK = 4096
"""Draws with replacement come in blocks of this many positions, one generator each."""


@dataclass(frozen=True, slots=True)
class _Table:
    """One set of weights, ready to draw from; replaced as a whole by ``set_weights``."""

    weights: NDArray[np.float64]
    cdf: NDArray[np.float64]
    digest: str
    nonzero: int


def _build_table(weights: ArrayLike) -> _Table:
    try:
        w = np.array(weights, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"weights must be a 1-D sequence of numbers: {exc}") from None
    if w.ndim != 1:
        raise ConfigError(
            f"weights must be 1-D (one weight per record), got an array of shape {w.shape}"
        )
    if w.size == 0:
        raise ConfigError("weights is empty: give one weight per record of the dataset")
    bad = np.flatnonzero(~np.isfinite(w))
    if bad.size:
        raise ConfigError(
            f"weights must be finite, but weights[{bad[0]}] is {w[bad[0]]}: "
            "replace NaN and infinite weights"
        )
    bad = np.flatnonzero(w < 0)
    if bad.size:
        raise ConfigError(
            f"weights must be >= 0, but weights[{bad[0]}] is {w[bad[0]]}: "
            "use 0 to leave a record out"
        )
    nonzero = int(np.count_nonzero(w))
    if nonzero == 0:
        raise ConfigError("weights are all zero: at least one record needs a positive weight")
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    w.flags.writeable = False
    cdf.flags.writeable = False
    digest = hashlib.blake2b(w.astype("<f8").tobytes(), digest_size=8).hexdigest()
    return _Table(w, cdf, digest, nonzero)


class _WithReplacement(EpochOrder):
    """Draw ``p`` is ``searchsorted(cdf, u_p)``; ``u_p`` comes from position ``p``'s block.

    The cdf is read from the sampler at each call, so new weights apply to every draw
    not yet taken.
    """

    def __init__(self, sampler: WeightedSampler, epoch: int) -> None:
        self._sampler = sampler
        self._epoch = epoch

    def _uniforms(self, block: int) -> NDArray[np.float64]:
        cached: tuple[int, NDArray[np.float64]] | None = self._cache
        if cached is not None and cached[0] == block:
            return cached[1]
        u = epoch_rng(self._sampler.seed, self._epoch, block).random(_BLOCK)
        self._cache = (block, u)
        return u

    def indices(self, start: int, stop: int) -> IndexArray:
        table = self._sampler._table
        parts = []
        for block in range(start // _BLOCK, (stop - 1) // _BLOCK + 1):
            base = block * _BLOCK
            lo, hi = max(start, base) - base, min(stop, base + _BLOCK) - base
            parts.append(self._uniforms(block)[lo:hi])
        u = parts[0] if len(parts) == 1 else np.concatenate(parts)
        drawn = np.searchsorted(table.cdf, u, side="right")
        np.minimum(drawn, table.weights.size - 1, out=drawn)
        return drawn.astype(np.int64, copy=False)

    def state_fields(self) -> dict[str, Any]:
        return {"weights": self._sampler._table.digest}


class _WithoutReplacement(EpochOrder):
    """An Efraimidis-Spirakis weighted permutation, cut to ``num_samples``.

    Uses the weights current when the epoch's cursor was opened.
    """

    def __init__(self, sampler: WeightedSampler, epoch: int) -> None:
        self._sampler = sampler
        self._epoch = epoch
        self._table = sampler._table

    def indices(self, start: int, stop: int) -> IndexArray:
        order: IndexArray | None = self._cache
        if order is None:
            order = self._cache = self._sampler._weighted_permutation(self._epoch, self._table)
        return order[start:stop].copy()

    def state_fields(self) -> dict[str, Any]:
        return {"weights": self._table.digest}


class WeightedSampler(Sampler):
    """Indices drawn with probability proportional to ``weights``.

    With replacement, the draw at each position of an epoch is addressable on its own,
    so a saved position is a few integers. ``set_weights`` applies to every draw that
    no cursor has taken yet, including the rest of the current epoch.

    Without replacement, an epoch is one weighted permutation (Efraimidis-Spirakis)
    of the records with a positive weight, cut to ``num_samples``; it uses the weights
    current when the epoch's cursor is opened, so ``set_weights`` applies from the
    next cursor (normally the next epoch).

    Saved states carry a short digest of the weights they were drawn with; ``restore``
    refuses a state whose digest differs from the current weights'. Call
    ``set_weights`` with the weights in effect when the state was saved, then restore.

    Args:
        weights: one non-negative, finite weight per record; not all zero.
        num_samples: indices per epoch; defaults to ``len(weights)``.
        replacement: draw with replacement (the same record may repeat in an epoch).
        seed: an int >= 0.

    Example:
        >>> from stoker import WeightedSampler
        >>> sampler = WeightedSampler([0.0, 1.0, 3.0], num_samples=6, seed=0)
        >>> draws = sampler.cursor(epoch=0).take(6).tolist()
        >>> len(draws), 0 in draws
        (6, False)

    Errors:
        ConfigError: weights that are not 1-D, are empty, negative, NaN or infinite, or
            all zero (naming the first offending index); ``num_samples < 1``; without
            replacement, ``num_samples`` above the number of positive weights;
            ``set_weights`` with a different number of weights.
        StateError: ``restore`` with a state from another sampler, or one saved with
            other weights than the current ones.
    """

    def __init__(
        self,
        weights: ArrayLike,
        num_samples: int | None = None,
        replacement: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__()
        table = _build_table(weights)
        if not isinstance(replacement, bool):
            raise ConfigError(f"replacement must be True or False, got {replacement!r}")
        self._replacement = replacement
        self._seed = check_int(seed, "seed", minimum=0)
        self._num_samples = (
            table.weights.size
            if num_samples is None
            else check_int(num_samples, "num_samples", minimum=1)
        )
        self._check_enough(table)
        self._table = table
        self._cache: tuple[int, str, IndexArray] | None = None

    def _check_enough(self, table: _Table) -> None:
        if not self._replacement and self._num_samples > table.nonzero:
            raise ConfigError(
                f"without replacement, num_samples ({self._num_samples}) cannot exceed the "
                f"number of positive weights ({table.nonzero}): lower num_samples or "
                "use replacement=True"
            )

    @property
    def source_len(self) -> int:
        return self._table.weights.size

    @property
    def seed(self) -> int:
        """The seed the draws come from."""
        return self._seed

    @property
    def replacement(self) -> bool:
        """Whether a record may be drawn more than once per epoch."""
        return self._replacement

    @property
    def weights(self) -> NDArray[np.float64]:
        """The current weights, read-only."""
        return self._table.weights

    def __len__(self) -> int:
        return self._num_samples

    def set_weights(self, weights: ArrayLike) -> None:
        """Replace the weights; safe to call while other threads take indices.

        With replacement, the new weights apply to every draw not yet taken; without,
        from the next cursor opened.

        Errors:
            ConfigError: the same checks as the constructor's, or a different number
                of weights than the sampler was built with.
        """
        table = _build_table(weights)
        if table.weights.size != self.source_len:
            raise ConfigError(
                f"set_weights needs {self.source_len} weights, one per record, "
                f"got {table.weights.size}"
            )
        self._check_enough(table)
        self._table = table

    def _weighted_permutation(self, epoch: int, table: _Table) -> IndexArray:
        """Return epoch ``epoch``'s order without replacement under ``table``'s weights."""
        cached = self._cache
        if cached is not None and cached[0] == epoch and cached[1] == table.digest:
            return cached[2]
        u = 1.0 - epoch_rng(self._seed, epoch).random(table.weights.size)  # in (0, 1]
        keys = np.full(table.weights.size, -np.inf)
        positive = table.weights > 0
        keys[positive] = np.log(u[positive]) / table.weights[positive]
        order = np.argsort(-keys, kind="stable")[: self._num_samples].astype(np.int64)
        order.flags.writeable = False
        self._cache = (epoch, table.digest, order)
        return order

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "seed": self._seed, "replacement": self._replacement}

    def _check_state(self, state: object) -> Mapping[str, Any]:
        checked = super()._check_state(state)
        saved = checked.get("weights")
        current = self._table.digest
        if saved != current:
            raise StateError(
                f"the state was saved with weights of digest {saved!r}, but the current "
                f"weights of {self!r} have digest {current!r}: call set_weights() with the "
                "weights in effect when the state was saved, then restore"
            )
        return checked

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        order: EpochOrder
        if self._replacement:
            order = _WithReplacement(self, epoch)
        else:
            order = _WithoutReplacement(self, epoch)
        return IndexCursor(self, order, epoch, position)

    def __repr__(self) -> str:
        return (
            f"WeightedSampler(<{self.source_len} weights>, num_samples={self._num_samples}, "
            f"replacement={self._replacement}, seed={self._seed})"
        )
