"""Epoch plans: which records make each batch, and the state after each batch.

A plan is the producer side of an iterator. ``next_item()`` returns the next
``(batch, state, records)``: the batch, the JSON state that resumes right after it,
and how many records it holds; None at the end of the epoch, after which
``final_state()`` is the state that starts the next epoch.

Map-style datasets follow a sampler. Without a filter every batch is a fixed run of
sampler positions; with one, a batch is filled with the next records that pass (with
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
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._batching.builder import BatchBuilder
from .._context import Context
from .._deadline import timeout_error
from .._hosts import ONE_HOST, Shard, host_slice
from .._sampling.base import Sampler, SamplerCursor
from .._state import BATCHES, CARRY, EPOCH, SAMPLER, position_state
from ..errors import LoaderTimeout, StateError
from .fill import Filler, Records, Run
from .jobs import Done, Job, Submits

__all__ = ["ChunkReader", "EpochPlan", "Item", "MapPlan", "ReadAhead"]

Item = tuple[Any, dict[str, Any], int]


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """How a plan that reads through an executor reads ahead: ``depth`` reads in
    flight, in order or as they finish, ``timeout`` seconds for each (None: no
    limit), its jobs named by ``token``, and ``on_done`` told of each result (the
    timings and the records skipped)."""

    depth: int
    ordered: bool
    timeout: float | None
    token: int
    on_done: Callable[[Done], None]


class EpochPlan(Protocol):
    """What the iterator asks of every plan of an epoch (stages 2-4).

    A plan of one job per batch (:attr:`plans_jobs`) feeds a window of jobs through
    :meth:`next_job`; any other plan reads through the executor :meth:`read_with`
    gives it (None: on the asking thread) and hands out (batch, state, records)
    from :meth:`next_item`. :meth:`final_state` starts the next epoch once the last
    batch was handed out; :meth:`in_flight` names the reads it keeps in flight (for
    the watchdog and ``LoaderTimeout``); :meth:`close` drops them.
    """

    @property
    def plans_jobs(self) -> bool: ...

    @property
    def needs_executor(self) -> bool: ...

    def next_job(self, token: int) -> Job | None: ...

    def read_with(self, executor: Submits | None, read: ReadAhead) -> None: ...

    def next_item(self) -> Item | None: ...

    def state(self) -> dict[str, Any]: ...

    def final_state(self) -> dict[str, Any]: ...

    def final_keep(self) -> object: ...

    def in_flight(self) -> list[Job]: ...

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

    # The defaults of an EpochPlan: a plan that fills its batches on the asking thread.

    needs_executor = True

    @property
    def plans_jobs(self) -> bool:
        return False

    def next_job(self, token: int) -> Job | None:
        raise NotImplementedError(f"{type(self).__name__} fills its batches: use next_item()")

    def next_item(self) -> Item | None:
        raise NotImplementedError(f"{type(self).__name__} plans jobs: use next_job()")

    def read_with(self, executor: Submits | None, read: ReadAhead) -> None:
        return None

    def in_flight(self) -> list[Job]:
        return []

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
        self._reader: ChunkReader | None = None

    def _ctx(self, epoch: int) -> Context:
        ctx = self._contexts.get(epoch)
        if ctx is None:
            ctx = self._contexts[epoch] = Context(self._seed, epoch)
        return ctx

    def state(self) -> dict[str, Any]:
        sampler_state = self._cursor.state_dict()  # a fresh dict
        sampler_state["position"] = self._position
        return self._state(carry=[[e, i] for e, i in self._carry], sampler=sampler_state)

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

    def next_item(self) -> Item | None:
        """The next filled batch (read through :meth:`read_with`'s reader); None at the end."""
        if self._done:
            return None
        return self._next_filled()

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
    def plans_jobs(self) -> bool:
        """True when every batch is a job of its own (no filter, no skipping)."""
        return not self._skips

    def next_job(self, token: int) -> Job | None:
        """The next batch as a job for a worker; None at the end of the epoch."""
        got = self._next_parts()
        if got is None:
            return None
        parts, count = got
        where = self._where()
        self._position = self._cursor.position
        seq = self._batches
        self._batches += 1
        return Job(seq, "build", tuple(parts), where, self.state(), count, token)

    def read_with(self, executor: Submits | None, read: ReadAhead) -> None:
        """Read the records of filled batches on ``executor``, ``read.depth`` chunks ahead."""
        if executor is None:
            raise RuntimeError("a map-style plan reads its records through an executor")
        self._reader = ChunkReader(
            executor.submit, read.depth, read.token, read.on_done, read.timeout
        )

    def in_flight(self) -> list[Job]:
        return self._reader.in_flight() if self._reader is not None else []

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    def _fill(self) -> bool:
        """Read the next chunk (or the carried records) into ``_ready``; False at the end
        of the epoch."""
        reader = self._reader
        if reader is None:
            raise RuntimeError("a filled plan reads through read_with()'s reader")
        if self._carry:
            carry, self._carry = self._carry, []
            for e, grp in itertools.groupby(carry, key=lambda p: p[0]):
                idx = np.array([i for _, i in grp], dtype=np.int64)
                recs = reader.now(self._ctx(e), idx, self._where())
                self._ready.append(Run(recs, e, idx.tolist()))
            return True
        got = reader.next(
            lambda: self._cursor.take(self._chunk), self._ctx(self._epoch), self._where()
        )
        if got is None:
            return False
        idx, recs = got
        self._ready.append(Run(recs, self._epoch, idx.tolist()))
        return True

    def _next_filled(self) -> Item | None:
        filler = self._filler
        while not filler.full:
            if not self._ready and not self._fill():
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


class ChunkReader:
    """Reads the record chunks of a filled plan on workers, ``depth`` chunks ahead.

    ``next(take, ctx)`` returns the next chunk's (indices, records) in sampler
    order, planning new chunks with ``take()`` while fewer than ``depth`` are in
    work. Records skipped under ``on_error="skip"`` are counted by ``on_skipped``.
    """

    def __init__(
        self,
        submit: Callable[[Job], Future[Done]],
        depth: int,
        token: int,
        on_done: Callable[[Done], None],
        timeout: float | None,
    ) -> None:
        self._submit = submit
        self._depth = max(1, depth)
        self._token = token
        self._on_done = on_done
        self._timeout = timeout
        self._ahead: deque[tuple[Job, Future[Done]]] = deque()
        self._exhausted = False
        self._seq = 0

    def _job(self, ctx: Context, idx: np.ndarray, where: str) -> tuple[Job, Future[Done]]:
        self._seq += 1
        job = Job(self._seq, "records", ((ctx, idx),), where, token=self._token)
        return job, self._submit(job)

    def in_flight(self) -> list[Job]:
        """The chunks being read."""
        return [job for job, _ in list(self._ahead)]

    def _result(self, future: Future[Done]) -> list[Any]:
        try:
            done = future.result(self._timeout)
        except FutureTimeout:
            raise timeout_error(self._timeout) from None
        self._on_done(done)
        records: list[Any] = done.value
        return records

    def now(self, ctx: Context, idx: np.ndarray, where: str) -> list[Any]:
        """The records at ``idx`` (read on a worker, waited for)."""
        job, future = self._job(ctx, idx, where)
        self._ahead.appendleft((job, future))
        try:
            return self._result(future)
        finally:
            self._ahead.remove((job, future))

    def next(
        self, take: Callable[[], np.ndarray], ctx: Context, where: str = "a batch"
    ) -> tuple[np.ndarray, list[Any]] | None:
        while not self._exhausted and len(self._ahead) < self._depth:
            idx = take()
            if len(idx) == 0:
                self._exhausted = True
                break
            self._ahead.append(self._job(ctx, idx, f"a chunk of records read for {where}"))
        if not self._ahead:
            return None
        job, future = self._ahead[0]
        ((_, idx),) = job.parts
        try:
            records = self._result(future)
        except LoaderTimeout:
            raise  # the chunk stays queued: asking again may get it
        except BaseException:
            self._ahead.popleft()  # those records are lost; the next chunk may follow
            raise
        self._ahead.popleft()
        return idx, records

    def close(self) -> None:
        for _, future in self._ahead:
            future.cancel()
        self._ahead.clear()
