"""``DataLoader``: a description of how to batch a dataset; iterators do the work.

The loader checks its arguments, picks the sampler, resolves the worker mode and
remembers where the last pass ended; each ``iter()`` hands a fresh
:class:`~stoker._iterator.LoaderIterator` one :class:`~stoker._pass.PassSpec` (what
the pass needs, and how to lease the loader's workers), never the loader itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal

from typing_extensions import TypeVar

from ._config import LoaderConfig, settle_auto
from ._dataset import Dataset
from ._epoch.ledger import batch_indices, mixture_sources
from ._exec.executor import Executor
from ._exec.lease import WorkerLease
from ._exec.make import make_executor, worker_spec
from ._hosts import Shard, resolve_hosts
from ._iterator import LoaderIterator, StateBox
from ._iterdataset import IterDataset
from ._pass import PassSpec
from ._sampling.base import Sampler
from ._sampling.choice import loader_sampler
from ._settings import pipeline_releases_gil, settings_for
from ._sources.wrap import as_dataset
from ._state import CARRY, STREAM, check_state, continued, loader_header, position_state
from .errors import ConfigError

__all__ = ["DataLoader"]

B = TypeVar("B", default=Any)

_UNSET: Any = object()


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
        num_workers: worker threads, processes or Ray actors; 0 loads in the calling
            process; "auto": one per usable core (at most 8) for processes; for
            threads, two per core to start with, then as many as keep the cores busy
            while records wait on I/O (at most 128), measured while loading (see
            ``docs/tuning.md``).
        worker_mode: "thread", "process", "inline" (num_workers=0), "ray" or "auto":
            threads when every stage is known to release the GIL (see
            :func:`~stoker.releases_gil`), processes otherwise; ``it.stats()`` says
            which ran. User code not marked safe to share this process
            (:func:`~stoker.shares_process`) runs only in worker processes. For
            marked code, process workers start while the first batches are built on
            threads, and batches are built inline when the measured hand-off to
            workers costs more than the work. "ray" (``stoker[ray]``) runs
            the workers as ``num_workers`` Ray actors on the cluster ``ray.init()``
            connects to (see ``docs/ray.md``); its batches are read-only views of
            Ray's object store.
        ray_options: with ``worker_mode="ray"``, options for every actor, passed to
            Ray's ``.options(...)``: ``num_cpus``, ``memory``, ``resources``,
            ``label_selector``, ``scheduling_strategy``, ``runtime_env``...
        prefetch: batches in flight. Without workers: produced ahead by a background
            thread (0: none; None: a thread when producing a batch takes long enough
            to pay for it). With workers: jobs queued or in work (None or "auto":
            tuned while loading, starting at 2 per worker).
        ordered: False hands out batches as they finish (same contents, order may
            change; the state still resumes exactly).
        worker_init_fn: ``fn(info: sk.WorkerInfo)``, run once in every worker.
        worker_init_arg: ``fn(loader)``, run once in this process when the workers
            start; its result is ``info.init_arg`` in every worker.
        restart_workers: replace a worker process that died and re-issue its jobs
            (default: raise :class:`~stoker.WorkerCrashed`).
        max_restarts: with ``restart_workers=True``, how many workers may be replaced
            over the loader's life before :class:`~stoker.WorkerCrashed` is raised. A
            worker that exits while starting is never replaced.
        tune_allocator: raise glibc's ``malloc`` thresholds in this process for
            thread workers, as worker processes do (faster large arrays; up to 256
            MiB of freed memory kept; see ``docs/performance.md``). Off: untouched.
        start_method: how worker processes start: "forkserver" (default, safe after
            JAX or PyTorch started threads), "spawn" or "fork".
        timeout: seconds to wait for a batch before :class:`~stoker.LoaderTimeout`.
        watchdog: seconds a ``next()`` may wait for a batch before it logs, once, a
            warning (logger ``"stoker"``) naming the batches and samples in flight
            and the stacks of the threads or workers building them; the same goes
            into ``it.stats().watchdog``. None turns it off. It never raises
            (``timeout`` does). A batch built on the calling thread (no workers) is
            watched too, from a helper thread: the report shows where your own
            thread is stuck.
        progress: show a tqdm bar for every pass: batches against ``len(loader)``,
            samples per second and the verdict of ``it.stats()`` (see also
            :func:`~stoker.progress`).
        log_every: seconds between one-line summaries (rates, waits, verdict) logged
            at INFO by the ``"stoker"`` logger. None: every 60 s when that logger is
            enabled for INFO (``logging.basicConfig(level=logging.INFO)``), else none.
        on_error: "raise", or "skip" records whose loading raises (at most
            ``max_errors``, then raise).
        shard: load one host's slice of every global batch: ``sk.Shard(index, count)``,
            ``"jax"`` (process index and count from JAX) or ``"torch"`` (rank and
            world size from ``torch.distributed``). Each host yields ``batch_size``
            records per step; the global batch is ``batch_size * count`` records in
            the order fixed by (seed, epoch), host ``i`` holding rows
            ``[i * batch_size, (i + 1) * batch_size)``. At the end of an epoch a
            global remainder is split evenly under "keep" (the records that do not
            split are dropped), dropped under "drop" and carried under "rollover".
            A map-style state is the same on every host and resumes on any host
            count with the same global batch size.

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
        TypeError: ``dataset`` is not a dataset (neither indexable nor iterable).
        ConfigError: bad or conflicting arguments, an empty dataset; raised here,
            before anything is read. NotSupportedError: combinations stoker cannot
            serve (e.g. ``shard=`` with a filter).
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
        num_workers: int | Literal["auto"] = 0,
        worker_mode: Literal["inline", "thread", "process", "ray", "auto"] = "auto",
        prefetch: int | Literal["auto"] | None = None,
        ordered: bool = True,
        worker_init_fn: Callable[[Any], None] | None = None,
        worker_init_arg: Callable[[Any], Any] | None = None,
        restart_workers: bool = False,
        tune_allocator: bool = False,
        start_method: Literal["forkserver", "spawn", "fork"] = "forkserver",
        timeout: float | None = None,
        on_error: Literal["raise", "skip"] = "raise",
        max_errors: int = 10,
        shard: Shard | str | None = None,
        max_restarts: int = 10,
        watchdog: float | None = 60.0,
        progress: bool = False,
        log_every: float | None = None,
        ray_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not (hasattr(dataset, "__getitem__") or hasattr(dataset, "__iter__")):
            raise TypeError(
                f"DataLoader needs a dataset, got {type(dataset).__name__} ({dataset!r:.60}): "
                "pass a sk.Dataset, an object with __len__ and __getitem__ (a list, a "
                "PyTorch Dataset), or an iterable; DataLoader(dataset, batch_size=...)"
            )
        if batch_sampler is not None and batch_size is not _UNSET:
            raise ConfigError(
                "batch_size conflicts with batch_sampler=...: the batch sampler decides the "
                "batch size; drop batch_size"
            )
        workers, depth, auto_workers, auto_prefetch = settle_auto(
            num_workers,
            prefetch,
            worker_mode,
            lambda: (
                worker_mode == "thread"
                or (
                    worker_mode == "auto" and pipeline_releases_gil(as_dataset(dataset), collate_fn)
                )
            ),
        )
        self._config = LoaderConfig(
            batch_size=1 if batch_size is _UNSET else batch_size,
            shuffle=shuffle,
            seed=seed,
            last_batch=last_batch,
            sampler=sampler,
            batch_sampler=batch_sampler,
            collate_fn=collate_fn,
            num_workers=workers,
            worker_mode=worker_mode,
            prefetch=depth,
            ordered=ordered,
            worker_init_fn=worker_init_fn,
            worker_init_arg=worker_init_arg,
            restart_workers=restart_workers,
            tune_allocator=tune_allocator,
            start_method=start_method,
            timeout=timeout,
            on_error=on_error,
            max_errors=max_errors,
            shard=shard,
            max_restarts=max_restarts,
            watchdog=watchdog,
            progress=progress,
            log_every=log_every,
            ray_options=ray_options,
            auto_workers=auto_workers,
            auto_prefetch=auto_prefetch,
        )
        if timeout is not None and prefetch == 0 and num_workers == 0:
            raise ConfigError(
                "timeout needs a background thread or workers to watch the loading: use "
                "prefetch >= 1 (or None), or num_workers >= 1, together with timeout"
            )
        self._dataset = as_dataset(dataset)
        self._hosts = resolve_hosts(shard)
        self._sampler: Sampler | None = None
        if isinstance(self._dataset, IterDataset):
            self._config.check_for_stream()
        else:
            self._sampler = loader_sampler(self._config, self._dataset)
        if self._hosts.count > 1:
            may_skip = isinstance(self._dataset, Dataset) and self._dataset.may_skip
            self._config.check_for_hosts(self._hosts.count, may_skip=may_skip)
        self._settings = settings_for(self._config, self._dataset)  # worked out once
        self._mode = self._settings.mode
        self._next_epoch = 0
        self._pending: dict[str, Any] | None = None
        self._box = StateBox(None)
        self._workers = WorkerLease(self)

    # -- workers ------------------------------------------------------------------

    def _lease(self) -> tuple[Executor, int, Callable[[], None]]:
        cfg, mode = self._config, self._mode

        def start(n: int) -> Executor:
            init_arg = cfg.worker_init_arg(self) if cfg.worker_init_arg is not None else None
            spec = worker_spec(cfg, self._dataset, init_arg, n)
            return make_executor(mode, spec, cfg, self._settings)

        return self._workers.lease(start)

    def close(self) -> None:
        """End the loader's worker threads or processes (idempotent).

        Workers start with the first iterator and live across epochs until this,
        the end of a ``with`` block, or garbage collection. Iterators still reading
        fail with :class:`~stoker.IteratorFailed`.
        """
        self._workers.close()

    def __enter__(self) -> DataLoader[B]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    @property
    def shard(self) -> Shard:
        """This host's part: ``Shard(0, 1)`` without ``shard=``."""
        return self._hosts

    @property
    def global_batch_size(self) -> int | None:
        """Records in one global batch: ``batch_size`` times the host count."""
        size = self.batch_size
        return None if size is None else size * self._hosts.count

    def _header(self) -> dict[str, Any]:
        ds = self._dataset
        length = None if isinstance(ds, IterDataset) else len(ds)
        return loader_header(self._config, length, self._hosts)

    def _row_counts(self) -> tuple[int, ...]:
        """The rows this host's batches of the next epoch have, as far as they are known
        before reading: ``batch_size`` and, under ``last_batch="keep"``, the short last
        batch's. Adapters check them against their devices up front; () when unknown.
        """
        cfg, ds, size = self._config, self._dataset, self.batch_size
        if size is None:
            return ()
        if isinstance(ds, IterDataset) or ds.may_skip or cfg.on_error == "skip":
            return (size,)  # a short last batch is possible but its size is not known
        try:
            n = len(self._sampler) if self._sampler is not None else None
        except TypeError:
            n = None
        hosts = self._hosts.count
        if n is None or cfg.last_batch != "keep":
            return (size,)
        rest = (n % (size * hosts)) // hosts
        if n < size * hosts:
            return (rest,) if rest else ()
        return (size, rest) if rest else (size,)

    def __len__(self) -> int:
        """Batches in an epoch (map-style datasets without a filter).

        Under rollover it counts the carry: inside a loop, that of the running epoch;
        after it, that of the next one.

        Errors:
            TypeError: a stream, or a pipeline with a filter or pack (the count is not known
                before reading).
        """
        cfg, ds = self._config, self._dataset
        if isinstance(ds, IterDataset):
            raise TypeError("a loader over a stream (IterDataset) has no length")
        if cfg.batch_sampler is not None:
            if callable(getattr(cfg.batch_sampler, "num_batches", None)):
                # A batch sampler that deals to hosts: this host's batches of the epoch
                # running (inside a loop) or the next one.
                return int(
                    cfg.batch_sampler.num_batches(self._len_epoch(), self._hosts.count, cfg.seed)
                )
            return len(cfg.batch_sampler)
        if ds.may_skip or cfg.on_error == "skip":
            raise TypeError(
                "the number of batches is not known before reading: the pipeline has a "
                "filter or sk.pack (or on_error='skip'), so batches are filled as records "
                "pass"
            )
        if self._sampler is None:
            raise RuntimeError("a map-style loader without a sampler")
        box = self._box
        carry = box.state.get(CARRY, []) if box.finished and box.state else None
        n = len(self._sampler) + (len(carry) if carry is not None else box.carry_len)
        size, hosts = self.global_batch_size, self._hosts.count
        if size is None:
            return n
        # Under keep, a short last global batch counts if it gives every host a record.
        short = cfg.last_batch == "keep" and (n % size) // hosts > 0
        return n // size + short

    def batch_indices(self, epoch: int, step: int, *, host: Shard | None = None) -> list[int]:
        """The dataset indices of batch ``step`` of ``epoch`` on this host (or ``host``),
        computed from the order without reading any record.

        For map-style data: shuffled or not, samplers, batch samplers (the token one
        included), ``sk.mix`` (indices run over its sources one after the other; see
        :meth:`batch_sources`), and ``shard=``. The first call of an epoch
        computes its order; later calls take a slice of it.

        Example:
            >>> import stoker as sk
            >>> loader = sk.DataLoader(sk.range(10), batch_size=4, shuffle=True, seed=1)
            >>> loader.batch_indices(0, 1) == [int(x) for x in list(loader)[1]]
            True

        Errors:
            NotSupportedError: a stream, or batches that depend on the records'
                contents (a filter, ``sk.pack``, ``on_error="skip"``).
            IndexError: the epoch has fewer batches.
        """
        hosts = self._hosts if host is None else host
        return batch_indices(self._config, self._dataset, self._sampler, hosts, epoch, step)

    def batch_sources(self, indices: list[int]) -> list[list[Any]] | None:
        """For ``sk.mix``: each index's ``[source name, index in that source]``; else None.

        Example:
            >>> import stoker as sk
            >>> loader = sk.DataLoader(sk.mix({"a": sk.range(3), "b": sk.range(2)}), batch_size=2)
            >>> loader.batch_sources([0, 4])
            [['a', 0], ['b', 1]]
        """
        return mixture_sources(self._dataset, indices)

    def _len_epoch(self) -> int:
        """The epoch ``len`` speaks of: the one running, else the next."""
        box = self._box
        if self._pending is not None:
            return int(self._pending["epoch"])
        if box.state is not None and not box.finished:
            return int(box.state["epoch"])
        return self._next_epoch

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
                state = continued(self._box.state)
        if state is not None:
            state = check_state(state, self._header(), self._sampler)
            epoch = state["epoch"]
        elif epoch is None:
            epoch = self._next_epoch
        elif not isinstance(epoch, int) or epoch < 0:
            raise ConfigError(f"epoch must be an int >= 0, got {epoch!r}")
        self._next_epoch = epoch + 1
        box = StateBox(state)
        self._box = box
        return LoaderIterator(self._pass(), epoch, state, box)

    def _pass(self) -> PassSpec:
        """What an iterator of this loader needs (a fresh one per pass: it holds the
        loader, which never holds it)."""
        return PassSpec(
            config=self._config,
            dataset=self._dataset,
            sampler=self._sampler,
            hosts=self._hosts,
            header=self._header(),
            settings=self._settings,
            lease=self._lease,
            loader=self,
        )

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
            sampler = self._sampler.cursor(self._next_epoch, 0).state_dict()
            return position_state(header, self._next_epoch, 0, carry=[], sampler=sampler)
        extra = {STREAM: None} if header["kind"] == "stream" else {}
        return position_state(header, self._next_epoch, 0, **extra)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Make the next ``iter(loader)`` resume at ``state``.

        Errors:
            StateError: as for :meth:`iter`.
        """
        self._pending = check_state(state, self._header(), self._sampler)

    def __repr__(self) -> str:
        cfg = self._config
        return (
            f"DataLoader({self._dataset!r}, batch_size={cfg.batch_size}, "
            f"shuffle={cfg.shuffle}, seed={cfg.seed}, last_batch={cfg.last_batch!r})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_box"] = StateBox(None)
        del state["_workers"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._workers = WorkerLease(self)
