"""Accelerate prepares the drop-in as its own, and stoker's engine keeps loading.

``accelerator.prepare(loader)`` rebuilds any ``torch.utils.data.DataLoader`` into
Accelerate's ``DataLoaderShard``: the shard's batch sampler (``BatchSamplerShard``, or
an ``IterableDatasetShard`` for a stream) and a new ``torch.utils.data.DataLoader``
built from the loader's arguments as its ``base_dataloader``. On its own, that base is
PyTorch's loader: stoker's workers, buffers and state would be gone.

:func:`prepare_for_accelerate` lets Accelerate build its shard exactly as for a
PyTorch loader (sharding, ``even_batches``, ``end_of_dataloader`` and ``remainder``
for gradient accumulation and ``gather_for_metrics``, device placement, ``set_epoch``),
then swaps the base for a stoker loader over the very batch sampler Accelerate built.
The shard stays registered with the accelerator, so ``save_state`` / ``load_state``
reach it. :func:`skip_first_batches` skips by a resume state instead of a new PyTorch
loader, so the shard's epoch count (``iteration``) stays that of an uninterrupted run.

``accelerate`` is imported only when these functions run.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from torch.utils.data import IterableDataset

from .._state import EPOCH, KIND, position_state
from ..errors import ConfigError, NotSupportedError
from ._loader import DataLoader
from ._samplers import RandomSampler

if TYPE_CHECKING:
    from accelerate import Accelerator  # type: ignore[import-untyped]

__all__ = ["prepare_for_accelerate", "skip_first_batches"]

_FINISHED = "_iterator_finished"  # Accelerate's mark in the state it saves


class _ShardBase(DataLoader[Any]):
    """The drop-in as the ``base_dataloader`` of an Accelerate shard.

    Each pass walks the shard's epoch (``iteration``, which Accelerate places with
    ``set_epoch``); a state loaded through the shard (``load_state`` with
    ``use_stateful_dataloader=True``) sets the shard's epoch back to the state's.
    """

    def __init__(self, owner: Any, seed: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if seed != self._seed:  # the user's loader's order, not one drawn here
            self._seed = seed
            self.close()
            self._build()
        self._owner = weakref.ref(owner)
        self._skipped = 0  # batches a skip_first_batches takes off the next pass

    def __iter__(self) -> Any:
        owner = self._owner()
        if owner is not None:
            self.set_epoch(owner.iteration)
        whole_epoch = self._skipped > 0 and self._skipped == DataLoader.__len__(self)
        self._skipped = 0
        it = super().__iter__()
        if whole_epoch and owner is not None:
            owner.iteration += 1  # the shard counts no epoch for a pass without batches
        return it

    def __len__(self) -> int:
        return super().__len__() - self._skipped

    def _track(self) -> None:
        return None  # the Accelerate shard around it reports the pass to GradientState

    def load_state_dict(self, state: Any) -> None:
        """Resume at ``state`` (Accelerate's end-of-loader mark is accepted) and set the
        shard's epoch to the state's."""
        if not isinstance(state, dict):
            super().load_state_dict(state)  # refused there, with its message
            return
        rest = {key: value for key, value in state.items() if key != _FINISHED}
        super().load_state_dict(rest)
        self._skipped = 0
        owner = self._owner()
        if owner is not None:
            owner.iteration = rest[EPOCH]
            owner.dl_state_dict = {**rest, _FINISHED: bool(state.get(_FINISHED, False))}

    def skip(self, epoch: int, batches: int) -> None:
        """Start the next pass at batch ``batches`` of ``epoch`` (the batch sampler's
        first ``batches`` batches are passed over as indices; no record is read)."""
        header = self._loader._header()
        if header[KIND] != "batch_sampler":
            raise NotSupportedError(
                "skip_first_batches needs a map-style dataset; a stream resumes from a saved "
                "state: Accelerator(dataloader_config=DataLoaderConfiguration("
                "use_stateful_dataloader=True)) with save_state / load_state"
            )
        length = DataLoader.__len__(self)
        if batches > length:
            raise ConfigError(
                f"cannot skip {batches} batches of an epoch of {length} in this process"
            )
        DataLoader.load_state_dict(self, position_state(header, epoch, batches))
        self._skipped = batches


def _rebuild(owner: Any, loader: DataLoader[Any], base: Any) -> _ShardBase:
    """A stoker loader over what Accelerate built into ``base`` (its dataset, its
    batch sampler), with the user's loader's other arguments."""
    dataset = base.dataset
    kwargs: dict[str, Any]
    if isinstance(dataset, IterableDataset):
        kwargs = {"batch_size": base.batch_size, "drop_last": base.drop_last}
    elif base.batch_sampler is not None:
        kwargs = {"batch_sampler": base.batch_sampler}
    else:  # a sampler that yields batches, batch_size=None
        kwargs = {"sampler": base.sampler, "batch_size": None}
    return _ShardBase(
        owner,
        loader._seed,
        dataset=dataset,
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        multiprocessing_context=loader.multiprocessing_context,
        generator=loader.generator,
        prefetch_factor=loader.prefetch_factor,
        persistent_workers=loader.persistent_workers,
        in_order=loader.in_order,
        **kwargs,
    )


def _check_seeds_agree(accelerator: Accelerator, loader: DataLoader[Any]) -> None:
    """Each process shards the same order: the shuffle seed must be the same in all."""
    if accelerator.num_processes == 1 or not isinstance(loader.sampler, RandomSampler):
        return
    from accelerate.utils import gather_object  # type: ignore[import-untyped]

    seeds = gather_object([loader._seed])
    if len(set(seeds)) > 1:
        raise ConfigError(
            f"the loader's shuffle seed differs across processes ({seeds}), so their "
            "shards would overlap: call accelerate.utils.set_seed(seed) before building the "
            "loader, or pass generator=torch.Generator().manual_seed(seed)"
        )


def prepare_for_accelerate(
    accelerator: Accelerator, loader: DataLoader[Any], *, device_placement: bool | None = None
) -> Any:
    """Prepare ``loader`` with ``accelerator`` as Accelerate prepares a PyTorch loader,
    keeping stoker's engine.

    Accelerate builds its ``DataLoaderShard`` (this process's shard of every epoch,
    ``even_batches``, ``end_of_dataloader`` and ``remainder`` for gradient accumulation
    and ``gather_for_metrics``, device placement, ``set_epoch``); its
    ``base_dataloader`` is then a :class:`DataLoader` over the batch sampler Accelerate
    built, loading with the user's workers and settings. The result is registered
    with the accelerator (``save_state`` / ``load_state`` reach it; with
    ``use_stateful_dataloader=True`` they save and restore its exact position) and
    marked prepared, so a later ``accelerator.prepare(model, optimizer, loader)``
    returns it unchanged.

    Args:
        accelerator: the ``accelerate.Accelerator``.
        loader: a :class:`stoker.torch.DataLoader`.
        device_placement: as for ``Accelerator.prepare_data_loader``.

    Returns:
        Accelerate's prepared loader; ``isinstance(prepared, stoker.torch.DataLoader)``
        holds (Accelerate reports its base's class).

    Example:
        >>> from accelerate import Accelerator
        >>> from stoker.torch import DataLoader, prepare_for_accelerate
        >>> accelerator = Accelerator(cpu=True)
        >>> loader = prepare_for_accelerate(accelerator, DataLoader(list(range(6)), batch_size=4))
        >>> [batch.tolist() for batch in loader]
        [[0, 1, 2, 3], [4, 5]]

    Errors:
        ConfigError: ``loader`` is not a :class:`stoker.torch.DataLoader`; or, in
            several processes, its shuffle seed differs between them.
        NotSupportedError: Accelerate wrapped the loader in a class without a
            ``base_dataloader`` (on TPUs).
    """
    if not isinstance(loader, DataLoader):
        raise ConfigError(
            f"prepare_for_accelerate takes a stoker.torch.DataLoader, got "
            f"{type(loader).__name__}: prepare other loaders with accelerator.prepare"
        )
    _check_seeds_agree(accelerator, loader)
    prepared = accelerator.prepare_data_loader(loader, device_placement=device_placement)
    base = getattr(prepared, "base_dataloader", None)
    if base is None:
        raise NotSupportedError(
            f"Accelerate wrapped the loader in {type(prepared).__name__}, which has no "
            "base_dataloader to load with stoker"
        )
    # The PyTorch loader Accelerate built has started no worker (it was never
    # iterated); it is dropped here.
    ours = _rebuild(prepared, loader, base)
    prepared.base_dataloader = ours
    prepared.dl_state_dict = {**ours.state_dict(), _FINISHED: False}
    prepared._is_accelerate_prepared = True
    return prepared


def skip_first_batches(dataloader: Any, num_batches: int = 0) -> Any:
    """Make the next pass of a loader from :func:`prepare_for_accelerate` start after
    its first ``num_batches`` batches, as ``accelerator.skip_first_batches`` does.

    The pass is the shard's current epoch (``dataloader.iteration``; place it with
    ``dataloader.set_epoch(epoch)`` when resuming in a new process). Batches are
    skipped by resuming stoker's engine at that position, so no record is read, and
    the loader itself is returned: after the pass, its epoch count moves on as in an
    uninterrupted run, so the next ``for batch in dataloader`` is the next epoch
    (Accelerate's own function returns a new loader whose epoch count is lost).
    ``len()`` of the loader is the rest of the epoch until the pass starts.

    Example:
        >>> from accelerate import Accelerator
        >>> from stoker.torch import DataLoader, prepare_for_accelerate, skip_first_batches
        >>> loader = prepare_for_accelerate(
        ...     Accelerator(cpu=True), DataLoader(list(range(6)), batch_size=2)
        ... )
        >>> [batch.tolist() for batch in skip_first_batches(loader, 2)]
        [[4, 5]]
        >>> loader.iteration
        1

    Errors:
        ConfigError: ``dataloader`` did not come from :func:`prepare_for_accelerate`,
            or ``num_batches`` is not an int >= 0 or is more than the epoch's batches.
        NotSupportedError: an iterable dataset (resume it from a saved state).
    """
    base = getattr(dataloader, "base_dataloader", None)
    if not isinstance(base, _ShardBase):
        raise ConfigError(
            "skip_first_batches takes a loader returned by stoker.torch.prepare_for_accelerate"
        )
    if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 0:
        raise ConfigError(f"num_batches must be an int >= 0, got {num_batches!r}")
    base.skip(dataloader.iteration, num_batches)
    return dataloader
