"""Robustness: user code cannot end the training process, and nothing accumulates.

``sys.exit()`` in a map function on a worker or prefetch thread surfaces as an error
instead of ending the process; descriptors return to their baseline after a worker
restart and over many short passes with process workers.
"""

import gc
import os
import signal
import sys
import time

import psutil
import pytest
from leaks import open_descriptors

import stoker as sk

pytestmark = pytest.mark.usefixtures("no_leaks")


def _exits_at(bad):
    def fn(x):
        if x == bad:
            sys.exit(3)
        return x

    return fn


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_workers": 2, "worker_mode": "thread"},
        {"num_workers": 0, "prefetch": 2},  # the prefetch thread
    ],
    ids=["thread-worker", "prefetch-thread"],
)
def test_sys_exit_in_a_map_on_a_thread_is_an_error(kwargs):
    loader = sk.DataLoader(sk.range(0, 20).map(_exits_at(9)), batch_size=4, **kwargs)
    with loader:
        it = iter(loader)
        with pytest.raises(sk.WorkerError, match=r"sys\.exit\(\)") as info:
            list(it)
        it.close()
        assert isinstance(info.value.__cause__, SystemExit)
        assert info.value.__cause__.code == 3
        # This process goes on, and so does the loader.
        assert next(iter(loader)).tolist() == [0, 1, 2, 3]


def test_sys_exit_in_a_process_worker_is_a_crash_not_an_exit():
    loader = sk.DataLoader(
        sk.range(0, 20).map(_exits_at(9)), batch_size=4, num_workers=2, worker_mode="process"
    )
    with loader, pytest.raises(sk.WorkerCrashed, match="exited with code 3"):
        list(loader)


def _fd_count():
    gc.collect()
    return len(open_descriptors())


def _kill_once(flag):
    def fn(x):
        if x == 5 and os.path.exists(flag):
            os.remove(flag)
            os.kill(os.getpid(), signal.SIGKILL)
        return x

    return fn


def test_descriptors_return_to_the_baseline_after_worker_restarts(tmp_path):
    flag = str(tmp_path / "armed")
    loader = sk.DataLoader(
        sk.range(0, 32).map(_kill_once(flag)),
        batch_size=4,
        num_workers=2,
        worker_mode="process",
        restart_workers=True,
    )
    with loader:
        # Warm up: one restart, and a pass whose 8 batches are all held at once, so
        # that the slot ring has grown to its cap (prefetch + 4 slots).
        open(flag, "w").close()
        assert len(list(loader)) == 8
        held = list(loader)
        del held
        baseline = _fd_count()
        for _ in range(3):
            open(flag, "w").close()
            assert len(list(loader)) == 8
            assert not os.path.exists(flag)  # a worker died and was replaced
            assert _fd_count() == baseline


@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_descriptors_return_to_the_baseline_over_200_short_passes(start_method):
    ds = sk.range(0, 64).map(lambda x: x)

    def loader():
        return sk.DataLoader(
            ds, batch_size=4, num_workers=2, worker_mode="process", start_method=start_method
        )

    with loader() as first:
        list(first)
    baseline = _fd_count()
    with loader() as shared:
        for _ in range(100):  # one loader, many short passes: its workers persist
            batch = next(iter(shared))
    del batch  # a batch held keeps its slot (and descriptor) alive, by design
    for _ in range(100):  # a fresh loader per pass
        with loader() as fresh:
            next(iter(fresh))
    assert _fd_count() == baseline


def _dead(pid):
    """True once ``pid`` has exited (a zombie has closed its descriptors already)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _keyed_by_a_worker_killer(parent):
    """A map from ``x`` to ``{"x": x}``, where record 0's key, unpickled in the main
    process, SIGKILLs the worker that made it and waits until that worker is dead."""

    def rebuild(text, worker):
        if worker is not None and os.getpid() == parent:
            os.kill(worker, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while not _dead(worker) and time.monotonic() < deadline:
                time.sleep(0.01)
        return Key(text)

    class Key(str):
        worker = None

        def __reduce__(self):
            return rebuild, (str(self), self.worker)

    def fn(x):
        key = Key("x")
        if x == 0:
            key.worker = os.getpid()
        return {key: x}

    return fn


@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_a_batch_outlives_the_worker_that_sent_it(start_method):
    # The main process reads batch 0's message only once the worker that built it is
    # dead: the batch travelled in a segment of the worker's own (the slot size is not
    # known yet), and it must arrive all the same: its descriptor has to come with the
    # message, not be looked up later in the worker's descriptor table, where it is
    # gone once the worker dies or, as happened, moves on to its next job.
    loader = sk.DataLoader(
        sk.range(0, 8).map(_keyed_by_a_worker_killer(os.getpid())),
        batch_size=4,
        num_workers=1,
        worker_mode="process",
        start_method=start_method,
        restart_workers=True,
    )
    with loader:
        it = iter(loader)
        assert [b["x"].tolist() for b in it] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        assert it.stats().restarts == 1  # the worker did die under it
        it.close()
