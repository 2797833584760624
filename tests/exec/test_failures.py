"""Failures in workers are loud and clean (guarantee 4 of DESIGN.md), with real processes.

An exception keeps its type, sample and batch; a worker killed by a signal is named
within a second, or replaced without losing a sample; a stuck worker times out and
the iterator goes on. Every test ends with the leak check (``no_leaks``).
"""

import json
import os
import signal
import threading
import time

import numpy as np
import pytest
from gates import held_back

import stoker as sk
from stoker.testing import assert_resumes_exactly, run_epochs

pytestmark = pytest.mark.usefixtures("no_leaks")

MODES = ["thread", "process"]
DETECTION_SECONDS = 1.0  # a killed worker is named within this long


def _fail_at(bad, exc_type=ValueError):
    def fn(x):
        if x in bad:
            raise exc_type(f"bad record {x}")
        return x

    return fn


def _notes(exc):
    return "\n".join(getattr(exc, "__notes__", []))


def _drain(it, into):
    """Append every batch of ``it`` to ``into`` (as lists) until it ends or raises."""
    for batch in it:
        into.append(batch.tolist())


# -- exceptions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_exception_keeps_its_type_sample_and_batch(mode):
    ds = sk.range(0, 20).map(_fail_at({13}))
    with sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode=mode) as loader:
        it = iter(loader)
        with pytest.raises(ValueError, match="bad record 13") as info:
            for _ in it:
                pass
        exc = info.value
        assert type(exc) is ValueError
        assert exc.sample_index == 13
        assert exc.batch_index == 3
        assert "sample index 13" in _notes(exc)
        assert "batch 3 of epoch 0" in _notes(exc)
        if mode == "process":
            assert "ValueError: bad record 13" in exc.worker_traceback
            assert "in fn" in exc.worker_traceback  # the user's frame, as the worker saw it
            assert exc.worker_traceback in _notes(exc)
        # As with PyTorch, the failed batch is lost and the next one follows.
        assert next(it).tolist() == [16, 17, 18, 19]


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_iterator_resumes_after_its_last_good_batch(mode):
    ds = sk.range(0, 20).map(_fail_at({13}))
    with sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode=mode) as loader:
        it = iter(loader)
        good = []
        with pytest.raises(ValueError, match="bad record 13"):
            _drain(it, good)
        state = json.loads(json.dumps(it.state_dict()))
    assert good == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert state["batches"] == 3
    fixed = sk.DataLoader(sk.range(0, 20), batch_size=4, num_workers=2, worker_mode=mode)
    with fixed:
        assert [b.tolist() for b in fixed.iter(state=state)] == [[12, 13, 14, 15], [16, 17, 18, 19]]


class _NeedsTwoArguments(Exception):
    """Cannot be rebuilt from its pickle (``args`` holds one string)."""

    def __init__(self, record, why):
        super().__init__(f"record {record}: {why}")


class _HoldsALock(Exception):
    """Cannot be pickled at all."""

    def __init__(self, message):
        super().__init__(message)
        self.lock = threading.Lock()


@pytest.mark.parametrize("exc_type", [_NeedsTwoArguments, _HoldsALock])
def test_an_exception_that_cannot_travel_arrives_as_worker_error(exc_type):
    def fn(x):
        if x == 6:
            if exc_type is _HoldsALock:
                raise _HoldsALock("bad record 6")
            raise _NeedsTwoArguments(6, "bad record")
        return x

    ds = sk.range(0, 12).map(fn)
    loader = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="process")
    with loader, pytest.raises(sk.WorkerError) as info:
        list(loader)
    exc = info.value
    assert exc_type.__name__ in str(exc)
    assert "record 6" in str(exc)
    assert exc.sample_index == 6
    assert exc.batch_index == 1
    assert f"{exc_type.__name__}: " in exc.worker_traceback
    assert "sample index 6" in _notes(exc)
    assert "batch 1 of epoch 0" in _notes(exc)


# -- on_error="skip" -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_skip_across_workers_counts_resumes_and_then_raises(mode):
    ds = sk.range(0, 30).map(_fail_at({2, 7, 11}))
    kwargs = {"batch_size": 4, "shuffle": True, "seed": 1, "on_error": "skip", "max_errors": 3}
    expected = run_epochs(sk.DataLoader(ds, **kwargs), 2)
    with (
        sk.DataLoader(ds, **kwargs, num_workers=2, worker_mode=mode) as loader,
        sk.DataLoader(ds, **kwargs, num_workers=3, worker_mode="process") as other,
    ):
        it = iter(loader)
        got = [b.tolist() for b in it]
        assert it.stats().worker_mode == mode
        assert sorted(i for i, _ in it.stats().skipped) == [2, 7, 11]
        assert all("bad record" in summary for _, summary in it.stats().skipped)
        assert got == [b.tolist() for b in expected[: len(got)]]
        assert sorted(x for b in got for x in b) == [x for x in range(30) if x not in (2, 7, 11)]
        assert_resumes_exactly(loader, epochs=2, fresh=other, max_stops=6)
    strict = sk.DataLoader(ds, **kwargs | {"max_errors": 2}, num_workers=2, worker_mode=mode)
    with strict, pytest.raises(ValueError, match="bad record") as info:
        list(strict)
    assert "max_errors=2" in _notes(info.value)


# -- a worker killed -------------------------------------------------------------------------------


def _dies_at(record, pid_file, how):
    """A map function: the worker reading ``record`` for the first time dies.

    ``how="wait"`` writes the worker's pid to ``pid_file`` and waits to be killed;
    ``how="segfault"`` reads address 0. Later reads (``pid_file`` exists) pass.
    """

    def fn(x):
        if x == record and not os.path.exists(pid_file):
            tmp = f"{pid_file}.tmp"
            with open(tmp, "w") as f:
                f.write(str(os.getpid()))
            os.rename(tmp, pid_file)
            if how == "segfault":
                import ctypes
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                ctypes.string_at(0)
            time.sleep(30)
        return x

    return fn


class _Killer:
    """Kills the process whose pid appears in ``pid_file`` with SIGKILL, from a thread."""

    def __init__(self, pid_file):
        self.pid = None
        self.killed_at = None
        self._pid_file = pid_file
        self._thread = threading.Thread(target=self._run, name="test-killer", daemon=True)
        self._thread.start()

    def _run(self):
        deadline = time.monotonic() + 20
        while not os.path.exists(self._pid_file) and time.monotonic() < deadline:
            time.sleep(0.005)
        with open(self._pid_file) as f:
            self.pid = int(f.read())
        self.killed_at = time.monotonic()
        os.kill(self.pid, signal.SIGKILL)

    def join(self):
        self._thread.join(20)


def test_a_worker_killed_mid_epoch_is_named_within_a_second(tmp_path):
    pid_file = str(tmp_path / "pid")
    ds = sk.range(0, 40).map(_dies_at(13, pid_file, "wait"))
    with sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="process") as loader:
        it = iter(loader)
        killer = _Killer(pid_file)
        good = []
        with pytest.raises(sk.WorkerCrashed) as info:
            _drain(it, good)
        noticed = time.monotonic()
        killer.join()
        assert noticed - killer.killed_at < DETECTION_SECONDS
        exc = info.value
        assert exc.pid == killer.pid
        assert exc.signal == signal.SIGKILL
        assert "SIGKILL" in str(exc)
        assert str(killer.pid) in str(exc)
        assert exc.batch_index == 3
        assert good == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
        with pytest.raises(sk.IteratorFailed):
            next(it)
        # The loader starts new workers; the state resumes where the last batch ended.
        rest = [b.tolist() for b in loader.iter(state=it.state_dict())]
    assert [x for b in good + rest for x in b] == list(range(40))


@pytest.mark.parametrize("ordered", [True, False])
def test_restart_workers_completes_the_epoch_exactly(tmp_path, ordered):
    pid_file = str(tmp_path / "pid")
    ds = sk.range(0, 40).map(_dies_at(13, pid_file, "wait"))
    kwargs = {"batch_size": 4, "shuffle": True, "seed": 2}
    expected = [b.tolist() for b in sk.DataLoader(sk.range(0, 40), **kwargs)]
    loader = sk.DataLoader(
        ds, **kwargs, num_workers=2, worker_mode="process", restart_workers=True, ordered=ordered
    )
    with loader:
        killer = _Killer(pid_file)
        got = [b.tolist() for b in loader]
        killer.join()
        assert killer.pid is not None
        again = [b.tolist() for b in loader]  # the next epoch runs on the replacement
    if ordered:
        assert got == expected
    else:
        assert sorted(got) == sorted(expected)
    assert len(again) == len(expected)


def test_a_segfault_in_a_worker_is_named(tmp_path):
    pid_file = str(tmp_path / "pid")
    ds = sk.range(0, 20).map(_dies_at(5, pid_file, "segfault"))
    loader = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="process")
    with loader, pytest.raises(sk.WorkerCrashed) as info:
        list(loader)
    exc = info.value
    with open(pid_file) as f:
        assert exc.pid == int(f.read())
    assert exc.signal == signal.SIGSEGV
    assert "SIGSEGV" in str(exc)
    assert exc.batch_index == 1


# -- timeout ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("pipeline", ["plain", "filter", "skip"])
@pytest.mark.parametrize("mode", MODES)
def test_timeout_raises_and_the_iterator_goes_on(mode, pipeline, tmp_path):
    gate = tmp_path / "gate"
    ds = sk.range(0, 24).map(held_back({13}, str(gate)))
    kwargs = {"batch_size": 4}
    if pipeline == "filter":
        ds = ds.filter(lambda x: x % 5 != 0)
    if pipeline == "skip":
        kwargs["on_error"] = "skip"
    expected = [b.tolist() for b in sk.DataLoader(ds, **kwargs)]
    gate.touch()
    got, waits = [], []
    with sk.DataLoader(ds, **kwargs, num_workers=2, worker_mode=mode, timeout=0.3) as loader:
        it = iter(loader)
        while len(waits) < 3:
            start = time.monotonic()
            try:
                got.append(next(it).tolist())
            except StopIteration:
                break
            except sk.LoaderTimeout:
                waits.append(time.monotonic() - start)
                gate.unlink()  # record 13 goes on now
    assert len(waits) == 1, "exactly one next() waited for record 13"
    assert 0.25 < waits[0] < 3
    assert got == expected


# -- worker_init_fn --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_an_exception_in_worker_init_fn_surfaces(mode):
    def init(info):
        raise RuntimeError(f"no GPU for worker {info.id}")

    ds = sk.range(0, 20)
    loader = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode=mode, worker_init_fn=init)
    with loader, pytest.raises(RuntimeError, match="no GPU for worker") as info:
        list(loader)
    exc = info.value
    assert not isinstance(exc, sk.WorkerCrashed)
    assert "worker_init_fn" in _notes(exc)  # says where it came from
    if mode == "process":
        assert "in init" in exc.worker_traceback
    # A loader without the failing init works (nothing was left broken).
    with sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode=mode) as loader:
        assert np.concatenate(list(loader)).tolist() == list(range(20))
