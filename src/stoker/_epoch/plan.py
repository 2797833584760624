"""Epoch plans: which records make each batch, and the state after each batch.

A plan is the producer side of an iterator: it plans the jobs that the window of
jobs in flight (``stoker._window``) runs on an executor, and hands out each
``(batch, state, records)``: the batch, the JSON state that resumes right after it,
and how many records it holds. After the last one, ``final_state()`` is the state
that starts the next epoch.

Map-style datasets follow a sampler. Without a filter every batch is a fixed run of
sampler positions; with one, chunks of records are read as jobs and a batch is filled with the next
records that pass (with
``pack``, rows are packed from the next records until one fits in none: a ``Filler``
decides), and the state after a batch is the sampler position just after its last
record, so the records read ahead are read again after a restore, never lost or
repeated. Under
``last_batch="rollover"`` the records left at the end of an epoch (fewer than a
batch) start the next one; the state carries them as (epoch, index) pairs.

With several hosts (``shard=``), the sampler's order is cut into global batches of
``batch_size * hosts`` records and each host keeps only its consecutive slice of
each (``host_slice``). The state is a global position, the same on every host, so it
resumes on any host count with the same global batch size.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from .._batching.builder import BatchBuilder
from .._context import Context
from .._hosts import ONE_HOST, Shard, host_slice
from .._sampling.base import Sampler, SamplerCursor
from .._state import BATCHES, CARRY, EPOCH, SAMPLER, position_state
from ..errors import StateError
from .fill import Filler, Records, Run
from .jobs import Done, Job, Wait

__all__ = ["EpochPlan", "Item", "MapPlan"]

Item = tuple[Any, dict[str, Any], int]


class EpochPlan(Protocol):
    """What the iterator and the window of jobs ask of every plan of an epoch (stages 2-4).

    A plan only plans jobs (:meth:`next_job`; ``WAIT`` when nothing can be planned
    until a job in flight finishes). When every job is one batch
    (:attr:`job_per_batch`) the window hands the batches out itself, with the state
    each job carries; otherwise the window gives each finished job back to the plan
    (:meth:`take`), which hands out zero or more batches from it (:meth:`ready`: a
    filtered or packed chunk, a stream part's next records), in its own order
    (:meth:`wants` names the job in flight whose result it needs next).
    :meth:`final_state`
    starts the next epoch once the last batch was handed out.
    """

    @property
    def job_per_batch(self) -> bool: ...

    def next_job(self, token: int) -> Job | Wait | None: ...

    def take(self, job: Job, done: Done) -> int | None: ...

    def ready(self, ended: bool) -> Item | None: ...

    def wants(self, jobs: Sequence[Job]) -> Job | None: ...

    @property
    def parts(self) -> int: ...

    def state(self) -> dict[str, Any]: ...

    def final_state(self) -> dict[str, Any]: ...

    def final_keep(self) -> object: ...

    def close(self) -> None: ...


class _Plan:
    """What every plan shares: the loader's state header and the (epoch, batches) reached."""

    def __init__(self, header: dict[str, Any], epoch: int, state: dict[str, Any] | None) -> None:
        self._header = header
        self._epoch: int = epoch if state is None else state[EPOCH]
        self._batches: int = 0 if state is None else state[BATCHES]
        self._done = False

    def _where(self) -> str:
        return f"batch {self._batches} of epoch {self._epoch}"

    def _stream_records(self, first: int, count: int, resumed: bool) -> str:
        """A stream's records read by one job, for the reports (a stream's records have
        no indices): their positions in this pass, or after the position a resumed
        iterator started from (what came before it is not counted)."""
        span = f"records {first} to {first + count - 1}" if count > 1 else f"record {first}"
        return f"{span} after the resumed position" if resumed else span

    # The defaults of an EpochPlan.

    @property
    def job_per_batch(self) -> bool:
        return False

    def next_job(self, token: int) -> Job | Wait | None:
        raise NotImplementedError(f"{type(self).__name__} plans no jobs")

    def take(self, job: Job, done: Done) -> int | None:
        raise NotImplementedError(f"{type(self).__name__}: every job is a batch")

    def ready(self, ended: bool) -> Item | None:
        return None

    def wants(self, jobs: Sequence[Job]) -> Job | None:
        """The job whose result this plan needs next (None: whichever finishes first)."""
        return jobs[0] if jobs else None

    parts = 0  # the parts of a stream read in parallel (each with its reads in flight)

    def final_keep(self) -> object:
        """What must live on after the pass for :meth:`final_state` to stay current."""
        return None

    def close(self) -> None:
        return None

    def _state(self, **fields: Any) -> dict[str, Any]:
        """The state right after the last batch handed out, with the plan's own fields."""
        return position_state(self._header, self._epoch, self._batches, **fields)

    def _next_epoch_state(self, **fields: Any) -> dict[str, Any]:
        """The state that starts the next epoch, with the plan's own fields."""
        return position_state(self._header, self._epoch + 1, 0, **fields)


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
        hosts: Shard = ONE_HOST,
    ) -> None:
        self._builder = builder
        self._hosts = hosts
        self._batch_size = (batch_size or 1) * hosts.count  # a global batch
        self._collate = batch_size is not None
        self._last_batch = last_batch if batch_size is not None else "keep"
        self._seed = seed
        self._contexts: dict[int, Context] = {}  # one per epoch (the carry's and this one)
        self._skips = skips or not self._collate
        super().__init__(header, epoch, state)
        self._carry: list[tuple[int, int]] = []  # (epoch, index) carried into this epoch
        if state is None:
            self._cursor: SamplerCursor = sampler.cursor(epoch, 0)
        else:
            self._carry = [(int(e), int(i)) for e, i in state[CARRY]]
            self._cursor = sampler.restore(state[SAMPLER])
            if self._cursor.epoch != self._epoch:
                raise StateError("state is inconsistent: its sampler is at another epoch")
        self._ready: deque[Run] = deque()  # runs of records read ahead, in sampler order
        self._position = self._cursor.position
        self._final: dict[str, Any] | None = None
        # Fills each batch of the filled path (kept on the plan: a timeout while filling
        # loses nothing): the next records that pass, or rows packed from them.
        packer = builder.dataset._packer(self._batch_size)
        self._filler: Filler = packer if packer is not None else Records(self._batch_size)
        # Records read at a time: a batch's worth, or what the packer asks for.
        self._chunk = batch_size if batch_size is not None else 32
        if packer is not None and batch_size is not None:
            self._chunk = packer.chunk
        self._chunks = 0  # records jobs planned
        self._groups: deque[tuple[int, np.ndarray]] = deque()  # the carry, to read first
        self._read_all = False  # the sampler has no more records this epoch

    def _ctx(self, epoch: int) -> Context:
        ctx = self._contexts.get(epoch)
        if ctx is None:
            ctx = self._contexts[epoch] = Context(self._seed, epoch)
        return ctx

    def state(self) -> dict[str, Any]:
        sampler_state = self._cursor.state_dict()  # a fresh dict
        sampler_state["position"] = self._position
        carry = [[e, i] for e, i in self._carry] if self._carry else []
        # Made once a batch: position_state directly, not through _state's keywords.
        return position_state(
            self._header, self._epoch, self._batches, carry=carry, sampler=sampler_state
        )

    def final_state(self) -> dict[str, Any]:
        if self._final is None:
            raise RuntimeError("final_state() before the end of the epoch")
        return self._final

    def final_keep(self) -> object:
        # The cursor writes weights set after the pass (set_weights) into the changes
        # its final state shares, so that the next epoch starts with them.
        return self._cursor

    def _finish(self, leftover: list[tuple[int, int]]) -> None:
        self._done = True
        self._position = 0
        carry = leftover if self._last_batch == "rollover" else []
        self._final = self._next_epoch_state(
            carry=[[e, i] for e, i in carry],
            sampler={**self._cursor.state_dict(), "epoch": self._epoch + 1, "position": 0},
        )

    def _next_parts(self) -> tuple[list[tuple[Context, np.ndarray]], int] | None:
        """The (context, indices) parts of the next fixed batch; None at the end."""
        size = self._batch_size
        carry, self._carry = self._carry[:size], self._carry[size:]
        fresh = self._cursor.take(size - len(carry))
        pairs = carry + [(self._epoch, int(i)) for i in fresh] if carry else None
        count = len(carry) + len(fresh)
        lo, hi = host_slice(count, self._hosts) if self._hosts.count > 1 else (0, count)
        if hi == lo or (count < size and self._last_batch != "keep"):
            leftover = pairs if pairs is not None else [(self._epoch, int(i)) for i in fresh]
            self._finish(leftover)
            return None
        if self._hosts.count > 1:  # this host's slice of the global batch
            count = hi - lo
            if pairs is None:
                fresh = fresh[lo:hi]
            else:
                pairs = pairs[lo:hi]
        if pairs is None:
            return [(self._ctx(self._epoch), fresh)], count
        parts = [
            (self._ctx(e), np.array([i for _, i in grp], dtype=np.int64))
            for e, grp in itertools.groupby(pairs, key=lambda p: p[0])
        ]
        return parts, count

    @property
    def job_per_batch(self) -> bool:
        """True when every batch is a job of its own (no filter, no skipping)."""
        return not self._skips

    def next_job(self, token: int) -> Job | None:
        """The next batch as a job for a worker (or, when batches are filled past a
        filter, the next chunk of records to read); None at the end of the epoch."""
        if self._skips:
            return self._next_chunk(token)
        got = self._next_parts()
        if got is None:
            return None
        parts, count = got
        where = self._where()
        self._position = self._cursor.position
        seq = self._batches
        self._batches += 1
        return Job(seq, "build", tuple(parts), where, self.state(), count, token)

    def _next_chunk(self, token: int) -> Job | None:
        """A job reading the next chunk of records (the carried ones first)."""
        if self._carry:
            carry, self._carry = self._carry, []
            for e, grp in itertools.groupby(carry, key=lambda p: p[0]):
                self._groups.append((e, np.array([i for _, i in grp], dtype=np.int64)))
        if self._groups:
            epoch, idx = self._groups.popleft()
            where = self._where()
        else:
            if self._done or self._read_all:
                return None
            epoch, idx = self._epoch, self._cursor.take(self._chunk)
            if len(idx) == 0:
                self._read_all = True
                return None
            # Chunks are read ahead: the batch filling now, or a later one, takes them.
            where = (
                f"chunk {self._chunks + 1} of records read ahead, for batch {self._batches} "
                f"or a later one of epoch {self._epoch}"
            )
        self._chunks += 1
        return Job(self._chunks, "records", ((self._ctx(epoch), idx),), where, token=token)

    def take(self, job: Job, done: Done) -> None:
        """Keep a chunk's records (``SKIP`` for removed ones) for the batches they fill."""
        ((ctx, idx),) = job.parts
        self._ready.append(Run(done.value, ctx.epoch, idx.tolist()))

    def ready(self, ended: bool) -> Item | None:
        """The next filled batch, once the chunks read so far fill it (``ended``: no
        more chunks come; the last, short one); None when it needs more records, or
        at the end of the epoch."""
        if self._done:
            return None
        filler = self._filler
        while not filler.full:
            if not self._ready:
                if not ended:
                    return None  # the next chunk fills it
                break
            run = self._ready[0]
            start = run.start
            try:
                whole = filler.add_from(run)
            finally:  # the records taken count even when one raised
                if run.epoch == self._epoch:
                    self._position += run.start - start
            if not whole:
                break  # a record that does not fit starts the next batch (or it is full)
            self._ready.popleft()
        items, taken = filler.take()
        if not items or (len(items) < self._batch_size and self._last_batch != "keep"):
            self._finish(taken)
            return None
        if not self._collate:
            batch = items[0]
        elif self._builder.collate_fn is None and filler.collated is not None:
            batch = filler.collated  # built as default_collate would: no second stacking
        else:
            batch = self._builder.collate(list(items))
        self._batches += 1
        return batch, self.state(), len(items)
