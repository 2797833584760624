"""``num_workers="auto"`` on threads: the thread count follows what the workers wait on.

Thread counts are asserted (``it.stats().num_workers`` and the threads alive), never
speed. Batches and states are compared with fixed settings: who builds a batch
never changes it.
"""

import gc
import hashlib
import logging
import threading
import time

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches

BLOCK = bytes(range(256)) * 4096  # 1 MiB


@sk.releases_gil
def _waits(x):
    time.sleep(0.002)  # simulated I/O: the GIL is released, no CPU is used
    return x


@sk.releases_gil
def _waits_briefly(x):
    time.sleep(0.0005)
    return x


@sk.releases_gil
def _digests(x):
    # About 2 ms of CPU with the GIL released (hashlib lets go of it for large inputs).
    return np.frombuffer(hashlib.sha256(BLOCK + bytes([x % 256])).digest(), np.uint8)


def _scheduler_says_cpu_waits():
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return len(f.read().split()) >= 2
    except OSError:
        return False


def _worker_threads():
    return sum(t.name.startswith("stoker-worker-") for t in threading.enumerate())


def _counts(it):
    """The thread count before the first batch and after every batch."""
    seen = [it.stats().num_workers]
    for _ in it:
        seen.append(it.stats().num_workers)
    return seen


def test_threads_grow_while_they_wait_on_io(caplog, no_leaks):
    ds = sk.range(0, 8 * 150).map(_waits)
    with (
        caplog.at_level(logging.INFO, logger="stoker"),
        sk.DataLoader(ds, batch_size=8, num_workers="auto", prefetch="auto") as loader,
    ):
        it = iter(loader)
        seen = _counts(it)
        assert max(seen) > 2 * seen[0], seen
        # resize() starts new threads from a thread of its own: they come up shortly.
        deadline = time.monotonic() + 10
        while _worker_threads() < it.stats().num_workers and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _worker_threads() >= it.stats().num_workers
        assert "thread workers" in it.stats().prefetch
    assert any("waited on I/O" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(not _scheduler_says_cpu_waits(), reason="no scheduler statistics")
def test_threads_do_not_grow_on_cpu_bound_work(no_leaks):
    ds = sk.range(0, 8 * 40).map(_digests)
    with sk.DataLoader(ds, batch_size=8, num_workers="auto", prefetch="auto") as loader:
        for _ in range(2):
            it = iter(loader)
            seen = _counts(it)
            assert max(seen) <= seen[0], seen


def test_worker_mode_thread_with_auto_workers_grows_too(no_leaks):
    ds = sk.range(0, 8 * 100).map(_waits)
    with sk.DataLoader(ds, batch_size=8, num_workers="auto", worker_mode="thread") as loader:
        it = iter(loader)
        seen = _counts(it)
        assert max(seen) > seen[0], seen
        assert it.stats().worker_mode == "thread"


@pytest.mark.parametrize("mode", ["auto", "thread"])
def test_grown_threads_give_the_batches_of_a_fixed_setting(mode, no_leaks):
    kw = {"batch_size": 8, "shuffle": True, "seed": 5, "last_batch": "rollover"}
    ds = sk.range(0, 8 * 60 + 3).map(_waits_briefly)
    with (
        sk.DataLoader(ds, num_workers="auto", worker_mode=mode, prefetch="auto", **kw) as auto,
        sk.DataLoader(ds, num_workers=0, **kw) as fixed,
    ):
        assert_same_batches(auto, fixed, epochs=2)


def test_grown_threads_resume_exactly(no_leaks):
    ds = sk.range(0, 8 * 30).map(_waits_briefly)
    with sk.DataLoader(ds, batch_size=8, shuffle=True, seed=2, num_workers="auto") as loader:
        assert_resumes_exactly(loader, epochs=2, max_stops=4)


def test_grown_threads_end_on_break_close_and_collection(no_leaks):
    ds = sk.range(0, 8 * 400).map(_waits)
    loader = sk.DataLoader(ds, batch_size=8, num_workers="auto")
    for k, _ in enumerate(loader):
        if k == 40:
            break
    grown = _worker_threads()
    assert grown > 4
    it = iter(loader)  # the loader's threads serve the next pass
    next(it)
    del it
    loader.close()
    assert _worker_threads() == 0
    collected = sk.DataLoader(ds, batch_size=8, num_workers="auto")
    for k, _ in enumerate(collected):
        if k == 40:
            break
    del collected
    gc.collect()  # no_leaks waits for the threads of a collected loader to end
