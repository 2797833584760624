"""Restarting workers is capped: no setting replaces dying workers forever."""

import os
import signal

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
