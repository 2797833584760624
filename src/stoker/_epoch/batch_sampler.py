"""``BatchSamplerPlan``: batches exactly as a user's batch sampler yields them.

A batch sampler that deals batches to hosts itself (it has ``host_cursor``, as
:class:`~stoker.TokenBatchSampler` does) gives each host whole batches of its own and
resumes from its cursor's state, kept in the loader state's ``sampler`` entry, on any
host count. Any other batch sampler yields global batches that each host slices, and
resumes by fast-forward.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .._batching.builder import BatchBuilder
from .._context import Context
from .._hosts import ONE_HOST, Shard, host_slice
from .._state import SAMPLER
from ..errors import StateError
from .jobs import Job
from .plan import _Plan

__all__ = ["BatchSamplerPlan"]


class BatchSamplerPlan(_Plan):
    """Batches exactly as a user's batch sampler yields them (resumes by fast-forward)."""

    def __init__(
        self,
        *,
        builder: BatchBuilder,
        batch_sampler: Any,
        dataset_len: int,
        seed: int,
        header: dict[str, Any],
        epoch: int,
        state: dict[str, Any] | None,
        hosts: Shard = ONE_HOST,
    ) -> None:
        super().__init__(header, epoch, state)
        self._builder = builder
        self._seed = seed
        self._len = dataset_len
        self._hosts = hosts
        self._dealt: Any = None  # the cursor of a batch sampler that deals to hosts
        dealer = getattr(batch_sampler, "host_cursor", None)
        if callable(dealer):
            saved = None if state is None else state.get(SAMPLER)
            self._dealt = dealer(self._epoch, hosts, saved, seed)
            self._batches = self._dealt.batches
            return
        if hasattr(batch_sampler, "set_epoch"):
            batch_sampler.set_epoch(self._epoch)
        self._it: Iterator[Any] = iter(batch_sampler)
        for _ in range(self._batches):
            if next(self._it, None) is None:
                raise StateError(
                    f"state is at batch {self._batches} of epoch {self._epoch}, but the batch "
                    "sampler yields fewer batches: it is not the sampler the state was saved with"
                )

    def state(self) -> dict[str, Any]:
        if self._dealt is not None:
            return self._state(**{SAMPLER: self._dealt.state_dict()})
        return self._state()

    def final_state(self) -> dict[str, Any]:
        return self._next_epoch_state()

    def _next_indices(self) -> tuple[np.ndarray, str] | None:
        """The indices of the next batch and where it is; None at the end.

        With several hosts, a batch is a global batch and this host takes its even
        slice; a batch too small to give every host a record is passed over.
        """
        if self._dealt is not None:
            batch = None if self._done else self._dealt.next_batch()
            if batch is None:
                self._done = True
                return None
            where = self._where()
            self._batches += 1
            return batch, where
        while not self._done:
            indices = next(self._it, None)
            if indices is None:
                self._done = True
                return None
            idx = np.asarray(list(indices), dtype=np.int64)
            where = self._where()
            if idx.size and (idx.min() < 0 or idx.max() >= self._len):
                bad = int(idx.min() if idx.min() < 0 else idx.max())
                raise IndexError(
                    f"the batch sampler yielded index {bad} for {where}, "
                    f"outside a dataset of length {self._len}"
                )
            self._batches += 1
            if self._hosts.count > 1:
                lo, hi = host_slice(len(idx), self._hosts)
                if hi == lo:
                    continue
                idx = idx[lo:hi]
            return idx, where
        return None

    @property
    def job_per_batch(self) -> bool:
        """Every batch is a job of its own."""
        return True

    def next_job(self, token: int) -> Job | None:
        """The next batch as a job for a worker; None at the end of the epoch."""
        got = self._next_indices()
        if got is None:
            return None
        idx, where = got
        ctx = Context(self._seed, self._epoch)
        return Job(self._batches - 1, "build", ((ctx, idx),), where, self.state(), len(idx), token)
