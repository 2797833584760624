"""``ChunkedShuffleSampler``: a shuffle that reads storage in contiguous runs."""

from __future__ import annotations

import functools
from collections.abc import Sized
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._background import Computed
from .._rng import epoch_rng
from .._sampling.base import (
    EpochOrder,
    IndexArray,
    IndexCursor,
    Sampler,
    SamplerCursor,
    as_length,
    check_int,
)

__all__ = ["ChunkedShuffleSampler"]

AHEAD_POSITIONS = 1 << 16
"""Windows of this many positions or more are built ahead on a thread of their own
(a permutation of 64 Ki positions takes ~0.5 ms; starting a thread ~0.1 ms)."""


@dataclass(frozen=True, slots=True)
class _Layout:
    """The chunk order of one epoch: chunk ``order[k]`` fills positions ``[starts[k], ends[k])``."""

    epoch: int
    order: IndexArray
    starts: IndexArray
    ends: IndexArray


class _Windows(EpochOrder):
    """Builds one window of the epoch at a time; keeps the last one built.

    A large window (``AHEAD_POSITIONS`` or more) is a ~20 ms permutation: when one is
    reached, the next is built on a short-lived thread (NumPy shuffles and gathers
    without the GIL), so the batch that reaches it does not wait. Both are pure
    functions of ``(seed, epoch, window)``: which thread builds a window never
    changes it.
    """

    _ahead: tuple[int, Computed[IndexArray]] | None = None

    def __init__(self, sampler: ChunkedShuffleSampler, epoch: int) -> None:
        self._sampler = sampler
        self._epoch = epoch

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_ahead", None)
        return state

    def _window(self, number: int) -> IndexArray:
        cached: tuple[int, IndexArray] | None = self._cache
        if cached is not None and cached[0] == number:
            return cached[1]
        ahead: tuple[int, Computed[IndexArray]] | None = self._ahead
        self._ahead = None
        window = ahead[1].result() if ahead is not None and ahead[0] == number else None
        sampler = self._sampler
        layout = sampler._layout(self._epoch)
        if window is None:
            window = self._build(number, layout)
        self._cache = (number, window)
        following = number + 1
        if sampler.window >= AHEAD_POSITIONS and following * sampler.window < len(sampler):
            build = functools.partial(self._build, following, layout)
            self._ahead = (following, Computed(build, name="stoker-sampler-window"))
        return window

    def _build(self, number: int, layout: _Layout) -> IndexArray:
        """Window ``number`` of the epoch whose chunk order is ``layout``."""
        sampler = self._sampler
        lo = number * sampler.window
        hi = min(lo + sampler.window, len(sampler))
        # The window's positions cover a few chunks, each a run of consecutive indices:
        # lay the runs end to end (no per-position search), then shuffle them.
        first = int(np.searchsorted(layout.ends, lo, side="right"))
        last = int(np.searchsorted(layout.ends, hi - 1, side="right"))
        values = np.empty(hi - lo, dtype=np.int64)
        for slot in range(first, last + 1):
            a, b = max(lo, int(layout.starts[slot])), min(hi, int(layout.ends[slot]))
            start = int(layout.order[slot]) * sampler.chunk_size + a - int(layout.starts[slot])
            values[a - lo : b - lo] = np.arange(start, start + b - a, dtype=np.int64)
        shuffle = epoch_rng(sampler.seed, self._epoch, 1, number).permutation(hi - lo)
        window: IndexArray = values[shuffle]
        return window

    def indices(self, start: int, stop: int) -> IndexArray:
        size = self._sampler.window
        parts = []
        for number in range(start // size, (stop - 1) // size + 1):
            base = number * size
            lo, hi = max(start, base) - base, min(stop, base + size) - base
            parts.append(self._window(number)[lo:hi])
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)


class ChunkedShuffleSampler(Sampler):
    """A shuffle for data on disk: contiguous chunks in random order, mixed in windows.

    ``[0, n)`` is cut into chunks of ``chunk_size`` consecutive indices (the last may be
    shorter). Each epoch puts the chunks in a random order, then shuffles the indices
    within each run of ``window`` consecutive positions of that sequence. A window
    therefore touches at most ``window // chunk_size + 2`` chunks, so reads stay in
    long contiguous runs while the order still changes every epoch. Every index comes
    exactly once per epoch. The order depends only on ``(seed, epoch)``; windows are
    built as they are reached, so memory is ``O(n / chunk_size + window)``.

    When to use it: when a full shuffle would read storage all over the place, that is
    when the data is larger than what can be kept decoded or cached. For Parquet files
    larger than the decode cache, ``sk.from_parquet(...).shuffle_sampler(seed)`` builds
    one whose chunks are row groups, so the loader decodes a few row groups at a time
    instead of one per record; smaller files shuffle fully with ``shuffle=True``.

    Args:
        n: the number of indices, or a sized object (a dataset) whose length it is.
        chunk_size: indices per chunk, >= 1; e.g. the records in one file or row group.
        window: positions shuffled together, >= 1; defaults to ``8 * chunk_size``.
        seed: an int >= 0.

    Example:
        >>> from stoker import ChunkedShuffleSampler
        >>> sampler = ChunkedShuffleSampler(10, chunk_size=3, window=3, seed=0)
        >>> sorted(sampler.cursor(epoch=0).take(10).tolist())
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]

    Errors:
        ConfigError: ``n`` or ``seed`` is negative, or ``chunk_size`` or ``window`` is not
            an int >= 1.
        StateError: ``restore`` with a state from a sampler built with other arguments.
    """

    def __init__(
        self, n: int | Sized, chunk_size: int, window: int | None = None, seed: int = 0
    ) -> None:
        super().__init__()
        self._n = as_length(n, "ChunkedShuffleSampler(n)")
        self._chunk_size = check_int(chunk_size, "chunk_size", minimum=1)
        self._window = (
            8 * self._chunk_size if window is None else check_int(window, "window", minimum=1)
        )
        self._seed = check_int(seed, "seed", minimum=0)
        self._cache: _Layout | None = None

    @property
    def source_len(self) -> int:
        return self._n

    @property
    def chunk_size(self) -> int:
        """Indices per chunk."""
        return self._chunk_size

    @property
    def window(self) -> int:
        """Positions shuffled together."""
        return self._window

    @property
    def seed(self) -> int:
        """The seed the orders are drawn from."""
        return self._seed

    def __len__(self) -> int:
        return self._n

    def _layout(self, epoch: int) -> _Layout:
        """Return the chunk order of ``epoch``; the most recent one is kept."""
        cached = self._cache
        if cached is not None and cached.epoch == epoch:
            return cached
        count = -(-self._n // self._chunk_size)
        order = epoch_rng(self._seed, epoch, 0).permutation(count).astype(np.int64, copy=False)
        sizes = np.minimum(self._chunk_size, self._n - order * self._chunk_size)
        ends = np.cumsum(sizes)
        layout = _Layout(epoch, order, ends - sizes, ends)
        self._cache = layout
        return layout

    def _params(self) -> dict[str, Any]:
        return {
            **super()._params(),
            "chunk_size": self._chunk_size,
            "window": self._window,
            "seed": self._seed,
        }

    def _open(self, epoch: int, position: int) -> SamplerCursor:
        return IndexCursor(self, _Windows(self, epoch), epoch, position)

    def __repr__(self) -> str:
        return (
            f"ChunkedShuffleSampler({self._n}, chunk_size={self._chunk_size}, "
            f"window={self._window}, seed={self._seed})"
        )
