"""The argument checks of ``torch.utils.data.DataLoader``, raised as stoker's ConfigError.

``ConfigError`` is a ``ValueError``, the type PyTorch raises for these, so code that
catches PyTorch's errors catches stoker's. The checks run in PyTorch's order, so the
first problem named is the one PyTorch would name.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import warnings
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError

__all__ = ["TorchArgs", "check_args", "warn_many_workers"]

_START_METHODS = ("fork", "forkserver", "spawn")


@dataclass(frozen=True)
class TorchArgs:
    """The arguments after PyTorch's defaults and checks."""

    shuffle: bool
    batch_size: int | None
    drop_last: bool
    prefetch_factor: int | None
    start_method: str


def check_args(
    *,
    iterable: bool,
    batch_size: int | None,
    shuffle: bool | None,
    sampler: Any,
    batch_sampler: Any,
    num_workers: int,
    drop_last: bool,
    timeout: float,
    multiprocessing_context: Any,
    prefetch_factor: int | None,
    persistent_workers: bool,
) -> TorchArgs:
    """Check the arguments as PyTorch does; return them with PyTorch's defaults filled in.

    Example:
        >>> check_args(iterable=False, batch_size=4, shuffle=None, sampler=None,
        ...     batch_sampler=None, num_workers=2, drop_last=False, timeout=0,
        ...     multiprocessing_context="spawn", prefetch_factor=None,
        ...     persistent_workers=False).prefetch_factor
        2

    Errors:
        ConfigError: the combinations PyTorch rejects, and ``timeout`` without
            workers or ``prefetch_factor=0`` with them (PyTorch fails on those when
            iterating). TypeError: a ``multiprocessing_context`` that is neither a
            name nor a context.
    """
    if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
        raise ConfigError(
            f"num_workers must be an int >= 0, got {num_workers!r}; "
            "use num_workers=0 to load in the main process"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
        raise ConfigError(f"timeout must be a number of seconds >= 0 (0: none), got {timeout!r}")
    if num_workers == 0 and prefetch_factor is not None:
        raise ConfigError(
            "prefetch_factor needs worker processes: use num_workers > 0 with it, or leave "
            "prefetch_factor=None"
        )
    if num_workers > 0 and prefetch_factor is None:
        prefetch_factor = 2
    elif prefetch_factor is not None and (
        not isinstance(prefetch_factor, int)
        or isinstance(prefetch_factor, bool)
        or prefetch_factor < 0
    ):
        raise ConfigError(f"prefetch_factor must be an int >= 0, got {prefetch_factor!r}")
    elif prefetch_factor == 0:  # PyTorch fails on it when iterating
        raise ConfigError(
            "prefetch_factor=0 with workers would load nothing ahead: use prefetch_factor >= 1 "
            "(batches loaded ahead per worker), or num_workers=0"
        )
    if persistent_workers and num_workers == 0:
        raise ConfigError("persistent_workers=True needs num_workers > 0")
    if iterable:
        given = (
            ("shuffle", shuffle if shuffle not in (None, False) else None),
            ("sampler", sampler),
            ("batch_sampler", batch_sampler),
        )
        for name, value in given:
            if value is not None:
                raise ConfigError(
                    f"an IterableDataset takes no {name} (got {name}={value!r}): it yields "
                    "records in its own order; shuffle it inside the dataset"
                )
    shuffled = bool(shuffle)
    if sampler is not None and shuffled:
        raise ConfigError(
            "sampler conflicts with shuffle=True: the sampler decides the order; drop shuffle"
        )
    if batch_sampler is not None:
        if batch_size != 1 or shuffled or sampler is not None or drop_last:
            raise ConfigError(
                "batch_sampler conflicts with batch_size, shuffle, sampler and drop_last: "
                "the batch sampler decides all of them; pass only batch_sampler"
            )
        batch_size, drop_last = None, False
    elif batch_size is None and drop_last:
        raise ConfigError("drop_last=True needs batches: batch_size=None yields records one by one")
    if timeout > 0 and num_workers == 0:
        raise ConfigError(
            f"timeout={timeout} needs worker processes (num_workers > 0): without them "
            "loading runs in the main process, where there is nothing to wait for"
        )
    return TorchArgs(
        shuffle=shuffled,
        batch_size=batch_size,
        drop_last=bool(drop_last),
        prefetch_factor=prefetch_factor,
        start_method=_start_method(multiprocessing_context, num_workers),
    )


def _start_method(context: Any, num_workers: int) -> str:
    """stoker's ``start_method`` for PyTorch's ``multiprocessing_context``.

    With none given it is the platform's default, as for PyTorch (``fork`` on Linux
    before Python 3.14), without fixing the default for the rest of the program.
    """
    if context is None:
        chosen = multiprocessing.get_start_method(allow_none=True)
        return chosen or multiprocessing.get_all_start_methods()[0]
    if num_workers == 0:
        raise ConfigError(
            "multiprocessing_context needs worker processes: use num_workers > 0 with it"
        )
    if isinstance(context, str):
        if context not in multiprocessing.get_all_start_methods():
            raise ConfigError(
                f"multiprocessing_context must be one of "
                f"{multiprocessing.get_all_start_methods()!r}, got {context!r}"
            )
        method = context
    elif isinstance(context, multiprocessing.context.BaseContext):
        method = context.get_start_method()
    else:
        raise TypeError(  # a wrong type, as PyTorch says
            "multiprocessing_context must be a start method name or a multiprocessing "
            f"context, got {type(context).__name__}"
        )
    if method not in _START_METHODS:
        raise ConfigError(f"start method {method!r} is not one of {_START_METHODS!r}")
    return method


def warn_many_workers(num_workers: int) -> None:
    """PyTorch's warning when more workers start than this process may use CPUs."""
    if hasattr(os, "sched_getaffinity"):
        cpus: int | None = len(os.sched_getaffinity(0))
    else:
        cpus = os.cpu_count()
    if cpus is not None and num_workers <= cpus:
        return
    suggested = (
        f"Our suggested max number of worker in current system is {cpus}, which is smaller "
        "than what this DataLoader is going to create."
        if cpus is not None
        else "DataLoader is not able to compute a suggested max number of worker in current system."
    )
    warnings.warn(
        f"This DataLoader will create {num_workers} worker processes in total. {suggested} "
        "Please be aware that excessive worker creation might get DataLoader running slow or "
        "even freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
        stacklevel=3,
    )
