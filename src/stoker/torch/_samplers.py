"""The drop-in loader's own samplers, as trainers see them.

``shuffle=True`` orders records by stoker's :class:`~stoker.RandomSampler` and
``shuffle=False`` by its :class:`~stoker.SequentialSampler`. Trainers inspect a
loader's sampler with ``isinstance`` (Lightning decides whether to shuffle its
``DistributedSampler`` that way; Accelerate and the HF Trainer reach for
``set_epoch``), so these classes are also PyTorch's ``RandomSampler`` and
``SequentialSampler``: same orders and states as stoker's, PyTorch's attributes
(``data_source``, ``replacement``, ``num_samples``, ``generator``) for code that
reads them.

A trainer that knows the epoch tells the sampler (``sampler.set_epoch(e)``, as with
a ``DistributedSampler``); the loader sees that and walks epoch ``e`` next. The loader
in turn sets the epoch it walks on its sampler, so that code iterating the sampler
itself (a trainer that skips batches with a loader of its own) sees the same order.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

import torch.utils.data as tud

from .._sampling.random import RandomSampler as _StokerRandom
from .._sampling.sequential import SequentialSampler as _StokerSequential

__all__ = [
    "PlacedEpoch",
    "RandomSampler",
    "SequentialSampler",
    "forward_set_epoch",
    "loader_sampler",
]


class PlacedEpoch:
    """Mixin: remembers an epoch placed from outside with ``set_epoch``.

    The loader reads :attr:`placed` when a pass starts and clears it; its own calls go
    through :meth:`walk`, which sets the epoch without placing it.
    """

    placed: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """Walk ``epoch`` next; the loader that owns this sampler follows."""
        super().set_epoch(epoch)  # type: ignore[misc]
        self.placed = epoch

    def walk(self, epoch: int) -> None:
        """The loader's own call: iterate ``epoch`` from now on (not a placement)."""
        super().set_epoch(epoch)  # type: ignore[misc]
        self.placed = None


class _TorchRandom(tud.RandomSampler):
    """PyTorch's class for ``isinstance``; its ``__init__`` ends stoker's init chain."""

    def __init__(self) -> None:
        pass


class _TorchSequential(tud.SequentialSampler):
    """PyTorch's class for ``isinstance``; its ``__init__`` ends stoker's init chain."""

    def __init__(self) -> None:
        pass


class RandomSampler(PlacedEpoch, _StokerRandom, _TorchRandom):
    """stoker's permutation per ``(seed, epoch)``, seen by trainers as PyTorch's
    ``RandomSampler`` (without replacement).

    Example:
        >>> sampler = RandomSampler(range(5), seed=3)
        >>> sampler.set_epoch(2)
        >>> sorted(sampler) == [0, 1, 2, 3, 4], sampler.placed
        (True, 2)
    """

    def __init__(self, data_source: Sized, seed: int = 0) -> None:
        _StokerRandom.__init__(self, len(data_source), seed=seed)
        self.data_source = data_source
        self.replacement = False
        self._num_samples = None
        self.generator = None  # the order never draws from a generator


class SequentialSampler(PlacedEpoch, _StokerSequential, _TorchSequential):
    """``0, 1, ..., n - 1`` every epoch, seen by trainers as PyTorch's
    ``SequentialSampler``.

    Example:
        >>> list(SequentialSampler(range(3)))
        [0, 1, 2]
    """

    def __init__(self, data_source: Sized) -> None:
        _StokerSequential.__init__(self, len(data_source))
        self.data_source = data_source


def loader_sampler(dataset: Sized, shuffle: bool, seed: int) -> Any:
    """The drop-in's sampler for a map-style ``dataset`` given no sampler."""
    return RandomSampler(dataset, seed=seed) if shuffle else SequentialSampler(dataset)


def forward_set_epoch(batch_sampler: Any) -> None:
    """Give PyTorch's ``BatchSampler`` a ``set_epoch`` that tells its sampler, if that
    sampler has one.

    The HF ``Trainer`` resumes mid-epoch by iterating ``loader.batch_sampler`` inside a
    torch loader of Accelerate's (``skip_first_batches``) and places that epoch only
    through the batch sampler's ``set_epoch``. The class stays PyTorch's own: Lightning
    re-creates a batch sampler of any other class as a custom one.

    Example:
        >>> batches = tud.BatchSampler(RandomSampler(range(4), seed=0), 2, False)
        >>> forward_set_epoch(batches)
        >>> batches.set_epoch(5)
        >>> batches.sampler.placed
        5
    """
    set_epoch = getattr(getattr(batch_sampler, "sampler", None), "set_epoch", None)
    if callable(set_epoch) and not hasattr(batch_sampler, "set_epoch"):
        batch_sampler.set_epoch = set_epoch
