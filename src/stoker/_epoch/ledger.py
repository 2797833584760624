"""The order ledger: which records batch ``step`` of ``epoch`` holds, without reading.

A map-style loader's order is a pure function of (seed, epoch, position), so the
records of any batch are computed from the sampler alone, as the plans compute them
(:class:`~stoker._epoch.plan.MapPlan` for a sampler, the batch-sampler plan for a
batch sampler). A batch whose records depend on their contents (a filter, ``pack``,
``on_error="skip"``) or on a stream has no such answer: :class:`NotSupportedError`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._config import LoaderConfig
from .._dataset import Dataset
from .._hosts import Shard, host_slice
from .._iterdataset import IterDataset
from .._sampling.base import Sampler, check_int
from .._sampling.batch import BatchSampler
from ..errors import NotSupportedError

__all__ = ["batch_indices", "mixture_sources"]


def batch_indices(
    cfg: LoaderConfig,
    dataset: Dataset[Any] | IterDataset[Any],
    sampler: Sampler | None,
    hosts: Shard,
    epoch: int,
    step: int,
) -> list[int]:
    """The dataset indices of this host's batch ``step`` of ``epoch``.

    Errors:
        NotSupportedError: a stream, or batches that depend on the records' contents.
        IndexError: the epoch has fewer batches on this host.
        ConfigError: a negative epoch or step.
    """
    epoch = check_int(epoch, "epoch", minimum=0)
    step = check_int(step, "step", minimum=0)
    if isinstance(dataset, IterDataset):
        raise NotSupportedError(
            "a stream's batches are what it yields: they cannot be computed without "
            "reading it (batch_indices covers map-style datasets)"
        )
    if dataset.may_skip or cfg.on_error == "skip" or dataset._packer(1) is not None:
        raise NotSupportedError(
            "this pipeline fills its batches with the records that pass (a filter, sk.pack "
            "or on_error='skip'): which records a batch holds depends on their contents, "
            "so it cannot be computed without reading them"
        )
    if cfg.batch_sampler is not None:
        return _from_batch_sampler(cfg, hosts, epoch, step)
    if sampler is None:
        raise RuntimeError("a map-style loader without a sampler")
    return _from_sampler(cfg, sampler, hosts, epoch, step)


def _from_sampler(
    cfg: LoaderConfig, sampler: Sampler, hosts: Shard, epoch: int, step: int
) -> list[int]:
    size = (cfg.batch_size or 1) * hosts.count  # a global batch
    last_batch = cfg.last_batch if cfg.batch_size is not None else "keep"
    carry: list[int] = []
    if last_batch == "rollover":
        carry = BatchSampler(sampler, batch_size=size, last_batch="rollover").carry_into(epoch)
    start = step * size
    taken = carry[start : start + size]
    fresh_at = max(0, start - len(carry))
    length = len(sampler)
    fresh = (
        sampler.cursor(epoch, fresh_at).take(size - len(taken)).tolist()
        if fresh_at < length
        else []
    )
    batch = taken + fresh
    count = len(batch)
    lo, hi = host_slice(count, hosts) if hosts.count > 1 else (0, count)
    if count == 0 or hi == lo or (count < size and last_batch != "keep"):
        raise IndexError(_past_end(step, epoch, hosts))
    return batch[lo:hi]


def _from_batch_sampler(cfg: LoaderConfig, hosts: Shard, epoch: int, step: int) -> list[int]:
    batch_sampler = cfg.batch_sampler
    if callable(getattr(batch_sampler, "host_cursor", None)):
        steps = batch_sampler.steps(epoch, hosts=hosts.count, seed=cfg.seed)
        if step >= len(steps):
            raise IndexError(_past_end(step, epoch, hosts))
        return [int(i) for i in steps[step][hosts.index]]
    if hasattr(batch_sampler, "set_epoch"):
        batch_sampler.set_epoch(epoch)
    delivered = -1
    for indices in batch_sampler:
        idx = np.asarray(list(indices), dtype=np.int64)
        if hosts.count > 1:
            lo, hi = host_slice(len(idx), hosts)
            if hi == lo:
                continue
            idx = idx[lo:hi]
        delivered += 1
        if delivered == step:
            return [int(i) for i in idx]
    raise IndexError(_past_end(step, epoch, hosts))


def mixture_sources(dataset: Any, indices: list[int]) -> list[list[Any]] | None:
    """``[source name, index in it]`` per index of a map-style ``sk.mix``; else None."""
    if isinstance(dataset, IterDataset):
        return None
    mixture = dataset._mixture()
    if mixture is None:
        return None
    parts, local = mixture._split(np.asarray(indices, dtype=np.int64))
    names = mixture.names
    return [[names[int(p)], int(i)] for p, i in zip(parts, local, strict=True)]


def _past_end(step: int, epoch: int, hosts: Shard) -> str:
    where = f" on host {hosts.index} of {hosts.count}" if hosts.count > 1 else ""
    return f"epoch {epoch} has no batch {step}{where}: it has fewer batches"
