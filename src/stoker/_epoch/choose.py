"""``epoch_plan``: which plan an epoch follows (stages 2-4), chosen once per iterator.

A stream read in this process follows a :class:`~stoker._epoch.stream.StreamPlan`, a
stream split across workers :class:`~stoker._epoch.parts.StreamParts` (each worker
reads and collates its part), a batch sampler a
:class:`~stoker._epoch.batch_sampler.BatchSamplerPlan`, and a sampler over a map-style
dataset a :class:`~stoker._epoch.plan.MapPlan`. The others fill batches through one
builder. Every plan shows the iterator the same members
(:class:`~stoker._epoch.plan.EpochPlan`).
"""

from __future__ import annotations

from typing import Any

from .._batching.builder import BatchBuilder
from .._config import LoaderConfig
from .._dataset import Dataset
from .._hosts import Shard
from .._iterdataset import IterDataset
from .._sampling.base import Sampler
from .._settings import Settings
from .batch_sampler import BatchSamplerPlan
from .parts import StreamParts
from .plan import EpochPlan, MapPlan
from .stream import StreamPlan

__all__ = ["epoch_plan"]


def epoch_plan(
    cfg: LoaderConfig,
    ds: Dataset[Any] | IterDataset[Any],
    sampler: Sampler | None,
    hosts: Shard,
    header: dict[str, Any],
    settings: Settings,
    epoch: int,
    state: dict[str, Any] | None,
) -> tuple[EpochPlan, BatchBuilder | None]:
    """The plan of one epoch (stages 2-4: which records make each batch, and the state
    after it) and the batch builder it fills (None when workers collate: a stream
    split across workers), for a map-style dataset or a stream read in worker
    ``settings.mode`` (resolved: "inline", "thread", "process" or "ray"); its
    buffer pools and reads ahead sized by ``settings``.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._hosts import ONE_HOST
        >>> from stoker._sampling.sequential import SequentialSampler
        >>> from stoker._settings import settings_for
        >>> from stoker._state import loader_header
        >>> cfg = LoaderConfig(batch_size=2)
        >>> plan, builder = epoch_plan(cfg, sk.range(4), SequentialSampler(4), ONE_HOST,
        ...                            loader_header(cfg, 4, ONE_HOST),
        ...                            settings_for(cfg, sk.range(4)), 0, None)
        >>> type(plan).__name__, plan.job_per_batch, plan.next_job(0).parts[0][1].tolist()
        ('MapPlan', True, [0, 1])
        >>> builder.close()
    """
    # What every plan starts from: the seed, the header, the epoch, its state, the hosts.
    where: dict[str, Any] = {
        "seed": cfg.seed,
        "header": header,
        "epoch": epoch,
        "state": state,
        "hosts": hosts,
    }
    if isinstance(ds, IterDataset) and settings.mode != "inline":  # each worker reads its own part
        return StreamParts(
            num_parts=cfg.num_workers,
            batch_size=cfg.batch_size,
            last_batch=cfg.last_batch,
            dataset=ds,
            ordered=cfg.ordered,
            part_depth=settings.part_depth(cfg.num_workers),
            **where,
        ), None
    builder = None
    if isinstance(ds, Dataset) or cfg.batch_size is not None:
        builder = BatchBuilder(
            ds if isinstance(ds, Dataset) else None,
            cfg.collate_fn,
            cfg.batch_size or 1,
            pool_slots=settings.pool_slots,
            on_error=cfg.on_error,
        )
    if isinstance(ds, IterDataset):
        return StreamPlan(
            dataset=ds,
            builder=builder,
            batch_size=cfg.batch_size,
            last_batch=cfg.last_batch,
            **where,
        ), builder
    if builder is None:
        raise RuntimeError("a map-style loader without a builder")
    if cfg.batch_sampler is not None:
        return BatchSamplerPlan(
            builder=builder,
            batch_sampler=cfg.batch_sampler,
            dataset_len=len(ds),
            **where,
        ), builder
    if sampler is None:
        raise RuntimeError("a map-style loader without a sampler")
    return MapPlan(
        builder=builder,
        sampler=sampler,
        batch_size=cfg.batch_size,
        last_batch=cfg.last_batch,
        skips=ds.may_skip or cfg.on_error == "skip",
        **where,
    ), builder
