"""``ThreadExecutor.resize``: threads come and go while jobs run; no job is lost or
changed, every thread sent away ends and is joined, ``close`` joins all of them."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from leaks import GRACE_SECONDS, stoker_threads

import stoker as sk
from stoker._batching.pool import BufferPool
from stoker._context import Context
from stoker._exec.jobs import Job, WorkerSpec
from stoker._exec.threads import ThreadExecutor

pytestmark = pytest.mark.usefixtures("no_leaks")


@sk.releases_gil
def _slow(x):
    time.sleep(0.002)
    return x


def _worker_id(x):
    info = sk.get_worker_info()
    assert info.id < info.num_workers
    return np.array([x, info.id])


def _executor(dataset, threads):
    spec = WorkerSpec(dataset, None, 4, "raise", 0, threads, None, None)
    return ThreadExecutor(spec, BufferPool(4, 8))


def _job(seq):
    indices = np.arange(4 * seq, 4 * seq + 4)
    return Job(seq, "build", ((Context(), indices),), f"batch {seq}")


def _workers_alive(ex):
    return sum(t.name.startswith("stoker-worker-") for t in stoker_threads())


def _wait_until(condition):
    deadline = time.monotonic() + GRACE_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "the threads did not reach the count in time"
        time.sleep(0.01)


def test_threads_grow_and_shrink_while_jobs_run_and_every_batch_comes_out():
    ex = _executor(sk.range(0, 400).map(_slow), threads=2)
    with ex:
        futures = [ex.submit(_job(s)) for s in range(40)]
        ex.resize(12)
        assert ex.workers == 12
        futures += [ex.submit(_job(s)) for s in range(40, 70)]
        ex.resize(1)
        assert ex.workers == 1
        futures += [ex.submit(_job(s)) for s in range(70, 100)]
        for seq, future in enumerate(futures):
            assert future.result(timeout=30).value.tolist() == list(range(4 * seq, 4 * seq + 4))
        # The threads sent away finish their job and end; the next resize joins them.
        _wait_until(lambda: _workers_alive(ex) == 1)
        ex.resize(1)
        assert ex.workers == 1


def test_a_thread_sent_away_hands_its_wake_up_on():
    # Four idle threads, three sent away: each job queued wakes one thread, which may
    # be one leaving; the job must still run.
    ex = _executor(sk.range(0, 40), threads=4)
    with ex:
        ex.resize(1)
        for seq in range(10):
            assert ex.submit(_job(seq)).result(timeout=10).value.tolist()[0] == 4 * seq


def test_new_threads_take_the_ids_that_are_free():
    ex = _executor(sk.range(0, 400).map(_worker_id), threads=1)
    with ex:
        ex.resize(6)
        ids = {int(i) for s in range(30) for i in ex.submit(_job(s)).result(timeout=10).value[:, 1]}
        assert ids <= set(range(6))
        ex.resize(2)
        _wait_until(lambda: _workers_alive(ex) == 2)
        ex.resize(3)  # id 2 again, a new thread
        ids = {int(i) for s in range(30) for i in ex.submit(_job(s)).result(timeout=10).value[:, 1]}
        assert ids <= {0, 1, 2}
        # New threads start from a thread of their own (resize() does not wait for
        # them): the 30 jobs may all be done before it has started thread 2.
        _wait_until(lambda: _workers_alive(ex) == 3)
        assert sorted(t.name for t in stoker_threads() if t.name.startswith("stoker-worker-")) == [
            "stoker-worker-0",
            "stoker-worker-1",
            "stoker-worker-2",
        ]


def test_threads_added_take_no_job_until_every_one_of_them_has_started():
    # Starting a thread waits for it to run; threads already reading records would
    # make each of those waits a wait for the GIL. So the new threads start first.
    seen = []

    def init(info):  # runs on each new thread before its first job
        seen.append(_workers_alive(None))

    spec = WorkerSpec(sk.range(0, 400).map(_slow), None, 4, "raise", 0, 1, init, None)
    ex = ThreadExecutor(spec, BufferPool(4, 8))
    with ex:
        futures = [ex.submit(_job(s)) for s in range(40)]
        ex.resize(16)
        for seq, future in enumerate(futures):
            assert future.result(timeout=30).value.tolist() == list(range(4 * seq, 4 * seq + 4))
    assert len(seen) == 16
    assert seen[1:] == [16] * 15  # every thread added saw all sixteen running


def test_close_ends_threads_that_were_sent_away_and_those_still_working():
    gate = threading.Event()

    @sk.releases_gil
    def held(x):
        gate.wait(10)
        return x

    ex = _executor(sk.range(0, 400).map(held), threads=2)
    ex.resize(8)
    running = [ex.submit(_job(s)) for s in range(8)]
    ex.resize(2)  # six threads sent away, each still on its job
    time.sleep(0.05)
    gate.set()
    ex.close()
    assert _workers_alive(ex) == 0
    assert all(f.done() for f in running)
    ex.resize(4)  # closed: nothing starts
    assert _workers_alive(ex) == 0
