"""Where a pass stands, told to Accelerate's ``GradientState`` as its own loaders tell it.

Accelerate's loaders register with the process's ``GradientState`` while they are
iterated: ``end_of_dataloader`` turns true as the last batch is handed out, and
``remainder`` is the number of real records in that last batch. Code that never
sees the loader reads them there: ``Accelerator.gather_for_metrics`` cuts the
padding off the last batch with ``remainder`` (the HF ``Trainer``'s evaluation loop
counts every batch as a full one and relies on that cut), and gradient accumulation
ends a cycle at ``end_of_dataloader``.

A drop-in pass registers in the same way, but only when an ``Accelerator`` (or a
``GradientState``) already exists in the process: accelerate is never imported here.
"""

from __future__ import annotations

import sys
from collections.abc import Sized
from typing import Any

import torch.utils.data as tud

__all__ = ["PassProgress", "remainder", "track"]


class PassProgress:
    """The two attributes ``GradientState`` reads from its active loader."""

    def __init__(self, state: Any, remainder: int) -> None:
        self._state = state
        self.remainder = remainder
        self.end_of_dataloader = False

    def last_batch(self) -> None:
        """The batch being handed out is the pass's last."""
        self.end_of_dataloader = True

    def leave(self) -> None:
        """The pass ended: the loader iterated before it is active again (idempotent)."""
        self.end_of_dataloader = True
        if self._state is not None:
            state, self._state = self._state, None
            state._remove_dataloader(self)


def remainder(loader: tud.DataLoader[Any]) -> int:
    """Records in an epoch's short last batch: 0 when none is short, -1 when not known
    (Accelerate's meanings). ``gather_for_metrics`` cuts the last gathered batch to it,
    so a sampler sharded across processes (gathered from every rank) gets -1."""
    if loader.drop_last:
        return 0
    sharded = getattr(loader.sampler, "num_replicas", 1) != 1
    if loader.batch_size is None or sharded or not isinstance(loader.sampler, Sized):
        return -1
    return len(loader.sampler) % loader.batch_size


def track(loader: tud.DataLoader[Any]) -> PassProgress | None:
    """Register a new pass of ``loader`` with the process's ``GradientState``, if there
    is one."""
    module = sys.modules.get("accelerate.state")
    gradient_state = getattr(module, "GradientState", None)
    if gradient_state is None or not gradient_state._shared_state:
        return None  # no Accelerator in this process: nothing reads it
    state = gradient_state()
    progress = PassProgress(state, remainder(loader))
    state._add_dataloader(progress)
    return progress
