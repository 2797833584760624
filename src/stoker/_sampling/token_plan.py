"""Token-budget batches: the pure planning behind :class:`~stoker.TokenBatchSampler`.

An epoch's plan is a function of ``(seed, epoch)`` and the lengths only::

    records in a shuffled order ──► windows of W records ──► each window sorted by
    length and cut greedily under the budget ──► batches ──► grouped into steps of one
    batch per host (close costs together) ──► steps shuffled

A change of host count in mid-epoch re-deals the records not yet consumed: the plan
of a *segment* (a stretch of steps on one host count) is the same function applied to
the records that earlier segments left, in their epoch order. A position is therefore
the list of ``[hosts, steps]`` segments walked so far: a few integers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from .._rng import epoch_rng
from ..errors import ConfigError

__all__ = ["CostFn", "Step", "batch_cost", "cut_window", "deal_steps", "default_window"]

IndexArray = NDArray[np.int64]
Step = list[IndexArray]
"""One step: one batch per host, host ``i`` gets ``step[i]``."""

CostFn = Literal["padded", "tokens"] | Callable[[list[int]], float]

_ORDER, _STEPS = 1, 2  # salts of the two per-epoch draws


def batch_cost(lengths: Sequence[int] | NDArray[np.int64], cost: CostFn) -> float:
    """The cost of one batch of records of ``lengths``.

    Example:
        >>> batch_cost([3, 5], "padded"), batch_cost([3, 5], "tokens")
        (10, 8)
    """
    if len(lengths) == 0:
        return 0
    if cost == "padded":
        return int(len(lengths) * max(lengths))
    if cost == "tokens":
        return int(sum(int(n) for n in lengths))
    if callable(cost):
        return float(cost([int(n) for n in lengths]))
    raise ConfigError(f"cost must be 'padded', 'tokens' or a callable, got {cost!r}")


def cut_window(
    indices: IndexArray, lengths: NDArray[np.int64], max_tokens: int, cost: CostFn
) -> list[IndexArray]:
    """Cut records already sorted by ascending length into batches under ``max_tokens``.

    Greedy: each batch takes as many of the next records as the budget allows; a record
    over the budget on its own is a batch of its own.

    Example:
        >>> idx = np.arange(5, dtype=np.int64); lens = np.array([2, 2, 3, 4, 9])
        >>> [b.tolist() for b in cut_window(idx, lens, 8, "padded")]
        [[0, 1], [2, 3], [4]]
    """
    out: list[IndexArray] = []
    n, i = len(indices), 0
    while i < n:
        if cost == "padded":
            m = min(n - i, max(1, max_tokens // max(int(lengths[i]), 1)) + 1)
            costs = np.arange(1, m + 1, dtype=np.int64) * lengths[i : i + m]
            k = int(np.searchsorted(costs, max_tokens, side="right"))
        elif cost == "tokens":
            m = min(n - i, max(1, max_tokens // max(int(lengths[i]), 1)) + 1)
            costs = np.cumsum(lengths[i : i + m])
            k = int(np.searchsorted(costs, max_tokens, side="right"))
        else:
            k = 0
            while i + k < n and batch_cost(lengths[i : i + k + 1], cost) <= max_tokens:
                k += 1
        k = max(k, 1)
        out.append(indices[i : i + k])
        i += k
    return out


def default_window(lengths: NDArray[np.int64], max_tokens: int) -> int:
    """Records per sorting window when none is given: about 64 batches' worth.

    Example:
        >>> default_window(np.full(100_000, 512), 16384)
        2048
    """
    if len(lengths) == 0:
        return 1
    typical = max(int(np.median(lengths)), 1)
    per_batch = max(max_tokens // typical, 1)
    return int(min(max(64 * per_batch, 1024), len(lengths)))


def _split_largest(batches: list[IndexArray]) -> bool:
    """Split the batch of most records in two; False when every batch has one record."""
    sizes = [len(b) for b in batches]
    j = int(np.argmax(sizes))
    if sizes[j] < 2:
        return False
    b = batches.pop(j)
    half = len(b) // 2
    batches[j:j] = [b[:half], b[half:]]
    return True


def deal_steps(
    records: IndexArray,
    lengths: NDArray[np.int64],
    *,
    max_tokens: int,
    cost: CostFn,
    window: int,
    hosts: int,
    shuffle: bool,
    drop_last: bool,
    seed: int,
    epoch: int,
    segment: int,
) -> list[Step]:
    """The steps of one segment over ``records`` (already in the epoch's order).

    Example:
        >>> lens = np.array([5, 1, 4, 2, 3, 6], dtype=np.int64)
        >>> steps = deal_steps(np.arange(6, dtype=np.int64), lens, max_tokens=8,
        ...     cost="padded", window=6, hosts=2, shuffle=False, drop_last=False,
        ...     seed=0, epoch=0, segment=0)
        >>> [[b.tolist() for b in step] for step in steps]  # one batch per host
        [[[4, 2], [5]], [[0], [1, 3]]]

    Errors:
        ConfigError: fewer records than hosts (some host would get no batch).
    """
    batches: list[IndexArray] = []
    for start in range(0, len(records), window):
        chunk = records[start : start + window]
        order = np.argsort(lengths[chunk], kind="stable")
        chunk = chunk[order]
        batches.extend(cut_window(chunk, lengths[chunk], max_tokens, cost))
    if not batches:
        return []
    costs = np.array([batch_cost(lengths[b], cost) for b in batches], dtype=np.float64)
    by_cost = np.argsort(-costs, kind="stable")  # close costs side by side
    batches = [batches[i] for i in by_cost]
    rest = len(batches) % hosts
    if rest and drop_last:
        batches = batches[: len(batches) - rest]  # the final partial step: the cheapest
    while len(batches) % hosts:
        if not _split_largest(batches):
            raise ConfigError(
                f"{len(records)} records cannot give each of {hosts} hosts a batch of its "
                "own: use fewer hosts, more data, or drop_last=True"
            )
        costs = np.array([batch_cost(lengths[b], cost) for b in batches], dtype=np.float64)
        order = np.argsort(-costs, kind="stable")
        batches = [batches[i] for i in order]
    steps = [batches[i : i + hosts] for i in range(0, len(batches), hosts)]
    if shuffle:
        perm = epoch_rng(seed, epoch, _STEPS, segment).permutation(len(steps))
        steps = [steps[i] for i in perm]
    return steps


def epoch_records(n: int, *, shuffle: bool, seed: int, epoch: int) -> IndexArray:
    """The epoch's record order before batching: a permutation, or ``0 .. n - 1``."""
    if shuffle:
        return epoch_rng(seed, epoch, _ORDER).permutation(n).astype(np.int64)
    return np.arange(n, dtype=np.int64)
