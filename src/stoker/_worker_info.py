"""``WorkerInfo`` and ``get_worker_info()``: what a worker knows about itself."""

from __future__ import annotations

import hashlib
import struct
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["WorkerInfo", "get_worker_info", "set_worker_info", "worker_seed"]

_SEED_TAG = 0x5EED_0003  # keeps worker seeds apart from record and epoch streams
_MASK64 = (1 << 64) - 1
SEED_RANGE = 1 << 32
"""Worker seeds lie in ``[0, 2**32)``: ``np.random.seed`` and ``random.seed`` take them."""


@dataclass(frozen=True)
class WorkerInfo:
    """Describes the worker a piece of code runs in.

    Attributes:
        id: the worker's number in ``[0, num_workers)``.
        num_workers: how many workers the loader runs (with ``num_workers="auto"`` on
            threads, whose count changes while loading: how many ran when this
            worker started).
        seed: this worker's own seed, in ``[0, 2**32)``: different for every worker of
            a loader, and the same in every run with the same loader seed (see
            :func:`worker_seed`). Seed per-worker libraries from it
            (``np.random.seed(info.seed)``); records' seeded maps do not use it.
        mode: "thread", "process" or "ray".
        dataset: the worker's own copy of the dataset.
        init_arg: the value computed once by the loader's ``worker_init_arg``.
        loader_seed: the loader's ``seed``.

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
    loader_seed: int = 0


def worker_seed(loader_seed: int, start: int, worker_id: int) -> int:
    """The seed of worker ``worker_id`` in the ``start``-th start of a loader's workers.

    A hash of (loader seed, start) plus the worker id, modulo ``2**32``: the workers of
    one start always get distinct seeds, and the same ones in every run. ``start``
    is 0 for a loader's first workers (they serve every epoch); workers started again
    (after ``loader.close()``, or for a second iterator read at the same time) count
    up, so they do not repeat the first ones' streams.

    Example:
        >>> seeds = [worker_seed(0, 0, i) for i in range(4)]
        >>> len(set(seeds)), seeds == [worker_seed(0, 0, i) for i in range(4)]
        (4, True)
    """
    packed = struct.pack("<3Q", _SEED_TAG, loader_seed & _MASK64, start & _MASK64)
    digest = hashlib.blake2b(packed, digest_size=8).digest()
    return (int.from_bytes(digest, "little") + worker_id) % SEED_RANGE


_local = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """The :class:`WorkerInfo` of the calling worker; None outside workers."""
    info: WorkerInfo | None = getattr(_local, "info", None)
    return info


def set_worker_info(info: WorkerInfo | None) -> None:
    """Mark the calling thread as a worker (executors call it when a worker starts)."""
    _local.info = info
