"""``WeightTable``: one set of sampling weights, checked and ready to draw from.

:class:`~stoker.WeightedSampler` draws position ``p`` as ``searchsorted(cdf, u_p)``;
a table holds the weights (read-only), their cumulative distribution, a digest that
names them in a saved state, and how many are positive. ``set_weights`` replaces a
table as a whole.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..errors import ConfigError

__all__ = ["WeightTable", "weight_table"]


@dataclass(frozen=True, slots=True)
class WeightTable:
    """One set of weights, ready to draw from; replaced as a whole by ``set_weights``."""

    weights: NDArray[np.float64]
    cdf: NDArray[np.float64]
    digest: str
    nonzero: int


def weight_table(weights: ArrayLike) -> WeightTable:
    """``weights`` checked and ready to draw from (its CDF and digest).

    Example:
        >>> t = weight_table([1.0, 0.0, 3.0])
        >>> t.cdf.tolist(), t.nonzero
        ([0.25, 0.25, 1.0], 2)

    Errors:
        ConfigError: weights that are not a non-empty 1-D sequence of finite numbers
            >= 0 with at least one positive.
    """
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
    return WeightTable(w, cdf, digest, nonzero)
