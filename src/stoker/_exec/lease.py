"""``WorkerLease``: a loader's persistent workers, lent to one iterator at a time.

Workers start with a loader's first iterator and serve every later epoch, so an
epoch does not pay for starting processes and sending the pipeline again. One
iterator holds them at a time; an iterator created while another one still reads
gets workers of its own, which end with it.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._batching.pool import BufferPool
from .jobs import WorkerSpec
from .threads import ThreadExecutor

if TYPE_CHECKING:
    from .._loader import DataLoader

__all__ = ["WorkerLease"]


class WorkerLease:
    """Starts, lends and ends the workers of one loader.

    Resources:
        Owns the loader's shared executor (its threads or processes), ended by
        :meth:`close`, which also runs when the loader is garbage collected or the
        interpreter exits. Private executors lent to concurrent iterators are ended
        by their iterators.
    """

    def __init__(self, loader: DataLoader[Any]) -> None:
        self._lock = threading.Lock()
        self._tokens = itertools.count(1)
        self._starts = itertools.count()  # worker seeds differ between starts
        self._shared: Any = None
        self._holder: int | None = None
        self._pid = os.getpid()
        self._finalizer = weakref.finalize(loader, self.close)

    def lease(self, loader: DataLoader[Any]) -> tuple[Any, int, Callable[[], None]]:
        """An executor for a new iterator, its token, and how to give it back."""
        with self._lock:
            token = next(self._tokens)
            if self._shared is not None and self._shared.broken is not None:
                self._shared.close()
                self._shared = None
                self._holder = None
            if self._holder is None:
                if self._shared is None:
                    self._shared = start_executor(loader, next(self._starts))
                self._holder = token
                return self._shared, token, lambda: self._give_back(token)
            start = next(self._starts)
        private = start_executor(loader, start)
        return private, token, private.close

    def _give_back(self, token: int) -> None:
        with self._lock:
            if self._holder == token:
                self._holder = None

    def close(self) -> None:
        """End the shared workers (idempotent); the next iterator starts new ones.

        In a forked child (a PyTorch worker, a user's ``os.fork()``) it does nothing:
        the workers, pipes and locks it inherited belong to the parent.
        """
        if os.getpid() != self._pid:
            return
        with self._lock:
            shared, self._shared, self._holder = self._shared, None, None
        if shared is not None:
            shared.close()


def start_executor(loader: DataLoader[Any], start: int = 0) -> Any:
    """Start the workers ``loader`` asks for (threads or processes).

    ``start`` counts the loader's worker starts (0: the first); with the loader's seed
    and the worker id it decides each worker's ``WorkerInfo.seed``.
    """
    cfg = loader._config
    dataset = loader._dataset
    init_arg = cfg.worker_init_arg(loader) if cfg.worker_init_arg is not None else None
    spec = WorkerSpec(
        dataset=dataset,
        collate_fn=cfg.collate_fn,
        batch_size=cfg.batch_size or 1,
        on_error=cfg.on_error,
        seed=cfg.seed,
        num_workers=cfg.num_workers,
        worker_init_fn=cfg.worker_init_fn,
        init_arg=init_arg,
        batched=cfg.batch_size is not None,
        start=start,
    )
    depth = cfg.prefetch if cfg.prefetch else 2 * cfg.num_workers
    if handover_applies(loader):  # worker_mode="auto": see handover.py
        return start_handover(loader, spec, depth)
    if loader._resolved_mode() == "thread":
        return ThreadExecutor(spec, BufferPool(cfg.batch_size or 1, depth + 4))
    from .processes import ProcessExecutor

    return ProcessExecutor(
        spec,
        start_method=cfg.start_method,
        restart=cfg.restart_workers,
        max_restarts=cfg.max_restarts,
        slot_cap=depth + 4,
    )


def handover_applies(loader: DataLoader[Any]) -> bool:
    """True when ``worker_mode="auto"`` may start on threads and tune itself.

    Not for streams (a part's cursor lives in the worker that reads it), nor with a
    ``worker_init_fn`` (it would run on the threads, then again in every process),
    nor under another start method than ``"forkserver"``: ``"fork"`` would copy
    this process while the thread workers run user code (and the locks they hold),
    and ``"spawn"`` workers re-run the main script (one without a ``__main__``
    guard must fail at the first batch, not after epochs that threads finished
    unnoticed).
    """
    from .._dataset import IterDataset

    cfg = loader._config
    return (
        cfg.worker_mode == "auto"
        and cfg.num_workers > 0
        and cfg.worker_init_fn is None
        and cfg.start_method == "forkserver"
        and not isinstance(loader._dataset, IterDataset)
    )


def start_handover(loader: DataLoader[Any], spec: WorkerSpec, depth: int) -> Any:
    """A :class:`~stoker._exec.handover.HandoverExecutor` towards the resolved mode."""
    from .._tuning import Tuner
    from .handover import HandoverExecutor

    cfg = loader._config
    target = loader._resolved_mode()
    start_target = None
    if target == "process":

        def start_target() -> Any:
            from .processes import ProcessExecutor

            return ProcessExecutor(
                spec,
                start_method=cfg.start_method,
                restart=cfg.restart_workers,
                max_restarts=cfg.max_restarts,
                slot_cap=4 * cfg.num_workers + 4,
            )

    tuner = Tuner(cfg.num_workers, depth, auto_depth=cfg.tunes_depth)
    return HandoverExecutor(
        spec,
        target=target,
        start_target=start_target,
        tuner=tuner,
        pool_slots=4 * cfg.num_workers + 4,
    )
