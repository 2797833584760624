"""The job queue of the thread and process executors drops jobs cancelled while queued."""

from __future__ import annotations

import threading

import numpy as np

import stoker as sk
from stoker._batching.pool import BufferPool
from stoker._context import Context
from stoker._exec.executor import cancel_future
from stoker._exec.jobs import Job, WorkerSpec
from stoker._exec.threads import ThreadExecutor

RELEASE = threading.Event()


def _held(x: int) -> int:
    RELEASE.wait(10)
    return x


def _job(seq: int, *indices: int) -> Job:
    return Job(seq, "build", ((Context(), np.array(indices)),), f"batch {seq}")


def test_a_job_cancelled_while_queued_is_dropped_and_the_next_one_runs():
    RELEASE.clear()
    spec = WorkerSpec(sk.range(10).map(_held), None, 2, "raise", 0, 1, None, None)
    with ThreadExecutor(spec, BufferPool(2, 4)) as ex:
        running = ex.submit(_job(0, 1, 2))  # the only worker holds this one
        queued = ex.submit(_job(1, 3, 4))
        cancel_future(queued)  # as a closing window does: cancelled and waiters woken
        RELEASE.set()
        assert running.result(10).value.tolist() == [1, 2]
        assert queued.cancelled()
        assert ex.submit(_job(2, 5, 6)).result(10).value.tolist() == [5, 6]
