"""``DataLoader`` (a description) and ``LoaderIterator`` (a cursor that owns the work).

Reading ``LoaderIterator.__init__`` follows the data path: the sampler and the
dataset's stages (stage 1-3, inside the plan), the batch builder with its planned
buffers (stage 4), and the prefetch window (stage 6). Execution in workers (stage 5)
is inline in this version.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from ._batching.builder import BatchBuilder
from ._config import LoaderConfig
from ._dataset import Dataset, IterDataset
from ._plan import BatchSamplerPlan, MapPlan, StreamPlan
from ._prefetch import DEFAULT_DEPTH, Prefetcher
from ._sampling.base import Sampler
from ._sampling.foreign import as_sampler
from ._sampling.random import RandomSampler
from ._sampling.sequential import SequentialSampler
from ._sampling.shard import Shard
from ._sources.wrap import as_dataset
from ._state import FORMAT, check_state
from ._stats import LoaderStats, bottleneck_verdict
from .errors import ConfigError, IteratorFailed, LoaderTimeout, NotSupportedError

__all__ = ["DataLoader", "LoaderIterator"]

B = TypeVar("B", default=Any)

_UNSET: Any = object()


class _StateBox:
    """The latest state of the loader's most recent iterator (shared, not owning it)."""

    __slots__ = ("carry_len", "finished", "state")

    def __init__(self, state: dict[str, Any] | None) -> None:
        self.state = state
        self.carry_len = 0
        self.finished = False  # the iterator ran to its end: state starts the next epoch


class DataLoader(Generic[B]):
    """Batches from a dataset: deterministic, exactly resumable, never hanging.

    Args:
        dataset: a :class:`~stoker.Dataset`, an :class:`~stoker.IterDataset`, or any
            object with ``__len__``/``__getitem__`` (a list, a PyTorch dataset).
        batch_size: records per batch; None yields records one by one, uncollated.
        shuffle: a fresh order every epoch, from (seed, epoch).
        seed: the one seed behind shuffling and seeded maps.
        last_batch: "keep" (a short last batch), "drop", or "rollover" (the leftover
            records start the next epoch).
        sampler: any object yielding indices (a stoker or PyTorch sampler).
        batch_sampler: any object yielding lists of indices.
        collate_fn: turns a list of records into a batch (default: stack arrays).
        num_workers, worker_mode: parallel execution (this version: in-process only).
        prefetch: batches produced ahead by a background thread; 0: none; None: a
            thread when producing a batch takes long enough to pay for it.
        ordered, worker_init_fn: for parallel execution.
        timeout: seconds to wait for a batch before :class:`~stoker.LoaderTimeout`.
        on_error: "raise", or "skip" records whose loading raises (at most
            ``max_errors``, then raise).
        shard: multi-host sharding (a later version).

    Example:
        >>> import stoker as sk
        >>> loader = sk.DataLoader(sk.range(0, 10), batch_size=4, last_batch="drop")
        >>> [b.tolist() for b in loader]
        [[0, 1, 2, 3], [4, 5, 6, 7]]
        >>> it = loader.iter(epoch=0)
        >>> _ = next(it)
        >>> [b.tolist() for b in loader.iter(state=it.state_dict())]
        [[4, 5, 6, 7]]

    Errors:
        ConfigError: bad or conflicting arguments, an empty dataset; raised here,
            before anything is read. NotSupportedError: options of later versions.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int | None = _UNSET,
        shuffle: bool = False,
        seed: int = 0,
        *,
        last_batch: Literal["keep", "drop", "rollover"] = "keep",
        sampler: Any = None,
        batch_sampler: Any = None,
        collate_fn: Callable[[list[Any]], B] | None = None,
        num_workers: int = 0,
        worker_mode: Literal["inline", "thread", "process", "auto"] = "auto",
        prefetch: int | None = None,
        ordered: bool = True,
        worker_init_fn: Callable[[Any], None] | None = None,
        timeout: float | None = None,
        on_error: Literal["raise", "skip"] = "raise",
        max_errors: int = 10,
        shard: Shard | str | None = None,
    ) -> None:
        if batch_sampler is not None and batch_size is not _UNSET:
            raise ConfigError(
                "batch_size conflicts with batch_sampler=...: the batch sampler decides the "
                "batch size; drop batch_size"
            )
        self._config = LoaderConfig(
            batch_size=1 if batch_size is _UNSET else batch_size,
            shuffle=shuffle,
            seed=seed,
            last_batch=last_batch,
            sampler=sampler,
            batch_sampler=batch_sampler,
            collate_fn=collate_fn,
            num_workers=num_workers,
            worker_mode=worker_mode,
            prefetch=prefetch,
            ordered=ordered,
            worker_init_fn=worker_init_fn,
            timeout=timeout,
            on_error=on_error,
            max_errors=max_errors,
            shard=shard,
        )
        if timeout is not None and prefetch == 0:
            raise ConfigError(
                "timeout needs a background thread to watch the loading: use prefetch >= 1 "
                "(or None) together with timeout"
            )
        self._dataset = as_dataset(dataset)
        self._sampler: Sampler | None = None
        if isinstance(self._dataset, IterDataset):
            self._check_stream()
        else:
            self._check_map()
        self._next_epoch = 0
        self._pending: dict[str, Any] | None = None
        self._box = _StateBox(None)

    # -- checks -------------------------------------------------------------------

    def _check_map(self) -> None:
        cfg, ds = self._config, self._dataset
        if not isinstance(ds, Dataset):
            raise RuntimeError("a map-style loader over a stream")
        n = len(ds)
        if n == 0:
            raise ConfigError(
                f"the dataset {ds!r} is empty: an empty source is almost always a mistake "
                "(an empty glob, a wrong filter on the source, a wrong path)"
            )
        if cfg.batch_sampler is None:
            if cfg.sampler is not None:
                self._sampler = as_sampler(cfg.sampler, n)
            elif cfg.shuffle:
                self._sampler = RandomSampler(n, seed=cfg.seed)
            else:
                self._sampler = SequentialSampler(n)
        elif not hasattr(cfg.batch_sampler, "__iter__"):
            raise ConfigError(
                f"batch_sampler must be iterable (yield lists of indices), "
                f"got {type(cfg.batch_sampler).__name__}"
            )

    def _check_stream(self) -> None:
        cfg = self._config
        for name, value in (
            ("shuffle=True", cfg.shuffle),
            ("sampler", cfg.sampler),
            ("batch_sampler", cfg.batch_sampler),
        ):
            if value:
                raise ConfigError(
                    f"{name} needs a map-style dataset (with __len__ and __getitem__); "
                    "a stream is read in its own order: shuffle it at its source"
                )
        if cfg.last_batch == "rollover":
            raise NotSupportedError(
                "last_batch='rollover' needs a map-style dataset; use 'keep' or 'drop' for streams"
            )
        if cfg.on_error == "skip":
            raise NotSupportedError(
                "on_error='skip' needs a map-style dataset: a stream that raised cannot go on"
            )

    # -- description --------------------------------------------------------------

    @property
    def dataset(self) -> Dataset[Any] | IterDataset[Any]:
        """The dataset this loader reads."""
        return self._dataset

    @property
    def batch_size(self) -> int | None:
        return self._config.batch_size if self._config.batch_sampler is None else None

    @property
    def seed(self) -> int:
        return self._config.seed

    def _header(self) -> dict[str, Any]:
        cfg, ds = self._config, self._dataset
        if isinstance(ds, IterDataset):
            return {
                "format": FORMAT,
                "kind": "stream",
                "seed": cfg.seed,
                "batch_size": cfg.batch_size,
                "last_batch": cfg.last_batch,
            }
        if cfg.batch_sampler is not None:
            return {
                "format": FORMAT,
                "kind": "batch_sampler",
                "seed": cfg.seed,
                "dataset_len": len(ds),
            }
        return {
            "format": FORMAT,
            "kind": "map",
            "seed": cfg.seed,
            "dataset_len": len(ds),
            "batch_size": cfg.batch_size,
            "last_batch": cfg.last_batch,
            "shuffle": cfg.shuffle,
        }

    def __len__(self) -> int:
        """Batches in an epoch (map-style datasets without a filter).

        Under rollover it counts the carry: inside a loop, that of the running epoch;
        after it, that of the next one.

        Errors:
            TypeError: a stream, or a pipeline with a filter (the count is not known
                before reading).
        """
        cfg, ds = self._config, self._dataset
        if isinstance(ds, IterDataset):
            raise TypeError("a loader over a stream (IterDataset) has no length")
        if cfg.batch_sampler is not None:
            return len(cfg.batch_sampler)
        if ds._may_skip or cfg.on_error == "skip":
            raise TypeError(
                "the number of batches is not known before reading: the pipeline has a "
                "filter (or on_error='skip'), so batches are filled as records pass"
            )
        if self._sampler is None:
            raise RuntimeError("a map-style loader without a sampler")
        box = self._box
        carry = box.state.get("carry", []) if box.finished and box.state else None
        n = len(self._sampler) + (len(carry) if carry is not None else box.carry_len)
        size = cfg.batch_size
        if size is None:
            return n
        return -(-n // size) if cfg.last_batch == "keep" else n // size

    # -- iteration ----------------------------------------------------------------

    def __iter__(self) -> LoaderIterator[B]:
        """A fresh iterator over the next epoch (or the state given to load_state_dict)."""
        return self.iter()

    def iter(
        self, *, epoch: int | None = None, state: dict[str, Any] | None = None
    ) -> LoaderIterator[B]:
        """A fresh iterator: at ``state`` if given, else at the start of ``epoch``.

        With neither, it continues after the most recent iterator: from the state given
        to :meth:`load_state_dict`, else from the end of the last pass that ran to its
        end (so a rollover carry reaches the next epoch), else at the epoch after the
        last one started.

        Errors:
            StateError: a state saved by a loader with other settings or data.
        """
        if state is not None and epoch is not None:
            raise ConfigError("pass either epoch= or state=, not both")
        if state is None and epoch is None:
            if self._pending is not None:
                state, self._pending = self._pending, None
            elif self._box.finished and self._box.state is not None:
                # Continue where the last full pass ended (the rollover carry included).
                state = self._box.state
        if state is not None:
            state = check_state(state, self._header())
            epoch = state["epoch"]
        elif epoch is None:
            epoch = self._next_epoch
        elif not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"epoch must be an int >= 0, got {epoch!r}")
        self._next_epoch = epoch + 1
        box = _StateBox(state)
        self._box = box
        return LoaderIterator(self, epoch, state, box)

    def state_dict(self) -> dict[str, Any]:
        """The state of the most recent iterator (after its last yielded batch).

        Before any iteration, and after an iterator ran to its end, it is the start of
        the next epoch. JSON-serialisable.
        """
        if self._pending is not None:
            return self._pending
        if self._box.state is not None:
            return self._box.state
        header = self._header()
        if header["kind"] == "map":
            if self._sampler is None:
                raise RuntimeError("a map-style loader without a sampler")
            return {
                **header,
                "epoch": self._next_epoch,
                "batches": 0,
                "carry": [],
                "sampler": self._sampler.cursor(self._next_epoch, 0).state_dict(),
            }
        extra = {"stream": None} if header["kind"] == "stream" else {}
        return {**header, "epoch": self._next_epoch, "batches": 0, **extra}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter(loader)`` resume at ``state``.

        Errors:
            StateError: as for :meth:`iter`.
        """
        self._pending = check_state(state, self._header())

    def _plan(self, epoch: int, state: dict[str, Any] | None) -> tuple[Any, BatchBuilder | None]:
        cfg, ds = self._config, self._dataset
        header = self._header()
        builder = None
        if isinstance(ds, Dataset) or cfg.batch_size is not None:
            pool_slots = (cfg.prefetch if cfg.prefetch is not None else DEFAULT_DEPTH) + 3
            builder = BatchBuilder(
                ds if isinstance(ds, Dataset) else _NO_DATASET,
                cfg.collate_fn,
                cfg.batch_size or 1,
                pool_slots=pool_slots,
                on_error=cfg.on_error,
                max_errors=cfg.max_errors,
            )
        if isinstance(ds, IterDataset):
            return StreamPlan(
                dataset=ds,
                builder=builder,
                batch_size=cfg.batch_size,
                last_batch=cfg.last_batch,
                seed=cfg.seed,
                header=header,
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
                epoch=epoch,
                state=state,
            ), builder
        if self._sampler is None:
            raise RuntimeError("a map-style loader without a sampler")
        return MapPlan(
            builder=builder,
            sampler=self._sampler,
            batch_size=cfg.batch_size,
            last_batch=cfg.last_batch,
            seed=cfg.seed,
            skips=ds._may_skip or cfg.on_error == "skip",
            header=header,
            epoch=epoch,
            state=state,
        ), builder

    def __repr__(self) -> str:
        cfg = self._config
        return (
            f"DataLoader({self._dataset!r}, batch_size={cfg.batch_size}, "
            f"shuffle={cfg.shuffle}, seed={cfg.seed}, last_batch={cfg.last_batch!r})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_box"] = _StateBox(None)
        return state


class _NoDataset(Dataset[Any]):
    def __len__(self) -> int:
        return 0


_NO_DATASET = _NoDataset()


class LoaderIterator(Generic[B]):
    """One pass over one epoch of a :class:`DataLoader`.

    Example:
        >>> import json, stoker as sk
        >>> loader = sk.DataLoader(sk.range(0, 6), batch_size=2, shuffle=True, seed=3)
        >>> it = iter(loader)
        >>> first = next(it)
        >>> saved = json.dumps(it.state_dict())
        >>> rest = [b.tolist() for b in it]
        >>> rest == [b.tolist() for b in loader.iter(state=json.loads(saved))]
        True

    Resources:
        Owns the background prefetch thread, if one was started. It ends when the
        epoch is exhausted, on :meth:`close`, on leaving a ``with`` block, or when
        the iterator is garbage collected.

    Errors:
        An exception raised while loading reaches ``next()`` as its own type, with a
        note naming the sample index, batch and epoch;
        :class:`~stoker.LoaderTimeout` when ``timeout`` passes without a batch.
    """

    def __init__(
        self, loader: DataLoader[B], epoch: int, state: dict[str, Any] | None, box: _StateBox
    ) -> None:
        cfg = loader._config
        self._loader = loader
        self._epoch = epoch
        self._plan, self._builder = loader._plan(epoch, state)  # stages 1-4
        depth = cfg.prefetch
        if depth is None and cfg.timeout is not None:
            depth = DEFAULT_DEPTH
        self._window: Prefetcher[tuple[Any, dict[str, Any], int]] = Prefetcher(  # stage 6
            self._plan.next_item, depth, cfg.timeout, name=f"stoker-prefetch-epoch{epoch}"
        )
        self._finalizer = weakref.finalize(self, _close_all, self._window, self._builder)
        self._box = box
        self._state: dict[str, Any] = self._plan.state()
        box.state = self._state
        carry = self._state.get("carry")
        box.carry_len = len(carry) if isinstance(carry, list) else 0
        self._batches = 0
        self._samples = 0
        self._created = time.perf_counter()
        self._exhausted = False
        self._failure: BaseException | None = None

    @property
    def epoch(self) -> int:
        """The epoch this iterator reads."""
        return self._epoch

    def __iter__(self) -> Iterator[B]:
        return self

    def __next__(self) -> B:
        if self._failure is not None:
            raise IteratorFailed(
                f"this iterator already failed with {type(self._failure).__name__}; resume "
                "after its last good batch with loader.iter(state=it.state_dict())"
            ) from self._failure
        if self._exhausted:
            raise StopIteration
        try:
            batch, state, count = self._window.get()
        except StopIteration:
            self._exhausted = True
            self._state = self._plan.final_state()
            self._box.state = self._state
            self._box.finished = True
            self._finalizer()
            raise
        except LoaderTimeout:
            raise  # the batch may still come: next() may be called again
        except BaseException as exc:  # Ctrl-C included: never pretend the epoch ended
            self._failure = exc
            self._finalizer()
            raise
        self._state = state
        self._box.state = state
        self._batches += 1
        self._samples += count
        result: B = batch
        return result

    def state_dict(self) -> dict[str, Any]:
        """The JSON-serialisable state right after the last batch this iterator yielded.

        After the iterator is exhausted it is the start of the next epoch.
        """
        return self._state

    def stats(self) -> LoaderStats:
        """Counters and a bottleneck verdict for this iterator so far."""
        w = self._window
        counters = self._builder.counters if self._builder is not None else None
        fetch = counters.fetch_seconds if counters else 0.0
        collate = counters.collate_seconds if counters else 0.0
        inline = not w.mode.startswith("background")
        wait = w.wait_seconds + (w.produce_seconds if inline else 0.0)
        elapsed = time.perf_counter() - self._created
        pool = self._builder.pool if self._builder is not None else None
        return LoaderStats(
            batches=self._batches,
            samples=self._samples,
            wait_seconds=wait,
            produce_seconds=w.produce_seconds,
            fetch_seconds=fetch,
            collate_seconds=collate,
            elapsed_seconds=elapsed,
            worker_mode="inline",
            prefetch=w.mode,
            skipped=list(counters.skipped) if counters else [],
            recycled_batches=pool.recycled if pool else 0,
            allocated_batches=pool.allocated if pool else 0,
            bottleneck=bottleneck_verdict(
                wait=wait, elapsed=elapsed, fetch=fetch, collate=collate, batches=self._batches
            ),
        )

    def close(self) -> None:
        """Stop loading and end the prefetch thread (idempotent)."""
        self._exhausted = True
        self._finalizer()

    def __enter__(self) -> LoaderIterator[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore_iterator, (self._loader, self._state))


def _close_all(window: Prefetcher[Any], builder: BatchBuilder | None) -> None:
    window.close()
    if builder is not None:
        builder.close()


def _restore_iterator(loader: DataLoader[Any], state: dict[str, Any]) -> LoaderIterator[Any]:
    return loader.iter(state=state)
