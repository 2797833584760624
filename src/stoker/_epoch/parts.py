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

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._context import Context
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
from .jobs import EMPTY, WAIT, Done, Job, Wait
from .plan import Item, _Plan

__all__ = ["StreamParts"]

_UNBATCHED_CHUNK = 32
_NO_INDICES = np.empty(0, dtype=np.int64)


class StreamParts(_Plan):
    """Batches of a stream split across the workers of an executor.

    Its jobs read a part's next batch each, on the worker that owns the part; the
    window of jobs hands their results back (:meth:`take`), and the batches come
    out from the parts in turn, or as they come back (``ordered=False``). How far
    ahead each part reads is ``part_depth``.
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
        ordered: bool = True,
        part_depth: int = 1,
    ) -> None:
        super().__init__(header, epoch, state)
        self._n = self.parts = num_parts
        self._hosts = hosts
        self._batch_size = batch_size
        self._drop = last_batch == "drop"
        self._seed = seed
        self._depth = part_depth  # reads in flight in each part
        self.ordered = ordered
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
        self._reads = [0] * num_parts  # reads in flight, per part
        # Per part, what came back and is not handed out yet: (batch, state after it or
        # None for the part's last one, records); unbatched, one record each.
        self._held: list[deque[tuple[Any, dict[str, Any] | None, int]]] = [
            deque() for _ in range(num_parts)
        ]
        self._seq = 0
        self._resumed = self._batches > 0  # opened mid-epoch, from a saved state
        self._planned = [0] * num_parts  # records asked of each part since it opened

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

    def state(self) -> dict[str, Any]:
        # A part has ended for the state only once its last record is handed out.
        ended = [e and not q for e, q in zip(self._ended, self._held, strict=True)]
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

    def next_job(self, token: int) -> Job | Wait | None:
        """The next read of the first part with room for one (``WAIT``: every part that
        has records left has its reads in flight; None: every part ended)."""
        count = self._batch_size or _UNBATCHED_CHUNK
        for part in range(self._n):
            if self._ended[part] or self._reads[part] >= self._depth:
                continue
            # Host h's worker k reads part h * n + k of the hosts' n * count parts.
            ctx = Context(self._seed, self._epoch, shard=self._whole(part))
            self._seq += 1
            self._reads[part] += 1
            first, self._planned[part] = self._planned[part], self._planned[part] + count
            records = self._stream_records(first, count, self._resumed)
            return Job(
                self._seq,
                "stream",
                ((ctx, _NO_INDICES),),
                f"part {part} of {self._n} of the stream in epoch {self._epoch}: its {records}",
                count=count,
                token=token,
                part=part,
                open_state=self._opened[part],
            )
        return None if all(self._ended) else WAIT

    def _part(self) -> int | None:
        """The part whose batch comes next in order (None: every part is done)."""
        if all(e and not q for e, q in zip(self._ended, self._held, strict=True)):
            return None
        while self._ended[self._next] and not self._held[self._next]:
            self._next = (self._next + 1) % self._n
        return self._next

    def wants(self, jobs: Sequence[Job]) -> Job | None:
        """In order, the next read of the part whose turn it is; else any part's."""
        if not self.ordered:
            return None
        part = self._part()
        return next((job for job in jobs if job.part == part), None)

    def ready(self, ended: bool) -> Item | None:
        """The next batch held: the next part's in order, else the first part's."""
        if self.ordered:
            part = self._part()
            if part is None:
                self._done = True
                return None
            if not self._held[part]:
                return None
        else:
            part = next((k for k in range(self._n) if self._held[k]), None)
            if part is None:
                if all(self._ended):
                    self._done = True
                return None
        value, state, count = self._held[part].popleft()
        self._states[part] = state if state is not None else self._states[part]
        self._next = (part + 1) % self._n
        self._batches += 1
        return value, self.state(), count

    def take(self, job: Job, done: Done) -> int | None:
        """Keep a part's read (its batch, or unbatched its records); the part, when it
        ended (its reads still in flight are dropped)."""
        part = job.part
        self._reads[part] -= 1
        if self._batch_size is None:
            records: list[Any] = done.value
            states = done.states or []
            if len(states) > len(records):  # the part ended: its state after the end
                self._ends[part] = states.pop()
            self._held[part].extend((r, s, 1) for r, s in zip(records, states, strict=True))
            return self._end(part) if len(records) < _UNBATCHED_CHUNK else None
        count = done.count
        if done.value is not EMPTY and count == self._batch_size:
            self._held[part].append((done.value, done.states[-1] if done.states else None, count))
            return None
        if done.states:
            self._ends[part] = done.states[-1]  # taken after the part ended
        if done.value is EMPTY or self._drop:
            if done.states:
                self._states[part] = done.states[-1]
        else:
            self._held[part].append((done.value, done.states[-1] if done.states else None, count))
        return self._end(part)

    def _end(self, part: int) -> int:
        """Part ``part`` has no more records."""
        self._ended[part] = True
        self._reads[part] = 0
        return part
