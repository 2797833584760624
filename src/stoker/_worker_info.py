"""``WorkerInfo`` and ``get_worker_info()``: what a worker knows about itself."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "get_worker_info", "set_worker_info"]


@dataclass(frozen=True)
class WorkerInfo:
    """Describes the worker a piece of code runs in.

    Attributes:
        id: the worker's number in ``[0, num_workers)``.
        num_workers: how many workers the loader runs.
        seed: the loader's seed.
        mode: "thread" or "process".
        dataset: the worker's own copy of the dataset.
        init_arg: the value computed once by the loader's ``worker_init_arg``.

    Example:
        >>> import stoker as sk
        >>> sk.get_worker_info() is None  # outside a worker
        True
    """

    id: int
    num_workers: int
    seed: int
    mode: str
    dataset: Any
    init_arg: Any = None


_local = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """The :class:`WorkerInfo` of the calling worker; None outside workers."""
    info: WorkerInfo | None = getattr(_local, "info", None)
    return info


def set_worker_info(info: WorkerInfo | None) -> None:
    """Mark the calling thread as a worker (executors call it when a worker starts)."""
    _local.info = info
