"""Epoch plans: which records make each batch, and the state after each batch.

A plan is the producer side of an iterator. ``next_item()`` returns the next
``(batch, state, records)``: the batch, the JSON state that resumes right after it,
and how many records it holds; None at the end of the epoch, after which
``final_state()`` is the state that starts the next epoch.

Map-style datasets follow a sampler. Without a filter every batch is a fixed run of
sampler positions; with one, a batch is filled with the next records that pass, and
the state after a batch is the sampler position just after its last record, so the
records read ahead are read again after a restore, never lost or repeated. Under
``last_batch="rollover"`` the records left at the end of an epoch (fewer than a
batch) start the next one; the state carries them as (epoch, index) pairs.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._batching.builder import BatchBuilder, add_location
from ._context import SKIP, Context
from ._dataset import IterDataset, StreamCursor
from ._sampling.base import Sampler, SamplerCursor
from .errors import StateError

__all__ = ["BatchSamplerPlan", "MapPlan", "StreamPlan"]

Item = tuple[Any, dict[str, Any], int]


class _Plan:
    """What every plan shares: the loader's state header and the (epoch, batches) reached."""

    def __init__(self, header: dict[str, Any], epoch: int, state: dict[str, Any] | None) -> None:
        self._header = header
        self._epoch: int = epoch if state is None else state["epoch"]
        self._batches: int = 0 if state is None else state["batches"]
        self._done = False

    def _where(self) -> str:
        return f"batch {self._batches} of epoch {self._epoch}"

    def _state(self, **fields: Any) -> dict[str, Any]:
        """The state right after the last batch handed out, with the plan's own fields."""
        return {**self._header, "epoch": self._epoch, "batches": self._batches, **fields}

    def _next_epoch_state(self, **fields: Any) -> dict[str, Any]:
        """The state that starts the next epoch, with the plan's own fields."""
        return {**self._header, "epoch": self._epoch + 1, "batches": 0, **fields}


class MapPlan(_Plan):
    """Batches of a map-style dataset in the order of a sampler."""

    def __init__(
        self,
        *,
        builder: BatchBuilder,
        sampler: Sampler,
        batch_size: int | None,
        last_batch: str,
        seed: int,
        skips: bool,
        header: dict[str, Any],
        epoch: int,
        state: dict[str, Any] | None,
    ) -> None:
        self._builder = builder
        self._batch_size = batch_size or 1
        self._collate = batch_size is not None
        self._last_batch = last_batch if batch_size is not None else "keep"
        self._seed = seed
        self._skips = skips or not self._collate
        super().__init__(header, epoch, state)
        self._carry: list[tuple[int, int]] = []  # (epoch, index) carried into this epoch
        if state is None:
            self._cursor: SamplerCursor = sampler.cursor(epoch, 0)
        else:
            self._carry = [(int(e), int(i)) for e, i in state["carry"]]
            self._cursor = sampler.restore(state["sampler"])
            if self._cursor.epoch != self._epoch:
                raise StateError("state is inconsistent: its sampler is at another epoch")
        self._ready: deque[tuple[Any, int, int]] = deque()  # (record, epoch, index) read ahead
        self._chunk = batch_size if batch_size is not None else 32
        self._position = self._cursor.position
        self._final: dict[str, Any] | None = None

    def _ctx(self, epoch: int) -> Context:
        return Context(self._seed, epoch)

    def state(self) -> dict[str, Any]:
        sampler_state = {**self._cursor.state_dict(), "position": self._position}
        return self._state(carry=[[e, i] for e, i in self._carry], sampler=sampler_state)

    def final_state(self) -> dict[str, Any]:
        if self._final is None:
            raise RuntimeError("final_state() before the end of the epoch")
        return self._final

    def _finish(self, leftover: list[tuple[int, int]]) -> None:
        self._done = True
        self._position = 0
        carry = leftover if self._last_batch == "rollover" else []
        self._final = self._next_epoch_state(
            carry=[[e, i] for e, i in carry],
            sampler={**self._cursor.state_dict(), "epoch": self._epoch + 1, "position": 0},
        )

    def next_item(self) -> Item | None:
        if self._done:
            return None
        if self._skips:
            return self._next_filled()
        return self._next_fixed()

    def _next_fixed(self) -> Item | None:
        size = self._batch_size
        carry, self._carry = self._carry[:size], self._carry[size:]
        fresh = self._cursor.take(size - len(carry))
        pairs = carry + [(self._epoch, int(i)) for i in fresh] if carry else None
        count = len(carry) + len(fresh)
        if count == 0 or (count < size and self._last_batch != "keep"):
            leftover = pairs if pairs is not None else [(self._epoch, int(i)) for i in fresh]
            self._finish(leftover)
            return None
        where = self._where()
        if pairs is None:
            batch = self._builder.build([(self._ctx(self._epoch), fresh)], where)
        else:
            parts = [
                (self._ctx(e), np.array([i for _, i in grp], dtype=np.int64))
                for e, grp in itertools.groupby(pairs, key=lambda p: p[0])
            ]
            batch = self._builder.build(parts, where)
        self._position = self._cursor.position
        self._batches += 1
        return batch, self.state(), count

    def _fill(self) -> bool:
        """Read more records into ``_ready``; False at the end of the epoch."""
        if self._carry:
            carry, self._carry = self._carry, []
            for e, grp in itertools.groupby(carry, key=lambda p: p[0]):
                idx = np.array([i for _, i in grp], dtype=np.int64)
                recs = self._builder.records(self._ctx(e), idx, self._where())
                self._ready.extend((r, e, i) for r, i in zip(recs, idx.tolist(), strict=True))
            return True
        idx = self._cursor.take(self._chunk)
        if len(idx) == 0:
            return False
        recs = self._builder.records(self._ctx(self._epoch), idx, self._where())
        self._ready.extend((r, self._epoch, i) for r, i in zip(recs, idx.tolist(), strict=True))
        return True

    def _next_filled(self) -> Item | None:
        size = self._batch_size
        taken: list[tuple[Any, int, int]] = []
        while len(taken) < size:
            if not self._ready and not self._fill():
                break
            record, epoch, index = self._ready.popleft()
            if epoch == self._epoch:
                self._position += 1
            if record is not SKIP:
                taken.append((record, epoch, index))
        if not taken or (len(taken) < size and self._last_batch != "keep"):
            self._finish([(e, i) for _, e, i in taken])
            return None
        records = [r for r, _, _ in taken]
        batch = self._builder.collate(records) if self._collate else records[0]
        self._batches += 1
        return batch, self.state(), len(taken)


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
    ) -> None:
        super().__init__(header, epoch, state)
        self._builder = builder
        self._seed = seed
        self._len = dataset_len
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
        return self._state()

    def final_state(self) -> dict[str, Any]:
        return self._next_epoch_state()

    def next_item(self) -> Item | None:
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
            records = [
                r
                for r in self._builder.records(Context(self._seed, self._epoch), idx, where)
                if r is not SKIP
            ]
            self._batches += 1
            if records:
                return self._builder.collate(records), self.state(), len(records)
        return None


class StreamPlan(_Plan):
    """Batches of consecutive records of a stream."""

    def __init__(
        self,
        *,
        dataset: IterDataset[Any],
        builder: BatchBuilder | None,
        batch_size: int | None,
        last_batch: str,
        seed: int,
        header: dict[str, Any],
        epoch: int,
        state: dict[str, Any] | None,
    ) -> None:
        super().__init__(header, epoch, state)
        self._builder = builder
        self._batch_size = batch_size
        self._last_batch = last_batch
        self._stream_state: dict[str, Any] | None = None if state is None else state["stream"]
        self._cursor: StreamCursor[Any] = dataset._open(
            Context(seed, self._epoch), self._stream_state
        )

    def state(self) -> dict[str, Any]:
        return self._state(stream=self._stream_state)

    def final_state(self) -> dict[str, Any]:
        return self._next_epoch_state(stream=None)

    def next_item(self) -> Item | None:
        if self._done:
            return None
        size = self._batch_size or 1
        records: list[Any] = []
        try:
            for _ in range(size):
                records.append(next(self._cursor))
        except StopIteration:
            pass
        except Exception as exc:
            add_location(exc, None, f"record {len(records)} of {self._where()} (a stream)")
            raise
        if not records or (len(records) < size and self._last_batch == "drop"):
            self._done = True
            return None
        self._stream_state = self._cursor.state_dict()
        self._batches += 1
        if self._batch_size is None:
            return records[0], self.state(), 1
        if self._builder is None:
            raise RuntimeError("a batched stream plan needs a builder")
        return self._builder.collate(records), self.state(), len(records)
