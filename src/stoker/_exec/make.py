"""``make_executor``: the one place where a worker mode becomes an executor.

``pass_executor`` is stage 5 of one pass: the executor its plan reads through.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .._batching.pool import BufferPool
from .._config import LoaderConfig
from .._dataset import Dataset
from .._iterdataset import IterDataset
from .._settings import Settings
from .._tuning import in_flight
from .executor import Executor
from .jobs import WorkerSpec

__all__ = ["Lease", "handover_applies", "make_executor", "pass_executor", "worker_spec"]

Lease = Callable[[], tuple[Executor, int, Callable[[], None]]]
"""Lends a loader's workers to one pass: (executor, token, give back)."""


def worker_spec(
    cfg: LoaderConfig,
    dataset: Dataset[Any] | IterDataset[Any],
    init_arg: Any = None,
    start: int = 0,
) -> WorkerSpec:
    """What every worker of a loader with config ``cfg`` over ``dataset`` needs.

    ``start`` counts the loader's worker starts (0: the first); with the loader's
    seed and the worker id it decides each worker's ``WorkerInfo.seed``.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> cfg = LoaderConfig(batch_size=4)
        >>> worker_spec(cfg, sk.range(10)).batch_size
        4
    """
    return WorkerSpec(
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


def make_executor(mode: str, spec: WorkerSpec, cfg: LoaderConfig, settings: Settings) -> Executor:
    """Start the executor of ``mode`` ("inline", "thread", "process" or "ray") for ``spec``,
    its pools sized by ``settings``.

    A new mode is one more branch here (and one entry in the contract test).

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._settings import settings_for
        >>> cfg = LoaderConfig(batch_size=4)
        >>> settings = settings_for(cfg, sk.range(10))
        >>> with make_executor("inline", worker_spec(cfg, sk.range(10)), cfg, settings) as ex:
        ...     ex.mode
        'inline'

    Errors:
        ValueError: an unknown mode (the config has resolved "auto" before).
    """
    if handover_applies(mode, spec, cfg, settings):
        return start_handover(mode, spec, cfg, settings)
    if mode == "inline":
        from .inline import InlineExecutor

        slots = settings.pool_slots
        return InlineExecutor(replace(spec, num_workers=0), BufferPool(spec.batch_size, slots))
    if mode == "thread":
        from .threads import ThreadExecutor

        return ThreadExecutor(
            spec,
            BufferPool(spec.batch_size, settings.worker_slots),
            tune_allocator=cfg.tune_allocator,
        )
    if mode == "process":
        from .processes import ProcessExecutor

        return ProcessExecutor(
            spec,
            start_method=cfg.start_method,
            restart=cfg.restart_workers,
            max_restarts=cfg.max_restarts,
            slot_cap=settings.worker_slots,
        )
    if mode == "ray":
        from .ray import RayExecutor

        return RayExecutor(
            spec,
            options=cfg.ray_options,
            restart=cfg.restart_workers,
            max_restarts=cfg.max_restarts,
        )
    raise ValueError(f"no executor for worker mode {mode!r}")


def pass_executor(
    mode: str,
    cfg: LoaderConfig,
    dataset: Dataset[Any] | IterDataset[Any],
    lease: Lease,
    settings: Settings,
) -> tuple[Executor, int, Callable[[], None]]:
    """Stage 5 of one pass: the executor its plan's jobs run on, the token that names
    the pass's jobs, and how to give the executor back when the pass ends.

    Under ``mode="inline"`` a pass gets an inline executor of its own (it builds a
    job when the window asks for it); otherwise ``lease()`` lends the loader's
    workers.

    Example:
        >>> import stoker as sk
        >>> from stoker._config import LoaderConfig
        >>> from stoker._settings import settings_for
        >>> cfg, ds = LoaderConfig(batch_size=2), sk.range(4)
        >>> ex, token, give_back = pass_executor("inline", cfg, ds, None, settings_for(cfg, ds))
        >>> ex.mode, token
        ('inline', 0)
        >>> give_back()
    """
    if mode == "inline":
        executor = make_executor("inline", worker_spec(cfg, dataset), cfg, settings)
        return executor, 0, executor.close
    return lease()


def handover_applies(mode: str, spec: WorkerSpec, cfg: LoaderConfig, settings: Settings) -> bool:
    """True when ``worker_mode="auto"`` may start on threads and tune itself, or
    ``num_workers="auto"`` may size its thread workers (under ``worker_mode="thread"``
    too, then never inline).

    Not for user code that is not marked safe to share the training process
    (``settings.isolated``): under ``"auto"`` it runs in
    the worker processes from the first batch on, so that a native crash in it is a
    ``WorkerCrashed``, never the end of the trainer. Not for streams (a part's
    cursor lives in the worker that reads it), nor with a
    ``worker_init_fn`` (it would run on the threads, then again in every process),
    nor under another start method than ``"forkserver"``: ``"fork"`` would copy
    this process while the thread workers run user code (and the locks they hold),
    and ``"spawn"`` workers re-run the main script (one without a ``__main__``
    guard must fail at the first batch, not after epochs that threads finished
    unnoticed).
    """
    sized_threads = cfg.worker_mode == "thread" and cfg.auto_workers
    return (
        (cfg.worker_mode == "auto" or sized_threads)
        and mode in ("thread", "process")
        and cfg.num_workers > 0
        and cfg.worker_init_fn is None
        and cfg.start_method == "forkserver"
        and not isinstance(spec.dataset, IterDataset)
        and not settings.isolated
    )


def start_handover(mode: str, spec: WorkerSpec, cfg: LoaderConfig, settings: Settings) -> Executor:
    """A :class:`~stoker._exec.handover.HandoverExecutor` towards ``mode``.

    With ``num_workers="auto"`` on threads it starts two threads per core (at most
    the count ``"auto"`` chose) and its tuner sizes them from there.
    """
    from .._sizing import ThreadSizer
    from .._stats import available_cores
    from .._tuning import Tuner
    from .handover import HandoverExecutor

    sizer = None
    if mode == "thread" and cfg.auto_workers:
        sizer = ThreadSizer.starting(available_cores(), most=cfg.num_workers)
        spec = replace(spec, num_workers=sizer.workers)
    start_target = None
    if mode == "process":

        def start_target() -> Any:
            from .processes import ProcessExecutor

            return ProcessExecutor(
                spec,
                start_method=cfg.start_method,
                restart=cfg.restart_workers,
                max_restarts=cfg.max_restarts,
                slot_cap=settings.tuned_slots,
            )

    # A sized thread pool starts below the count asked for: its depth follows it.
    depth = settings.depth if sizer is None else in_flight(cfg.prefetch, sizer.workers)
    tuner = Tuner(
        spec.num_workers,
        depth,
        auto_depth=cfg.tunes_depth,
        auto_inline=cfg.worker_mode == "auto",
        sizer=sizer,
    )
    return HandoverExecutor(
        spec,
        target=mode,
        start_target=start_target,
        tuner=tuner,
        pool_slots=settings.tuned_slots,
        inline_slots=settings.pool_slots,
        tune_allocator=cfg.tune_allocator,
    )
