"""Restarting workers is capped: no setting replaces dying workers forever."""

import os
import signal
import time

import numpy as np
import pytest

import stoker as sk

pytestmark = pytest.mark.usefixtures("no_leaks")


def _kill_self_at(bad):
    def fn(x):
        if x == bad:
            os.kill(os.getpid(), signal.SIGKILL)
        return x

    return fn


def test_a_record_that_always_kills_its_worker_stops_after_max_restarts():
    ds = sk.range(0, 20).map(_kill_self_at(5))
    loader = sk.DataLoader(
        ds,
        batch_size=4,
        num_workers=2,
        worker_mode="process",
        restart_workers=True,
        max_restarts=2,
    )
    with loader, pytest.raises(sk.WorkerCrashed, match=r"max_restarts=2") as info:
        list(loader)
    assert info.value.signal == signal.SIGKILL
    assert info.value.batch_index == 1


def test_max_restarts_zero_raises_at_the_first_crash():
    ds = sk.range(0, 8).map(_kill_self_at(1))
    loader = sk.DataLoader(
        ds,
        batch_size=4,
        num_workers=1,
        worker_mode="process",
        restart_workers=True,
        max_restarts=0,
    )
    with loader, pytest.raises(sk.WorkerCrashed, match=r"max_restarts=0"):
        list(loader)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_restarts_is_checked_when_the_loader_is_built(bad):
    with pytest.raises(sk.ConfigError, match="max_restarts"):
        sk.DataLoader(sk.range(0, 4), batch_size=2, max_restarts=bad)


def test_a_worker_killed_while_idle_is_replaced_under_restart_workers():
    from stoker._context import Context
    from stoker._exec.jobs import Job, WorkerSpec
    from stoker._exec.processes import ProcessExecutor

    spec = WorkerSpec(sk.range(100), None, 4, "raise", 0, 2, None, None)
    with ProcessExecutor(spec, restart=True) as ex:
        job = Job(0, "build", ((Context(), np.arange(4)),), "batch 0")
        assert ex.submit(job).result(timeout=60).value.tolist() == [0, 1, 2, 3]
        victim = ex.pids[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while victim in ex.pids and time.monotonic() < deadline:
            time.sleep(0.01)
        assert victim not in ex.pids  # replaced, nothing raised
        assert ex.restarts == 1
        jobs = [
            Job(i, "build", ((Context(), np.arange(4 * i, 4 * i + 4)),), f"batch {i}")
            for i in range(1, 5)
        ]
        got = [ex.submit(j).result(timeout=60).value.tolist() for j in jobs]
    assert got == [list(range(4 * i, 4 * i + 4)) for i in range(1, 5)]
