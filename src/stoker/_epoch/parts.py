"""``StreamParts``: a stream read by several workers, one disjoint part each.

Worker ``k`` of ``n`` opens the stream with ``Shard(k, n)`` in its context: stoker's
own sources read only that part (``from_iterable`` hands the shard to a factory
that takes one, or keeps every n-th record), and a user's ``IterDataset`` keeps every
n-th record unless it declares ``shards_itself``. No record is read twice. With
several hosts, worker ``k`` of host ``h`` reads part ``h * n + k`` of ``n * hosts``.

Batches are taken from the parts in turn (part 0, 1, ..., n-1, 0, ...), which makes
the order a function of (seed, num_workers); with ``ordered=False`` a part's batch
is handed out as soon as it is ready. Each part ends on its own, so an epoch may end
with up to ``n`` short batches under ``last_batch="keep"``. The state holds every
part's position after its last batch handed out, so a restore with the same
``num_workers`` continues each part exactly. An elastic stream (tar shards, see
``_elastic.py``) keeps the same per-part states in its own format, which also
resumes under another ``num_workers`` or host count by dealing its shards anew.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as futures_wait
from typing import Any

import numpy as np

from .._context import Context
from .._deadline import remaining, timeout_error
from .._elastic import (
    elastic_dataset,
    elastic_state,
    fresh_state,
    restore_elastic,
    worker_count_error,
)
from .._hosts import ONE_HOST, Shard
from .._iterdataset import IterDataset
from .._state import ENDED, HELD, NEXT, NEXT_PASS, PARTS, STATES, STREAM, parts_state
from .jobs import EMPTY, Done, Job, Submits
from .plan import Item, ReadAhead, _Plan

__all__ = ["StreamParts"]

_UNBATCHED_CHUNK = 32
_NO_INDICES = np.empty(0, dtype=np.int64)


class StreamParts(_Plan):
    """Batches of a stream split across the workers of an executor (a plan and its window).

    The executor, and how far ahead to read, come with :meth:`read_with`.
    """

    def __init__(
        self,
        *,
        num_parts: int,
        batch_size: int | None,
        last_batch: str,
        seed: int,
        header: dict[str, Any],
        epoch: int,
        state: dict[str, Any] | None,
        hosts: Shard = ONE_HOST,
        dataset: object = None,
    ) -> None:
        super().__init__(header, epoch, state)
        self._executor: Submits | None = None
        self._n = num_parts
        self._hosts = hosts
        self._batch_size = batch_size
        self._drop = last_batch == "drop"
        self._seed = seed
        self._depth = 1
        self.ordered = True
        self._timeout: float | None = None
        self._token = 0
        self._on_done: Callable[[Done], None] = _ignore
        parts = None if state is None else state.get(STREAM)
        held = False  # the parts' carried states are held by their readers already
        if isinstance(parts, dict) and NEXT_PASS in parts:  # carried from the last pass
            parts, held = parts[NEXT_PASS], bool(parts.get(HELD))
        self._dataset = dataset
        self._elastic = elastic_dataset(dataset)
        if self._elastic is not None:
            restored = restore_elastic(self._elastic, parts, hosts, num_parts)
        else:
            restored = self._restore(parts)
        self._states, self._next, self._ended = restored
        # Where each part's cursor starts; until it hands out a batch, its state is
        # the one restored (or carried, and held by its reader) from the last pass.
        self._opened = [None] * num_parts if held else list(self._states)
        self._ends: list[dict[str, Any] | None] = [None] * num_parts  # states after the end
        self._inflight: list[deque[tuple[Job, Future[Done]]]] = [deque() for _ in range(num_parts)]
        self._unbatched: list[deque[tuple[Any, dict[str, Any]]]] = [
            deque() for _ in range(num_parts)
        ]
        self._seq = 0
        self.wait_seconds = 0.0

    def _restore(self, parts: Any) -> tuple[list[dict[str, Any] | None], int, list[bool]]:
        n = self._n
        if parts is None:
            return [None] * n, 0, [False] * n
        if not isinstance(parts, dict) or PARTS not in parts:
            raise worker_count_error(0, n, self._dataset)
        saved = parts[PARTS]
        if saved != n:
            raise worker_count_error(saved, n, self._dataset)
        return list(parts[STATES]), int(parts[NEXT]), [bool(e) for e in parts[ENDED]]

    def read_with(self, executor: Submits | None, read: ReadAhead) -> None:
        """Read the parts on ``executor``'s workers, ``read.depth`` batches ahead in all."""
        if executor is None:
            raise RuntimeError("a stream split across workers reads through an executor")
        self._executor = executor
        self._depth = max(1, -(-read.depth // self._n))
        self.ordered = read.ordered
        self._timeout = read.timeout
        self._token = read.token
        self._on_done = read.on_done

    def state(self) -> dict[str, Any]:
        # A part has ended for the state only once its last record is handed out.
        ended = [e and not q for e, q in zip(self._ended, self._unbatched, strict=True)]
        if self._elastic is not None:
            elastic = elastic_state(self._hosts, self._states, self._next, ended)
            return self._state(stream=elastic)
        return self._state(stream=parts_state(self._states, self._next, ended))

    def final_state(self) -> dict[str, Any]:
        if self._elastic is not None:
            return self._next_epoch_state(stream=fresh_state(self._hosts, self._n))
        carried = self._carried()
        return self._next_epoch_state(stream=None if carried is None else {NEXT_PASS: carried})

    def _carried(self) -> dict[str, Any] | None:
        """The parts' states that open the next pass of a stream with state of its own
        (None: start afresh), from their states after they ended."""
        dataset = self._dataset
        if not isinstance(dataset, IterDataset):
            return None
        states = [
            dataset._next_pass_state(state, self._whole(part))
            for part, state in enumerate(self._ends)
        ]
        if all(s is None for s in states):
            return None
        return parts_state(states, 0, [False] * self._n)

    def _whole(self, part: int) -> Shard:
        """The part of the hosts' whole stream that worker ``part`` of this host reads."""
        return Shard(self._hosts.index * self._n + part, self._hosts.count * self._n)

    # -- jobs -----------------------------------------------------------------------

    def _top_up(self, part: int) -> None:
        executor = self._executor
        if executor is None:
            raise RuntimeError("StreamParts reads through read_with()'s executor")
        queue = self._inflight[part]
        count = self._batch_size or _UNBATCHED_CHUNK
        while not self._ended[part] and len(queue) < self._depth:
            # Host h's worker k reads part h * n + k of the hosts' n * count parts.
            ctx = Context(self._seed, self._epoch, shard=self._whole(part))
            self._seq += 1
            job = Job(
                self._seq,
                "stream",
                ((ctx, _NO_INDICES),),
                f"part {part} of {self._n} of the stream in epoch {self._epoch}",
                count=count,
                token=self._token,
                part=part,
                open_state=self._opened[part],
            )
            queue.append((job, executor.submit(job)))

    def _ready_part(self, deadline: float | None) -> int:
        """The part whose batch is handed out next (waiting for it when ordered)."""
        live = [k for k in range(self._n) if not self._ended[k] or self._unbatched[k]]
        if self.ordered:
            while self._ended[self._next] and not self._unbatched[self._next]:
                self._next = (self._next + 1) % self._n
            part = self._next
            if not self._unbatched[part]:
                future = self._inflight[part][0][1]
                futures_wait([future], remaining(deadline))
                if not future.done():
                    raise timeout_error(self._timeout)
            return part
        for part in live:
            if self._unbatched[part] or self._inflight[part][0][1].done():
                return part
        heads = [self._inflight[k][0][1] for k in live]
        futures_wait(heads, remaining(deadline), FIRST_COMPLETED)
        for part in live:
            if self._inflight[part][0][1].done():
                return part
        raise timeout_error(self._timeout)

    def next_item(self) -> Item | None:
        start = time.perf_counter()
        deadline = None if self._timeout is None else start + self._timeout
        try:
            return self._next_item(deadline)
        finally:
            self.wait_seconds += time.perf_counter() - start

    def _next_item(self, deadline: float | None) -> Item | None:
        while True:
            for part in range(self._n):
                self._top_up(part)
            if all(self._ended[k] and not self._unbatched[k] for k in range(self._n)):
                self._done = True
                return None
            part = self._ready_part(deadline)
            if self._unbatched[part]:
                record, state = self._unbatched[part].popleft()
                return self._hand_out(part, record, state, 1)
            _, future = self._inflight[part].popleft()
            done = future.result()
            self._on_done(done)
            if self._batch_size is None:
                records: list[Any] = done.value
                states = done.states or []
                if len(states) > len(records):  # the part ended: its state after the end
                    self._ends[part] = states.pop()
                if len(records) < _UNBATCHED_CHUNK:
                    self._end(part)
                self._unbatched[part].extend(zip(records, states, strict=True))
                continue
            count = done.count
            if done.value is EMPTY or count < self._batch_size:
                self._end(part)
                if done.states:
                    self._ends[part] = done.states[-1]  # taken after the part ended
                if done.value is EMPTY or self._drop:
                    if done.states:
                        self._states[part] = done.states[-1]
                    continue
            if done.states:
                return self._hand_out(part, done.value, done.states[-1], count)
            return self._hand_out(part, done.value, self._states[part], count)

    def _hand_out(self, part: int, value: Any, state: dict[str, Any] | None, count: int) -> Item:
        self._states[part] = state
        self._next = (part + 1) % self._n
        self._batches += 1
        return value, self.state(), count

    def _end(self, part: int) -> None:
        """Part ``part`` has no more records: drop the jobs still asking it for some."""
        self._ended[part] = True
        for _, future in self._inflight[part]:
            future.cancel()
        self._inflight[part].clear()

    def in_flight(self) -> list[Job]:
        return [queue[0][0] for queue in self._inflight if queue]

    def close(self) -> None:
        if self._executor is not None:
            self._executor.cancel(self._token)
        for queue in self._inflight:
            for _, future in queue:
                future.cancel()
            queue.clear()


def _ignore(done: Done) -> None:
    return None
