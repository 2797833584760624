"""``epoch_plan``: which plan an epoch follows (stages 2-4), chosen once per iterator.

A stream follows a :class:`~stoker._epoch.stream.StreamPlan`, a batch sampler a
:class:`~stoker._epoch.batch_sampler.BatchSamplerPlan`, and a sampler over a map-style
dataset a :class:`~stoker._epoch.plan.MapPlan`; each fills batches through one builder.
"""

from __future__ import annotations

from typing import Any

from .._batching.builder import BatchBuilder
from .._config import DEFAULT_DEPTH, LoaderConfig
from .._dataset import Dataset, IterDataset
from .._hosts import Shard
from .._sampling.base import Sampler
from .batch_sampler import BatchSamplerPlan
from .plan import MapPlan
from .stream import StreamPlan

__all__ = ["epoch_plan"]


def epoch_plan(
    cfg: LoaderConfig,
    ds: Dataset[Any] | IterDataset[Any],
    sampler: Sampler | None,
    hosts: Shard,
    header: dict[str, Any],
    epoch: int,
    state: dict[str, Any] | None,
) -> tuple[Any, BatchBuilder | None]:
    """The plan of one epoch (stages 2-4: which records make each batch, and the state
    after it) and the batch builder it fills, for a map-style dataset or a stream."""
    builder = None
    if isinstance(ds, Dataset) or cfg.batch_size is not None:
        pool_slots = (cfg.prefetch if cfg.prefetch is not None else DEFAULT_DEPTH) + 3
        builder = BatchBuilder(
            ds if isinstance(ds, Dataset) else None,
            cfg.collate_fn,
            cfg.batch_size or 1,
            pool_slots=pool_slots,
            on_error=cfg.on_error,
        )
    if isinstance(ds, IterDataset):
        return StreamPlan(
            dataset=ds,
            builder=builder,
            batch_size=cfg.batch_size,
            last_batch=cfg.last_batch,
            seed=cfg.seed,
            header=header,
            hosts=hosts,
            epoch=epoch,
            state=state,
        ), builder
    if builder is None:
        raise RuntimeError("a map-style loader without a builder")
    if cfg.batch_sampler is not None:
        return BatchSamplerPlan(
            builder=builder,
            batch_sampler=cfg.batch_sampler,
            dataset_len=len(ds),
            seed=cfg.seed,
            header=header,
            hosts=hosts,
            epoch=epoch,
            state=state,
        ), builder
    if sampler is None:
        raise RuntimeError("a map-style loader without a sampler")
    return MapPlan(
        builder=builder,
        sampler=sampler,
        batch_size=cfg.batch_size,
        last_batch=cfg.last_batch,
        seed=cfg.seed,
        skips=ds._may_skip or cfg.on_error == "skip",
        header=header,
        hosts=hosts,
        epoch=epoch,
        state=state,
    ), builder
