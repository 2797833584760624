"""``loader_sampler``: the order a loader reads a map-style dataset in.

``sk.mix`` decides its own order (its sources' shares); otherwise a ``sampler=``
argument (stoker's or any iterable of indices, such as a PyTorch sampler),
``shuffle=True`` (a seeded :class:`~stoker.RandomSampler`) or the records in order.
A ``batch_sampler=`` replaces the sampler altogether (None here).
"""

from __future__ import annotations

from typing import Any

from .._config import LoaderConfig
from .._dataset import Dataset
from ..errors import ConfigError
from .base import Sampler
from .foreign import as_sampler
from .random import RandomSampler
from .sequential import SequentialSampler

__all__ = ["loader_sampler"]


def loader_sampler(cfg: LoaderConfig, ds: Dataset[Any]) -> Sampler | None:
    """The sampler a loader configured by ``cfg`` reads ``ds`` with; None when a
    ``batch_sampler`` gives the batches.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> type(loader_sampler(LoaderConfig(shuffle=True), sk.range(4))).__name__
        'RandomSampler'

    Errors:
        ConfigError: an empty dataset; ``sampler=`` or ``batch_sampler=`` with
            ``sk.mix``; a ``batch_sampler`` that is not iterable.
    """
    n = len(ds)
    if n == 0:
        raise ConfigError(
            f"the dataset {ds!r} is empty: an empty source is almost always a mistake "
            "(an empty glob, a wrong filter on the source, a wrong path)"
        )
    mixture = ds._mixture()  # sk.mix decides the order of its sources' records
    if mixture is not None and (cfg.sampler is not None or cfg.batch_sampler is not None):
        raise ConfigError(
            "sampler= and batch_sampler= conflict with sk.mix, which decides the order "
            "its sources are read in: drop them (set the shares with the mix's weights)"
        )
    if mixture is not None:
        return mixture.sampler(shuffle=cfg.shuffle, seed=cfg.seed)
    if cfg.batch_sampler is not None:
        if not hasattr(cfg.batch_sampler, "__iter__"):
            raise ConfigError(
                f"batch_sampler must be iterable (yield lists of indices), "
                f"got {type(cfg.batch_sampler).__name__}"
            )
        return None
    if cfg.sampler is not None:
        return as_sampler(cfg.sampler, n)
    if cfg.shuffle:
        return RandomSampler(n, seed=cfg.seed)
    return SequentialSampler(n)
