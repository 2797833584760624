"""``StreamPlan``: batches of consecutive records of a stream, read in this process."""

from __future__ import annotations

import time
from collections import deque
from functools import partial
from typing import Any

from .._batching.builder import BatchBuilder, add_location
from .._context import Context
from .._elastic import (
    elastic_dataset,
    elastic_state,
    fresh_state,
    restore_elastic,
    worker_count_error,
)
from .._hosts import ONE_HOST, Shard
from .._iterdataset import IterDataset, StreamCursor
from .._state import HELD, NEXT_PASS, PARTS, STREAM
from .jobs import EMPTY, Done, Job
from .plan import Item, _Plan

__all__ = ["StreamPlan"]


class StreamPlan(_Plan):
    """Batches of consecutive records of a stream, read in this process.

    Each job reads the next batch from the stream's cursor on the thread that runs it
    (the caller's, or the prefetch thread's: one at a time, in order), with the
    stream's state right after it.
    """

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
        hosts: Shard = ONE_HOST,
    ) -> None:
        super().__init__(header, epoch, state)
        self._builder = builder
        self._batch_size = batch_size
        self._last_batch = last_batch
        self._stream_state: dict[str, Any] | None = None if state is None else state[STREAM]
        self._hosts = hosts
        self._dataset = dataset
        self._elastic = elastic_dataset(dataset)
        start = self._stream_state
        if isinstance(start, dict) and NEXT_PASS in start:  # carried from the last pass
            held = bool(start.get(HELD))
            self._stream_state = {NEXT_PASS: start[NEXT_PASS]}  # until the first batch
            # The same reader still holds it (a continued pass), or a restore loads it.
            start = None if held else start[NEXT_PASS]
        if self._elastic is None and isinstance(start, dict) and PARTS in start:
            raise worker_count_error(int(start[PARTS]), 0, dataset)  # saved with workers
        if self._elastic is not None:  # one reader, in the elastic format (see _elastic.py)
            (start,), _, _ = restore_elastic(self._elastic, self._stream_state, hosts, 1)
            self._stream_state = start
        self._cursor: StreamCursor[Any] = dataset._open(
            Context(seed, self._epoch, shard=hosts), start
        )
        self._planned = self._batches  # reads planned (each a batch)
        self._opened_at = self._batches  # batches handed out before this plan opened
        self._held: deque[tuple[Any, dict[str, Any], int]] = deque()  # read, not handed out
        self._ended = False  # a read found the end (the plan plans no more)
        self._read_all = False  # the cursor has ended (set on the thread that reads)
        if dataset.opens_with_state:  # opened now, its state taken (or restored) now
            opened = self._cursor.state_dict()
            if self._stream_state is None:
                self._stream_state = opened

    def state(self) -> dict[str, Any]:
        if self._elastic is not None:
            return self._state(stream=elastic_state(self._hosts, [self._stream_state], 0, [False]))
        return self._state(stream=self._stream_state)

    def final_state(self) -> dict[str, Any]:
        if self._elastic is not None:
            return self._next_epoch_state(stream=fresh_state(self._hosts, 1))
        # The cursor has ended: its state now is where a stream with state of its own
        # (an epoch it counts) starts its next pass.
        carried = self._dataset._next_pass_state(self._cursor.state_dict(), self._hosts)
        return self._next_epoch_state(stream=None if carried is None else {NEXT_PASS: carried})

    def next_job(self, token: int) -> Job | None:
        """A job reading the next batch of the stream (None once it ended)."""
        if self._ended:
            return None
        seq = self._planned
        self._planned += 1
        size = self._batch_size or 1
        records = self._stream_records(
            (seq - self._opened_at) * size, size, resumed=self._opened_at > 0
        )
        where = f"batch {seq} of epoch {self._epoch} (a stream: its {records})"
        return Job(seq, "local", (), where, token=token, read=partial(self._read, where))

    def _read(self, where: str) -> Done:
        """The next batch, read from the cursor on the thread that runs the job, with
        the stream's state right after it (``EMPTY``: the stream has ended)."""
        if self._read_all:
            return Done(EMPTY)
        size = self._batch_size or 1
        records: list[Any] = []
        start = time.perf_counter()
        try:
            for _ in range(size):
                records.append(next(self._cursor))
        except StopIteration:
            pass
        except Exception as exc:
            add_location(exc, None, f"record {len(records)} of {where}")
            raise
        if not records or (len(records) < size and self._last_batch == "drop"):
            self._read_all = True
            return Done(EMPTY)
        state = self._cursor.state_dict()
        fetch = time.perf_counter() - start
        if self._batch_size is None:
            return Done(records[0], fetch, 0.0, [], [state], 1)
        if self._builder is None:
            raise RuntimeError("a batched stream plan needs a builder")
        value = self._builder.collate(records)
        collate = time.perf_counter() - start - fetch
        return Done(value, fetch, collate, [], [state], len(records))

    def take(self, job: Job, done: Done) -> None:
        """Keep a batch read (or learn that the stream ended)."""
        if done.value is EMPTY or not done.states:
            self._ended = True
            return
        self._held.append((done.value, done.states[0], done.count))

    def ready(self, ended: bool) -> Item | None:
        """The next batch read, in order; None when none is (or at the end)."""
        if not self._held:
            return None
        value, self._stream_state, count = self._held.popleft()
        self._batches += 1
        return value, self.state(), count
