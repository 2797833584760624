"""``LoaderConfig``: every DataLoader argument, checked before anything runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._hosts import Shard, is_distributed_sampler
from .errors import ConfigError, NotSupportedError

__all__ = [
    "LAST_BATCH_MODES",
    "START_METHODS",
    "WORKER_MODES",
    "LoaderConfig",
    "settle_auto",
]

LAST_BATCH_MODES = ("keep", "drop", "rollover")
WORKER_MODES = ("inline", "thread", "process", "ray", "auto")
DEFAULT_DEPTH = 2
"""Batches built ahead by the inline prefetch thread when it runs."""
START_METHODS = ("forkserver", "spawn", "fork")
ON_ERROR_MODES = ("raise", "skip")

LastBatch = Literal["keep", "drop", "rollover"]
WorkerMode = Literal["inline", "thread", "process", "ray", "auto"]
StartMethod = Literal["forkserver", "spawn", "fork"]


def settle_auto(
    num_workers: Any,
    prefetch: Any,
    worker_mode: Any,
    threads: Callable[[], bool] = lambda: False,
) -> tuple[Any, Any, bool, bool]:
    """``(num_workers, prefetch, auto_workers, auto_prefetch)`` with "auto" resolved.

    ``num_workers="auto"`` becomes a count for the cores this process may use (see
    :func:`stoker._tuning.auto_num_workers`; more when ``threads()`` says the workers
    will be threads; 0 under ``worker_mode="inline"``) and ``prefetch="auto"``
    becomes None (tuned while loading). Anything else passes through, for
    :class:`LoaderConfig` to check.

    Example:
        >>> settle_auto(2, "auto", "auto")
        (2, None, False, True)
    """
    from ._tuning import auto_num_workers

    auto_workers = num_workers == "auto"
    if auto_workers:
        num_workers = 0 if worker_mode == "inline" else auto_num_workers(threads())
    auto_prefetch = prefetch == "auto"
    return num_workers, None if auto_prefetch else prefetch, auto_workers, auto_prefetch


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class LoaderConfig:
    """The validated arguments of a :class:`~stoker.DataLoader` (see its docstring).

    Its defaults are the loader's, with ``"auto"`` already settled (see
    :func:`settle_auto`).

    Example:
        >>> LoaderConfig(batch_size=4, num_workers=2).prefetch is None
        True
    """

    batch_size: int | None = 1
    shuffle: bool = False
    seed: int = 0
    last_batch: LastBatch = "keep"
    sampler: Any = None
    batch_sampler: Any = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    num_workers: int = 0
    worker_mode: WorkerMode = "auto"
    prefetch: int | None = None
    ordered: bool = True
    worker_init_fn: Callable[[Any], None] | None = None
    worker_init_arg: Callable[[Any], Any] | None = None
    restart_workers: bool = False
    tune_allocator: bool = False  # glibc thresholds in this process (see _exec/malloc.py)
    start_method: StartMethod = "forkserver"
    timeout: float | None = None
    on_error: Literal["raise", "skip"] = "raise"
    max_errors: int = 10
    shard: Shard | str | None = None
    max_restarts: int = 10
    watchdog: float | None = 60.0
    progress: bool = False
    log_every: float | None = None
    ray_options: Mapping[str, Any] | None = None
    auto_workers: bool = False  # num_workers="auto": the count was chosen (see settle_auto)
    auto_prefetch: bool = False  # prefetch="auto": batches in flight are tuned

    @property
    def tunes_depth(self) -> bool:
        """True when the batches in flight are the tuner's to choose (None or "auto")."""
        return self.prefetch is None or self.auto_prefetch

    def __post_init__(self) -> None:
        self._check_batching()
        self._check_execution()

    def _check_batching(self) -> None:
        if self.batch_size is not None and (not _is_int(self.batch_size) or self.batch_size < 1):
            raise ConfigError(
                f"batch_size must be an int >= 1 (or None for unbatched records), "
                f"got {self.batch_size!r}"
            )
        if self.last_batch not in LAST_BATCH_MODES:
            raise ConfigError(
                f"last_batch must be one of {', '.join(map(repr, LAST_BATCH_MODES))}, "
                f"got {self.last_batch!r}"
            )
        if not isinstance(self.shuffle, bool):
            raise ConfigError(f"shuffle must be True or False, got {self.shuffle!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ConfigError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.sampler is not None and self.shuffle:
            raise ConfigError(
                "shuffle=True conflicts with sampler=...: the sampler decides the order; "
                "drop shuffle=True, or use sk.RandomSampler(len(dataset), seed=...)"
            )
        if self.batch_sampler is not None:
            if self.sampler is not None:
                raise ConfigError(
                    "sampler=... conflicts with batch_sampler=...: the batch sampler already "
                    "yields the indices; pass only one of them"
                )
            if self.shuffle:
                raise ConfigError(
                    "shuffle=True conflicts with batch_sampler=...: shuffle inside the batch "
                    "sampler instead"
                )
            if self.last_batch != "keep":
                raise ConfigError(
                    "last_batch conflicts with batch_sampler=...: the batch sampler decides "
                    "what happens to the last batch"
                )
        if self.collate_fn is not None and not callable(self.collate_fn):
            raise ConfigError(f"collate_fn must be callable, got {type(self.collate_fn).__name__}")

    def _check_execution(self) -> None:
        if self.worker_mode not in WORKER_MODES:
            raise ConfigError(
                f"worker_mode must be one of {', '.join(map(repr, WORKER_MODES))}, "
                f"got {self.worker_mode!r}"
            )
        if not _is_int(self.num_workers) or self.num_workers < 0:
            raise ConfigError(
                f"num_workers must be an int >= 0 or 'auto', got {self.num_workers!r}"
            )
        if self.worker_mode in ("thread", "process", "ray") and self.num_workers == 0:
            raise ConfigError(
                f"worker_mode={self.worker_mode!r} needs num_workers >= 1; "
                "use worker_mode='inline' (or 'auto') to load in the calling process"
            )
        if self.worker_mode == "inline" and self.num_workers > 0:
            raise ConfigError(
                f"worker_mode='inline' loads in the calling process, but num_workers="
                f"{self.num_workers}; use 'thread', 'process' or 'auto' for workers"
            )
        self._check_ray_options()
        if self.start_method not in START_METHODS:
            raise ConfigError(
                f"start_method must be one of {', '.join(map(repr, START_METHODS))}, "
                f"got {self.start_method!r}"
            )
        if not isinstance(self.restart_workers, bool):
            raise ConfigError(
                f"restart_workers must be True or False, got {self.restart_workers!r}"
            )
        if not isinstance(self.tune_allocator, bool):
            raise ConfigError(f"tune_allocator must be True or False, got {self.tune_allocator!r}")
        if self.worker_init_arg is not None and not callable(self.worker_init_arg):
            raise ConfigError(
                f"worker_init_arg must be callable (it gets the loader), "
                f"got {type(self.worker_init_arg).__name__}"
            )
        if self.prefetch is not None and (not _is_int(self.prefetch) or self.prefetch < 0):
            raise ConfigError(
                f"prefetch must be an int >= 0 (0: no background thread), None or 'auto', "
                f"got {self.prefetch!r}"
            )
        if self.timeout is not None and (
            isinstance(self.timeout, bool)
            or not isinstance(self.timeout, int | float)
            or self.timeout <= 0
        ):
            raise ConfigError(
                f"timeout must be a number of seconds > 0 or None, got {self.timeout!r}"
            )
        if not _is_int(self.max_restarts) or self.max_restarts < 0:
            raise ConfigError(
                f"max_restarts must be an int >= 0 (worker replacements under "
                f"restart_workers=True before raising), got {self.max_restarts!r}"
            )
        if not isinstance(self.progress, bool):
            raise ConfigError(
                f"progress must be True (a tqdm bar for each pass) or False, got {self.progress!r}"
            )
        if self.log_every is not None and (
            isinstance(self.log_every, bool)
            or not isinstance(self.log_every, int | float)
            or not self.log_every > 0
        ):
            raise ConfigError(
                "log_every must be a number of seconds > 0 (between one-line summaries "
                "logged at INFO by the 'stoker' logger) or None (every 60 s when that "
                f"logger is enabled for INFO), got {self.log_every!r}"
            )
        if self.watchdog is not None and (
            isinstance(self.watchdog, bool)
            or not isinstance(self.watchdog, int | float)
            or self.watchdog <= 0
        ):
            raise ConfigError(
                f"watchdog must be a number of seconds > 0 (how long next() waits before "
                f"it logs what is in flight) or None to turn it off, got {self.watchdog!r}"
            )
        if self.on_error not in ON_ERROR_MODES:
            raise ConfigError(f"on_error must be 'raise' or 'skip', got {self.on_error!r}")
        if not _is_int(self.max_errors) or self.max_errors < 0:
            raise ConfigError(f"max_errors must be an int >= 0, got {self.max_errors!r}")
        if self.worker_init_fn is not None and not callable(self.worker_init_fn):
            raise ConfigError(
                f"worker_init_fn must be callable, got {type(self.worker_init_fn).__name__}"
            )
        if not isinstance(self.ordered, bool):
            raise ConfigError(f"ordered must be True or False, got {self.ordered!r}")
        if self.shard is not None and not (
            isinstance(self.shard, Shard) or self.shard in ("jax", "torch")
        ):
            raise ConfigError(
                f"shard must be sk.Shard(index, count), 'jax', 'torch' or None, got {self.shard!r}"
            )

    def _check_ray_options(self) -> None:
        if self.ray_options is None:
            return
        if not isinstance(self.ray_options, Mapping) or not all(
            isinstance(k, str) for k in self.ray_options
        ):
            raise ConfigError(
                "ray_options must be a dict of actor options (e.g. {'num_cpus': 1, "
                f"'memory': 2**30}}), got {self.ray_options!r}"
            )
        if self.worker_mode != "ray":
            raise ConfigError(
                f"ray_options is for worker_mode='ray', but worker_mode={self.worker_mode!r}; "
                "pass worker_mode='ray' to run the workers as Ray actors, or drop ray_options"
            )

    def check_for_stream(self) -> None:
        """The settings that a stream (an IterDataset) cannot serve."""
        for name, value in (
            ("shuffle=True", self.shuffle),
            ("sampler", self.sampler),
            ("batch_sampler", self.batch_sampler),
        ):
            if value:
                raise ConfigError(
                    f"{name} needs a map-style dataset (with __len__ and __getitem__); "
                    "a stream is read in its own order: shuffle it at its source"
                )
        if self.last_batch == "rollover":
            raise NotSupportedError(
                "last_batch='rollover' needs a map-style dataset; use 'keep' or 'drop' for streams"
            )
        if self.on_error == "skip":
            raise NotSupportedError(
                "on_error='skip' needs a map-style dataset: a stream that raised cannot go on"
            )
        if self.restart_workers:
            raise NotSupportedError(
                "restart_workers=True needs a map-style dataset: a stream part's position "
                "lives in the worker that reads it, and dies with it"
            )

    def check_for_hosts(self, n: int, *, may_skip: bool) -> None:
        """The settings that loading one of ``n`` hosts' slices cannot serve."""
        if self.batch_size is None:
            raise ConfigError(
                "shard= needs batch_size: each host loads batch_size records of every global batch"
            )
        if not self.ordered:
            raise ConfigError(
                "ordered=False conflicts with shard=: at every step all hosts must hold "
                "slices of the same global batch, so batches must come in order"
            )
        if may_skip or self.on_error == "skip":
            raise NotSupportedError(
                "shard= does not work with a filter, sk.pack or on_error='skip': each host "
                f"would need to read the other {n - 1} hosts' records to know where its own "
                "slice starts; filter or pack the data before sharding it, or shard the "
                "dataset itself with ds.shard(index, count) before the filter or pack"
            )
        if is_distributed_sampler(self.sampler):
            raise ConfigError(
                "sampler=DistributedSampler(...) conflicts with shard=: both split the data "
                "across hosts; pass a sampler over the whole dataset (or none) with shard="
            )
