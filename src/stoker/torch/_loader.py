"""``DataLoader``: ``torch.utils.data.DataLoader``'s arguments and batches, stoker's engine.

Mapping onto :class:`stoker.DataLoader`:

* ``shuffle=True`` is stoker's :class:`~stoker.RandomSampler`, seeded from the
  ``generator``'s (or torch's global) initial seed: deterministic and exactly
  resumable, and drawing nothing from the generator. Its permutations differ from
  PyTorch's ``randperm`` order.
* ``drop_last`` is ``last_batch="drop"``; ``in_order`` is ``ordered``;
  ``multiprocessing_context`` is ``start_method`` (default: the platform's, as for
  PyTorch); ``timeout=0`` is no timeout; ``prefetch_factor`` is per worker, stoker's
  ``prefetch`` counts for the whole loader (``prefetch_factor * num_workers``).
* ``num_workers > 0`` runs process workers seeded as PyTorch's, in which
  ``torch.utils.data.get_worker_info()`` works and ``worker_init_fn(worker_id)`` runs.
* The default collation stacks into stoker's recycled (shared-memory) buffers and
  hands them out as tensors without a copy, shaped as ``default_collate`` shapes them.
* ``batch_size=None`` reads ``dataset[item]`` for every item the sampler yields, an
  index or a list of indices (bulk loading), as PyTorch does.
* A user's sampler is only iterated: ``set_epoch`` is the user's to call, as with
  PyTorch. A sampler or dataset with ``state_dict()``/``load_state_dict()``
  (torchdata's ``Stateful``) is asked for its state and given it back; the state also
  holds the workers' base seed, as torchdata's ``StatefulDataLoader``'s does.
* ``len(dataset)`` is read per epoch: a dataset that grows is read whole.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sized
from functools import partial
from typing import Any, TypeVar, cast

import torch
import torch.utils.data as tud
from torch.utils.data import BatchSampler, IterableDataset
from torch.utils.data import default_collate as torch_default_collate
from torch.utils.data import default_convert as torch_default_convert
from torch.utils.data.dataloader import _InfiniteConstantSampler

import stoker as sk

from .._sources.wrap import as_dataset
from .._state import TORCH
from ..errors import ConfigError, StateError
from ._args import check_args
from ._device import pinning_available, warn_no_pinning
from ._gradient_state import PassProgress, track
from ._items import FirstRecord, ItemBatches, ItemReader
from ._iterator import TorchLoaderIterator, WorkerLife
from ._samplers import PlacedEpoch, forward_set_epoch, loader_sampler
from ._shapes import torch_collated, torch_converted
from ._stateful import RestoreOnFirstIndex, from_json, is_stateful, to_json
from ._stream import TorchStream
from ._workers import SeedBox, TorchWorkerInit, draw_base_seed

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


def _check_epoch(epoch: object) -> int:
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ConfigError(f"epoch must be an int >= 0, got {epoch!r}")
    return epoch


def _same(batch: Any) -> Any:
    return batch


class _Hidden:
    """A user's sampler as PyTorch's loader sees it: iterated, never told the epoch
    (``set_epoch`` is the user's to call, as with PyTorch) nor asked for its state
    (the drop-in keeps that)."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler

    def __iter__(self) -> Any:
        return iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)


def _hidden(sampler: Any) -> Any:
    if is_stateful(sampler) or callable(getattr(sampler, "set_epoch", None)):
        return _Hidden(sampler)
    return sampler


class DataLoader(tud.DataLoader[T_co]):
    """A drop-in for ``torch.utils.data.DataLoader`` that resumes exactly.

    It is a ``torch.utils.data.DataLoader`` (``isinstance`` holds, and the attributes
    trainers read have PyTorch's meanings), takes PyTorch's arguments and yields the
    batches PyTorch would (tensors, with ``default_collate``'s structure), and adds
    ``state_dict()`` / ``load_state_dict()`` on the loader and its iterators and
    ``set_epoch()``. The data path is :class:`stoker.DataLoader`'s: batches are
    collated into recycled buffers and handed out as tensors sharing them, never
    overwritten while you hold them.

    Trainers that re-create a loader from its arguments with a sampler of their own
    (Lightning's distributed sampler, ``overfit_batches``) get this class back, and
    its engine honours their sampler. The epoch a pass walks is the one placed last
    with ``loader.set_epoch(e)`` or ``loader.sampler.set_epoch(e)``; without one, the
    epoch after the previous pass.

    While an Accelerate ``Accelerator`` exists in the process (the HF ``Trainer``
    makes one), each pass tells Accelerate's ``GradientState`` what Accelerate's own
    loaders tell it: when the last batch is handed out, and how many records it holds,
    so that ``gather_for_metrics`` and gradient accumulation see the loader's end.

    Differences from PyTorch: ``shuffle=True`` orders records by stoker's
    permutation of ``(seed, epoch)`` (the seed from ``generator``), not PyTorch's; with
    workers, a batch goes to whichever worker is free, so per-worker random state is
    the same as PyTorch's but which batches a worker builds may differ; a timeout
    raises :class:`~stoker.LoaderTimeout` (a ``TimeoutError``); ``pin_memory_device``
    is ignored (deprecated in PyTorch).

    Example:
        >>> import torch
        >>> from torch.utils.data import TensorDataset
        >>> from stoker.torch import DataLoader
        >>> data = TensorDataset(torch.arange(10.0), torch.arange(10))
        >>> loader = DataLoader(data, batch_size=4)
        >>> isinstance(loader, torch.utils.data.DataLoader)
        True
        >>> it = iter(loader)
        >>> next(it)
        [tensor([0., 1., 2., 3.]), tensor([0, 1, 2, 3])]
        >>> state = it.state_dict()  # JSON-serialisable
        >>> loader.load_state_dict(state)
        >>> [y.tolist() for _, y in loader]
        [[4, 5, 6, 7], [8, 9]]

    Resources:
        With ``num_workers > 0``, worker processes: they start with an iterator and,
        unless ``persistent_workers=True``, end with it; :meth:`close`, setting
        ``loader._iterator = None`` (as Lightning does), leaving a ``with`` block, or
        garbage collection ends them.

    Errors:
        ConfigError (a ``ValueError``): the argument combinations PyTorch rejects,
        raised here. An exception in a worker reaches ``next()`` as its own type with
        the sample and batch index noted.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ) -> None:
        iterable = isinstance(dataset, IterableDataset | sk.IterDataset)
        args = check_args(
            iterable=iterable,
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=num_workers,
            drop_last=drop_last,
            timeout=timeout,
            multiprocessing_context=multiprocessing_context,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
        )
        self._stoker: sk.DataLoader[Any] | None = None  # set by _build; read by _iterator
        self._iterable = iterable
        self._shuffle = args.shuffle
        self._given_sampler = sampler
        self._given_batch_sampler = batch_sampler
        self._start_method = args.start_method
        self._seed = int(
            generator.initial_seed() if generator is not None else torch.initial_seed()
        )
        if sampler is None and batch_sampler is None and not isinstance(dataset, IterableDataset):
            sampler = self._own_sampler(dataset)
        # PyTorch's constructor sets PyTorch's attributes with PyTorch's meanings (and
        # warns, as PyTorch does, about more workers than CPUs).
        super().__init__(
            dataset,
            batch_size=batch_size,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=num_workers,
            collate_fn=collate_fn,
            pin_memory=pin_memory,
            drop_last=drop_last,
            timeout=timeout,
            worker_init_fn=worker_init_fn,
            multiprocessing_context=multiprocessing_context,
            generator=generator,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
            pin_memory_device=pin_memory_device,
            in_order=in_order,
        )
        if batch_sampler is None and self.batch_sampler is not None:
            forward_set_epoch(self.batch_sampler)  # PyTorch's, over the sampler
        self._pin = bool(pin_memory) and pinning_available()
        if pin_memory and not self._pin:
            warn_no_pinning(stacklevel=2)
        self._seeds = SeedBox()
        # torchdata's Stateful protocol: the sampler the drop-in asks for its state.
        stateful = batch_sampler if batch_sampler is not None else self._given_sampler
        self._stateful_sampler = stateful if is_stateful(stateful) else None
        self._sampler_start: Any = None  # its state when the most recent pass began
        # A stateful map-style dataset read in this process (its RNG, say), as torchdata.
        self._stateful_dataset = not num_workers and not iterable and is_stateful(dataset)
        self._restore_on: RestoreOnFirstIndex | None = None  # a user's sampler, then
        self._pending_torch: dict[str, Any] | None = None  # from load_state_dict
        self._len_called: int | None = None  # len(dataset) of an IterableDataset, once asked
        self._placed: int | None = None  # from set_epoch, for the next pass
        self._latest: weakref.ref[TorchLoaderIterator] | None = None  # the latest pass
        self._init_fn_set = False  # worker_init_fn set after __init__: rebuild before a pass
        self._build()
        self._initialized = True

    def _dataset_len(self) -> int:
        return len(cast(Sized, self.dataset))

    def _own_sampler(self, dataset: Any) -> Any:
        """The sampler for no given sampler: stoker's order, PyTorch's class for trainers."""
        if self._iterable:
            return _InfiniteConstantSampler()
        return loader_sampler(dataset, self._shuffle, self._seed)

    def _build(self) -> None:
        """The stoker loader for the dataset's current length."""
        self._n = None if self._iterable else self._dataset_len()
        self._shape: Callable[[Any], Any] = _same
        self._stoker = self._stoker_loader(self._seed, self._start_method)
        self._life = WorkerLife(self._stoker, self.persistent_workers)

    @property
    def _loader(self) -> sk.DataLoader[Any]:
        loader = self._stoker
        if loader is None:
            raise RuntimeError("the stoker loader is built at the end of __init__")
        return loader

    def _refresh(self) -> None:
        """Rebuild for a map-style dataset whose length changed (PyTorch reads it per epoch)
        or a ``worker_init_fn`` set after ``__init__``.

        The epoch count and a loaded state carry over; a loaded state of the old length
        is then refused by its ``dataset_len``.
        """
        if self._life.active:
            return
        resized = not self._iterable and self._dataset_len() != self._n
        if not (resized or self._init_fn_set):
            return
        old = self._loader
        pending = old._pending
        next_epoch = old._next_epoch
        old.close()
        if resized and self._given_sampler is None:  # the own sampler covers the new length
            sampler = self._own_sampler(self.dataset)
            object.__setattr__(self, "sampler", sampler)
            if self._given_batch_sampler is None and self.batch_size is not None:
                batches = BatchSampler(sampler, self.batch_size, self.drop_last)
                forward_set_epoch(batches)
                object.__setattr__(self, "batch_sampler", batches)
        self._build()
        self._init_fn_set = False
        self._loader._next_epoch = next_epoch
        if pending is not None:
            self._loader.load_state_dict(pending)

    def _hide(self, sampler: Any) -> Any:
        """A user's sampler as stoker iterates it (see :func:`_hidden`); before a
        stateful dataset read here, the one that restores it as torchdata orders it."""
        if self._stateful_dataset:
            self._restore_on = RestoreOnFirstIndex(sampler)
            return self._restore_on
        return _hidden(sampler)

    def _stoker_loader(self, seed: int, start_method: str) -> sk.DataLoader[Any]:
        dataset, workers = self.dataset, self.num_workers
        source: Any = dataset
        if isinstance(dataset, IterableDataset):
            fresh = bool(workers) and not self.persistent_workers  # PyTorch's copies per pass
            source = TorchStream(dataset, fresh_each_pass=fresh)
        stream = isinstance(source, TorchStream | sk.IterDataset)
        kwargs: dict[str, Any] = {}
        collate_fn: Any = self.collate_fn
        own_sampler = isinstance(self.sampler, PlacedEpoch)
        if self.batch_size is None and self._given_batch_sampler is None:
            if not stream and self._given_sampler is not None:
                # Each item of the sampler (an index or a list of them) is dataset[item].
                kwargs["batch_sampler"] = ItemBatches(self._hide(self._given_sampler), dataset)
                source, collate_fn = ItemReader(dataset), FirstRecord(self.collate_fn)
            else:  # records one by one; collate_fn converts each
                kwargs["batch_size"] = None
                if not stream:
                    kwargs["sampler"] = self.sampler
                if collate_fn is torch_default_convert:
                    self._shape = torch_converted  # stoker converts; the records are reshaped
                else:
                    source = as_dataset(source).map(collate_fn)
                collate_fn = None
        else:
            if self._given_batch_sampler is not None:
                kwargs["batch_sampler"] = self._hide(self._given_batch_sampler)
            else:
                kwargs["batch_size"] = self.batch_size
                if not stream:
                    kwargs["sampler"] = self.sampler if own_sampler else self._hide(self.sampler)
            if collate_fn is torch_default_collate:
                self._shape = torch_collated  # stoker collates; the batches are reshaped
                collate_fn = None
        prefetch = 0  # without workers, load in step with the caller, as PyTorch does
        if workers:
            prefetch = (self.prefetch_factor or 0) * workers or 2 * workers
        return sk.DataLoader(
            source,
            seed=seed,
            last_batch="drop" if self.drop_last else "keep",
            collate_fn=collate_fn,
            num_workers=workers,
            worker_mode="process" if workers else "inline",
            prefetch=prefetch,
            ordered=self.in_order,
            worker_init_fn=TorchWorkerInit(dataset, self.worker_init_fn) if workers else None,
            worker_init_arg=self._seeds.get if workers else None,
            start_method=start_method,  # type: ignore[arg-type]
            timeout=self.timeout or None,
            **kwargs,
        )

    # -- PyTorch's attributes -------------------------------------------------------

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FROZEN and getattr(self, "_initialized", False):
            raise ConfigError(
                f"{name} attribute should not be set after {type(self).__name__} is "
                "initialized: build a new loader"
            )
        super().__setattr__(name, value)
        if name == "worker_init_fn" and getattr(self, "_initialized", False):
            # Set on a built loader (Lightning's seed_everything(workers=True) does):
            # the workers started next run it, as PyTorch's do.
            self._init_fn_set = True

    @property
    def _iterator(self) -> Any:
        """PyTorch keeps its persistent workers' iterator here; trainers end those
        workers by setting it to None (Lightning does after ``fit``), and so do they end
        stoker's."""
        return None

    @_iterator.setter
    def _iterator(self, value: Any) -> None:
        if value is None and self._stoker is not None:
            self._stoker.close()

    def __len__(self) -> int:
        """Batches in an epoch, computed as PyTorch computes it (the dataset's length is
        read now, so a dataset that grew counts its new records).

        Errors:
            TypeError: an IterableDataset without ``__len__``.
        """
        if self._given_batch_sampler is not None:
            return len(self._given_batch_sampler)
        if self._iterable:
            n = self._len_called = self._dataset_len()
        elif self._given_sampler is not None:
            n = len(self._given_sampler)
        else:
            n = self._dataset_len()
        if self.batch_size is None:
            return n
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # -- epochs -----------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Walk ``epoch`` in the next pass, as a trainer that counts epochs asks.

        The order of a map-style pass is a function of ``(seed, epoch)``: a trainer that
        resumes in epoch ``e`` (or skips its first batches with a loader of its own)
        places the order here, and the pass after is ``e + 1`` as in an uninterrupted
        run. A sampler with ``set_epoch`` (a ``DistributedSampler``) is told too. A
        state given to :meth:`load_state_dict` for another epoch is dropped.

        Example:
            >>> loader = DataLoader(list(range(4)), batch_size=2, shuffle=True)
            >>> loader.set_epoch(3)
            >>> first = [b.tolist() for b in loader]
            >>> loader.set_epoch(3)
            >>> [b.tolist() for b in loader] == first
            True

        Errors:
            ConfigError: ``epoch`` is not an int >= 0.
        """
        self._placed = _check_epoch(epoch)
        for sampler in self._samplers():
            if isinstance(sampler, PlacedEpoch):
                sampler.walk(epoch)
            elif callable(getattr(sampler, "set_epoch", None)):
                sampler.set_epoch(epoch)

    def _samplers(self) -> list[Any]:
        """The loader's sampler and its batch sampler's sampler (each once)."""
        found: list[Any] = []
        for obj in (self.sampler, getattr(self.batch_sampler, "sampler", None)):
            if obj is not None and all(obj is not f for f in found):
                found.append(obj)
        return found

    def _next_epoch(self) -> int | None:
        """The epoch placed for the next pass (by ``set_epoch`` here or on the sampler)."""
        placed, self._placed = self._placed, None
        for sampler in self._samplers():
            if isinstance(sampler, PlacedEpoch):
                if placed is None and sampler.placed is not None:
                    placed = sampler.placed
                sampler.placed = None
        return placed

    # -- iteration and state --------------------------------------------------------

    def __iter__(self) -> TorchLoaderIterator:  # type: ignore[override]
        """A fresh pass (the next epoch, the one placed with :meth:`set_epoch`, or the
        state given to :meth:`load_state_dict`)."""
        self._refresh()
        previous = self._latest() if self._latest is not None else None
        if previous is not None and self.persistent_workers:
            previous.close()  # PyTorch resets its one iterator: the previous pass ends
        epoch = self._next_epoch()
        loader = self._loader
        if epoch is not None and loader._pending is not None:
            if loader._pending.get("epoch") != epoch:
                loader._pending = None  # a placed epoch wins over a state of another
                self._pending_torch = None
            else:
                epoch = None  # resume the loaded state of that epoch
        pending, self._pending_torch = self._pending_torch or {}, None
        if not (self.persistent_workers and self._seeds.base_seed is not None):
            self._seeds.base_seed = draw_base_seed(self.generator)  # as PyTorch, per iterator
        saved_seed = pending.get("base_seed")
        # torchdata starts the saved pass's iterator (drawing a seed, then taking the
        # saved one); a pass that had ended, it replaces with a fresh one (drawing again,
        # and using that seed unless its workers persist).
        ended = pending.get("ended") is True
        fresh = ended and not (self.persistent_workers and self.num_workers)
        if isinstance(saved_seed, int):
            redraw = fresh and self.num_workers
            self._seeds.base_seed = draw_base_seed(self.generator) if redraw else saved_seed
            if not self._life.active:
                loader.close()  # as torchdata's, a loaded state starts workers afresh
        sampler = self._stateful_sampler
        if sampler is not None:
            if pending.get("sampler") is not None:
                sampler.load_state_dict(from_json(pending["sampler"]))
            self._sampler_start = to_json(sampler.state_dict())
        saved = pending.get("dataset") if self._stateful_dataset else None
        if saved is not None:
            restore = partial(cast(Any, self.dataset).load_state_dict, from_json(saved))
            if self._restore_on is not None and not ended:  # once the sampler has started
                self._restore_on.restore = restore
                self._restore_on.started = bool((loader._pending or {}).get("batches"))
            else:
                restore()
        if self.num_workers:
            self.check_worker_number_rationality()
        self._life.enter()
        try:
            source = loader.iter(epoch=epoch)
        except BaseException:
            self._life.leave()
            raise
        if fresh and not self.num_workers:
            draw_base_seed(self.generator)  # after the restore, as torchdata's fresh iterator
        for own in self._samplers():
            if isinstance(own, PlacedEpoch):
                own.walk(source.epoch)  # code iterating the sampler sees this epoch
        latest = TorchLoaderIterator(
            source,
            self._shape,
            self._pin,
            self._life,
            self.__len__,
            extra=self._extra,
            len_called=self._len_called if self._iterable else None,
            name=str(self.dataset),
            progress=self._track(),
            workers=self.num_workers,
        )
        self._latest = weakref.ref(latest)
        return latest

    def _track(self) -> PassProgress | None:
        """Report this pass to Accelerate's ``GradientState`` (when one exists)."""
        return track(self)

    def _extra(self, finished: bool) -> dict[str, Any]:
        """The drop-in's own state: the workers' base seed and the sampler's state
        (at the start of the pass, or now after a pass ran to its end)."""
        extra: dict[str, Any] = {"base_seed": self._seeds.base_seed}
        sampler = self._stateful_sampler
        if sampler is not None:
            start = self._sampler_start
            extra["sampler"] = to_json(sampler.state_dict()) if finished or start is None else start
        if self._stateful_dataset:
            extra["dataset"] = to_json(cast(Any, self.dataset).state_dict())
        if finished and self._loader._box.finished:
            extra["ended"] = True  # saved after the pass ran to its end
        return extra

    def state_dict(self) -> dict[str, Any]:
        """The state after the last batch of the most recent pass (JSON-serialisable);
        after a pass ran to its end, the start of the next epoch.

        Besides the position it holds the workers' base seed and, for a sampler with
        ``state_dict()``/``load_state_dict()``, the sampler's state, as torchdata's
        ``StatefulDataLoader`` does.
        """
        if self._pending_torch is not None:
            return {**self._loader.state_dict(), TORCH: self._pending_torch}
        box = self._loader._box
        finished = box.finished or box.state is None
        return {**self._loader.state_dict(), TORCH: self._extra(finished)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` resume at ``state``.

        Errors:
            StateError: a state saved by a loader with other settings or data.
        """
        if not isinstance(state, dict):
            raise StateError(
                f"a state is a dict returned by state_dict(), got {type(state).__name__}"
            )
        rest = dict(state)
        extra = rest.pop(TORCH, None)
        if extra is not None and not isinstance(extra, dict):
            raise StateError(f"the state's 'torch' entry must be a dict, got {extra!r}")
        self._loader.load_state_dict(rest)
        self._pending_torch = extra
        self._placed = None

    def close(self) -> None:
        """End the worker processes now (idempotent)."""
        if self._stoker is not None:
            self._stoker.close()

    def __enter__(self) -> DataLoader[T_co]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"stoker.torch.DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, "
            f"num_workers={self.num_workers})"
        )
