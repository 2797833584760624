"""What a PyTorch worker process expects to find when it starts, in stoker's workers.

PyTorch draws a base seed from the loader's ``generator`` (or the global RNG) for
every iterator, and worker ``i`` starts with ``random``, ``torch`` and NumPy's
global RNG seeded from ``base_seed + i``, one intra-op thread, and
``torch.utils.data.get_worker_info()`` describing it; then ``worker_init_fn(i)``
runs. :class:`TorchWorkerInit` does the same as stoker's ``worker_init_fn``; the
base seed reaches it as stoker's ``worker_init_arg``, drawn in the main process.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data._utils import worker as torch_worker

from .._worker_info import WorkerInfo

__all__ = ["SeedBox", "TorchWorkerInit", "draw_base_seed"]


def draw_base_seed(generator: torch.Generator | None) -> int:
    """A base seed drawn exactly as PyTorch's iterators draw it (the same RNG use)."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


class SeedBox:
    """The base seed of the workers to be started next (set by the loader per iterator)."""

    def __init__(self) -> None:
        self.base_seed: int | None = None

    def get(self, loader: object) -> int | None:
        """stoker's ``worker_init_arg``: called in the main process as workers start."""
        return self.base_seed


class TorchWorkerInit:
    """stoker's ``worker_init_fn`` that sets a worker up as PyTorch's would be.

    ``dataset`` is the dataset the worker reads: pickled to the worker together with
    it, it is the worker's own copy, which ``get_worker_info().dataset`` shows (a
    ``worker_init_fn`` may configure it).
    """

    def __init__(self, dataset: Any, worker_init_fn: Callable[[int], None] | None) -> None:
        self.dataset = dataset
        self.worker_init_fn = worker_init_fn

    def __call__(self, info: WorkerInfo) -> None:
        base_seed = int(info.init_arg)
        seed = base_seed + info.id
        torch.set_num_threads(1)
        random.seed(seed)
        torch.manual_seed(seed)
        np.random.seed(torch_worker._generate_state(base_seed, info.id))  # type: ignore[no-untyped-call]
        torch_worker._worker_info = torch_worker.WorkerInfo(
            id=info.id, num_workers=info.num_workers, seed=seed, dataset=self.dataset
        )
        if self.worker_init_fn is not None:
            self.worker_init_fn(info.id)
