"""Ctrl-C in the training loop: a real SIGINT while ``next()`` waits loses nothing.

The same iterator goes on with the batch it was waiting for (docs/guide.md, "Failures").
Ctrl-C that interrupts a batch being built on the caller's own thread ends the
iterator; its state resumes right after the last batch it yielded.
"""

import json
import os
import signal
import threading

import pytest

import stoker as sk
from exec.gates import held_back

# ctrl_c_raises: SIGINT raises here even when the test run was started with it ignored.
pytestmark = pytest.mark.usefixtures("no_leaks", "ctrl_c_raises")

WAITING = [
    pytest.param({"num_workers": 2, "worker_mode": "thread"}, id="thread-workers"),
    pytest.param({"num_workers": 2, "worker_mode": "process"}, id="process-workers"),
    pytest.param({"num_workers": 2, "worker_mode": "thread", "ordered": False}, id="unordered"),
    pytest.param({"prefetch": 2}, id="prefetch-thread"),
]


def _sigint_soon(delay=0.3):
    timer = threading.Timer(delay, os.kill, args=(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def _interrupted_next(it):
    timer = _sigint_soon()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)
    finally:
        timer.cancel()  # next() returned early: no Ctrl-C outside the raises block
        timer.join()


@pytest.mark.parametrize("kwargs", WAITING)
def test_the_same_iterator_goes_on_after_ctrl_c_while_waiting(kwargs, tmp_path):
    gate = tmp_path / "gate"
    ds = sk.range(0, 24).map(held_back({13, 17}, str(gate)))  # batches 3, 4 wait for the gate
    expected = [b.tolist() for b in sk.DataLoader(ds, batch_size=4)]
    gate.touch()
    with sk.DataLoader(ds, batch_size=4, **kwargs) as loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(3)]
        _interrupted_next(it)  # waits for batch 3
        assert it.state_dict()["batches"] == 3
        _interrupted_next(it)  # and again: still nothing lost
        gate.unlink()
        got += [b.tolist() for b in it]
    key = None if kwargs.get("ordered", True) else sorted
    assert sorted(got, key=key) == sorted(expected, key=key)
    assert len(got) == len(expected)


def test_ctrl_c_inside_a_batch_built_on_the_callers_thread_ends_the_iterator(tmp_path):
    gate = tmp_path / "gate"
    ds = sk.range(0, 24).map(held_back({13}, str(gate)))
    expected = [b.tolist() for b in sk.DataLoader(ds, batch_size=4)]
    gate.touch()
    loader = sk.DataLoader(ds, batch_size=4, prefetch=0)  # no thread: built in next()
    it = iter(loader)
    got = [next(it).tolist() for _ in range(3)]
    _interrupted_next(it)
    with pytest.raises(sk.IteratorFailed, match=r"loader\.iter\(state=it\.state_dict\(\)\)"):
        next(it)
    gate.unlink()
    state = json.loads(json.dumps(it.state_dict()))
    got += [b.tolist() for b in loader.iter(state=state)]
    assert got == expected


def test_a_test_run_started_with_sigint_ignored_still_presses_ctrl_c():
    """CI may start the test command in the background, where SIGINT is inherited as
    ignored (and survives exec): the Ctrl-C tests install their own handler, so one
    of them passes in such a run too."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    test = (
        "tests/loader/test_ctrl_c.py::"
        "test_the_same_iterator_goes_on_after_ctrl_c_while_waiting[thread-workers]"
    )
    pytest_args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test]
    code = (
        "import os, signal, sys\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        f"os.execv(sys.executable, {pytest_args!r})\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout
