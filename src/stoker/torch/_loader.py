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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import torch
from torch.utils.data import BatchSampler, IterableDataset
from torch.utils.data import default_collate as torch_default_collate
from torch.utils.data import default_convert as torch_default_convert
from torch.utils.data.dataloader import _InfiniteConstantSampler

import stoker as sk

from .._sources.wrap import as_dataset
from ..errors import ConfigError
from ._args import check_args
from ._device import pinning_available, warn_no_pinning
from ._iterator import TorchLoaderIterator, WorkerLife
from ._shapes import torch_collated, torch_converted
from ._stream import TorchStream
from ._workers import SeedBox, TorchWorkerInit, draw_base_seed

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

_FROZEN = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


def _same(batch: Any) -> Any:
    return batch


class DataLoader(Generic[T_co]):
    """A drop-in for ``torch.utils.data.DataLoader`` that resumes exactly.

    It takes PyTorch's arguments and yields the batches PyTorch would (tensors,
    with ``default_collate``'s structure), and adds ``state_dict()`` /
    ``load_state_dict()`` on the loader and its iterators. The data path is
    :class:`stoker.DataLoader`'s: batches are collated into recycled buffers and
    handed out as tensors sharing them, never overwritten while you hold them.

    Differences from PyTorch: ``shuffle=True`` orders records by stoker's
    permutation (seeded from ``generator``), not PyTorch's; with workers, a batch
    goes to whichever worker is free, so per-worker random state is the same as
    PyTorch's but which batches a worker builds may differ; a timeout raises
    :class:`~stoker.LoaderTimeout` (a ``TimeoutError``); ``pin_memory_device`` is
    ignored (deprecated in PyTorch).

    Example:
        >>> import torch
        >>> from torch.utils.data import TensorDataset
        >>> from stoker.torch import DataLoader
        >>> data = TensorDataset(torch.arange(10.0), torch.arange(10))
        >>> loader = DataLoader(data, batch_size=4)
        >>> it = iter(loader)
        >>> next(it)
        [tensor([0., 1., 2., 3.]), tensor([0, 1, 2, 3])]
        >>> state = it.state_dict()  # JSON-serialisable
        >>> loader.load_state_dict(state)
        >>> [y.tolist() for _, y in loader]
        [[4, 5, 6, 7], [8, 9]]

    Resources:
        With ``num_workers > 0``, worker processes: they start with an iterator and,
        unless ``persistent_workers=True``, end with it; :meth:`close` (or leaving a
        ``with`` block, or garbage collection) ends them.

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
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = args.prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self._multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self.generator = generator
        self.persistent_workers = persistent_workers
        self.batch_size = args.batch_size
        self.drop_last = args.drop_last
        seed = int(generator.initial_seed() if generator is not None else torch.initial_seed())
        self.sampler = self._sampler(sampler, args.shuffle, iterable, seed)
        if batch_sampler is None and args.batch_size is not None:
            batch_sampler = BatchSampler(self.sampler, args.batch_size, args.drop_last)
        self.batch_sampler = batch_sampler
        batched = self.batch_sampler is not None
        self.collate_fn = collate_fn or (
            torch_default_collate if batched else torch_default_convert
        )
        # PyTorch's own collation is stoker's, into recycled buffers, shaped as PyTorch's.
        self._shape: Callable[[Any], Any] = _same
        if self.collate_fn is torch_default_collate and batched:
            self._shape = torch_collated
        elif self.collate_fn is torch_default_convert and not batched:
            self._shape = torch_converted
        self._pin = bool(pin_memory) and pinning_available()
        if pin_memory and not self._pin:
            warn_no_pinning(stacklevel=2)
        self._seeds = SeedBox()
        self._loader: sk.DataLoader[Any] = self._stoker_loader(seed, args.start_method)
        self._life = WorkerLife(self._loader, persistent_workers)
        self._initialized = True

    def _sampler(self, sampler: Any, shuffle: bool, iterable: bool, seed: int) -> Any:
        if iterable:
            return _InfiniteConstantSampler()
        if sampler is not None:
            return sampler
        n = len(self.dataset)
        return sk.RandomSampler(n, seed=seed) if shuffle else sk.SequentialSampler(n)

    def _stoker_loader(self, seed: int, start_method: str) -> sk.DataLoader[Any]:
        dataset, workers = self.dataset, self.num_workers
        source = TorchStream(dataset) if isinstance(dataset, IterableDataset) else dataset
        kwargs: dict[str, Any] = {}
        own = self._shape is not _same  # stoker collates; the batches are reshaped
        if self.batch_sampler is None:  # records one by one; collate_fn converts each
            kwargs["batch_size"] = None
            if not own:
                source = as_dataset(source).map(self.collate_fn)
        elif self.batch_size is None:
            kwargs["batch_sampler"] = self.batch_sampler
        else:
            kwargs["batch_size"] = self.batch_size
            if not isinstance(source, TorchStream | sk.IterDataset):
                kwargs["sampler"] = self.sampler
        if self.batch_sampler is not None and not own:
            kwargs["collate_fn"] = self.collate_fn
        prefetch = 0  # without workers, load in step with the caller, as PyTorch does
        if workers:
            prefetch = (self.prefetch_factor or 0) * workers or 2 * workers
        return sk.DataLoader(
            source,
            seed=seed,
            last_batch="drop" if self.drop_last else "keep",
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

    @property
    def multiprocessing_context(self) -> Any:
        """The ``multiprocessing_context`` given (None: the platform's default)."""
        return self._multiprocessing_context

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _FROZEN and getattr(self, "_initialized", False):
            raise ConfigError(
                f"{name} attribute should not be set after {type(self).__name__} is "
                "initialized: build a new loader"
            )
        super().__setattr__(name, value)

    def __len__(self) -> int:
        """Batches in an epoch, computed as PyTorch computes it.

        Errors:
            TypeError: an IterableDataset without ``__len__``.
        """
        if isinstance(self.sampler, _InfiniteConstantSampler):
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    # -- iteration and state --------------------------------------------------------

    def __iter__(self) -> TorchLoaderIterator:
        """A fresh pass (the next epoch, or the state given to :meth:`load_state_dict`)."""
        if not (self.persistent_workers and self._seeds.base_seed is not None):
            self._seeds.base_seed = draw_base_seed(self.generator)  # as PyTorch, per iterator
        self._life.enter()
        try:
            source = self._loader.iter()
        except BaseException:
            self._life.leave()
            raise
        return TorchLoaderIterator(source, self._shape, self._pin, self._life, self.__len__)

    def state_dict(self) -> dict[str, Any]:
        """The state after the last batch of the most recent pass (JSON-serialisable);
        after a pass ran to its end, the start of the next epoch."""
        return self._loader.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter()`` resume at ``state``.

        Errors:
            StateError: a state saved by a loader with other settings or data.
        """
        self._loader.load_state_dict(state)

    def close(self) -> None:
        """End the worker processes now (idempotent)."""
        self._loader.close()

    def __enter__(self) -> DataLoader[T_co]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"stoker.torch.DataLoader({type(self.dataset).__name__}, batch_size={self.batch_size}, "
            f"num_workers={self.num_workers})"
        )
