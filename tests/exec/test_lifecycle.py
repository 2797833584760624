"""Nothing outlives its owner (guarantee 4 of DESIGN.md): workers end on every exit path.

Leaving a loop early, deleting an iterator, ``loader.close()``, ``with loader:``,
Ctrl-C, the loader being collected, and the parent process killed outright: within
5 s every worker thread and process is gone and every segment freed. Persistent
workers serve every epoch of their loader. Every test ends with the leak check.
"""

import gc
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import psutil
import pytest
from gates import held_back
from leaks import GRACE_SECONDS, children, dev_shm_entries, stoker_threads

import stoker as sk

pytestmark = pytest.mark.usefixtures("no_leaks")

MODES = ["thread", "process"]


def _workers():
    """The worker processes and stoker threads alive now."""
    return set(children()), set(stoker_threads())


def _wait_for(expected, what):
    """Wait up to the grace period until no process or thread beyond ``expected`` runs.

    Only what was started since counts: a process of an earlier test that was still
    exiting when ``expected`` was taken may be gone by now.
    """
    deadline = time.monotonic() + GRACE_SECONDS
    while True:
        now = _workers()
        procs, threads = now[0] - expected[0], now[1] - expected[1]
        if not procs and not threads:
            return
        if time.monotonic() > deadline:
            names = sorted(t.name for t in threads)
            raise AssertionError(f"{what}: still running: processes {procs}, threads {names}")
        gc.collect()
        time.sleep(0.02)


def _loader(mode, n=400, **kwargs):
    return sk.DataLoader(
        sk.range(0, n).map(lambda x: x), batch_size=4, num_workers=2, worker_mode=mode, **kwargs
    )


# -- leaving early ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_breaking_out_of_a_loop_ends_a_private_executor(mode):
    loader = _loader(mode)
    with loader:
        holder = iter(loader)  # holds the loader's shared workers
        next(holder)
        before = _workers()
        for k, _ in enumerate(loader):  # a second iterator: workers of its own
            if k == 0:
                assert _workers() != before, "the second iterator started no workers"
            if k == 2:
                break
        _wait_for(before, "after leaving the loop")
        assert next(holder).tolist() == [4, 5, 6, 7]
        holder.close()


@pytest.mark.parametrize("mode", MODES)
def test_deleting_a_half_used_iterator_ends_a_private_executor(mode):
    loader = _loader(mode)
    with loader:
        holder = iter(loader)
        next(holder)
        before = _workers()
        it = iter(loader)
        next(it)
        assert _workers() != before, "the second iterator started no workers"
        del it
        gc.collect()
        _wait_for(before, "after deleting the iterator")
        assert next(holder).tolist() == [4, 5, 6, 7]  # the loader's own workers still serve
        holder.close()


@pytest.mark.parametrize("mode", MODES)
def test_deleting_a_half_used_iterator_and_its_loader_ends_the_workers(mode):
    before = _workers()
    loader = _loader(mode)
    it = iter(loader)
    next(it)
    assert _workers() != before
    del it, loader
    gc.collect()
    _wait_for(before, "after deleting the iterator and the loader")


@pytest.mark.parametrize("mode", MODES)
def test_breaking_out_of_a_loop_then_dropping_the_loader_ends_the_workers(mode):
    before = _workers()
    loader = _loader(mode)
    for k, _ in enumerate(loader):
        if k == 2:
            break
    del loader
    gc.collect()
    _wait_for(before, "after dropping the loader")


def _read_on(it, limit=100):
    """Call ``next(it)`` until it raises (batches finished before close() may still come)."""
    for _ in range(limit):
        next(it)


@pytest.mark.parametrize("mode", MODES)
def test_close_ends_the_workers_and_fails_readers(mode):
    before = _workers()
    loader = _loader(mode)
    it = iter(loader)
    next(it)
    time.sleep(0.2)  # let the batches in flight finish: they are done, not yet taken
    loader.close()
    _wait_for(before, "after loader.close()")
    try:
        with pytest.raises(sk.IteratorFailed):
            _read_on(it)
    finally:
        it.close()  # its own cleanup is the business of the tests above
    loader.close()  # idempotent


@pytest.mark.parametrize("mode", MODES)
def test_with_block_ends_the_workers(mode):
    before = _workers()
    with _loader(mode) as loader:
        it = iter(loader)
        next(it)
        assert _workers() != before
    _wait_for(before, "after the with block")
    it.close()  # its own cleanup is the business of the tests above


# -- persistent workers ----------------------------------------------------------------------------


@pytest.mark.parametrize("end", ["close", "collect"])
@pytest.mark.parametrize("mode", MODES)
def test_workers_persist_across_epochs_until_the_loader_ends(mode, end):
    def who(x):
        return np.array([x, os.getpid(), threading.get_ident()], dtype=np.int64)

    before = _workers()
    loader = sk.DataLoader(sk.range(0, 40).map(who), batch_size=4, num_workers=2, worker_mode=mode)
    seen, started = [], []
    for _ in range(3):
        it = iter(loader)
        seen.append(np.concatenate(list(it)))
        started.append(_workers())
        assert it.stats().worker_mode == mode
    del it
    assert started[0] != before
    assert started[0] == started[1] == started[2], "new workers in a later epoch"
    procs, threads = started[0][0] - before[0], started[0][1] - before[1]
    for rows in seen:
        assert rows[:, 0].tolist() == list(range(40))
        if mode == "process":
            assert set(rows[:, 1].tolist()) <= procs
        else:
            assert set(rows[:, 2].tolist()) <= {t.ident for t in threads}
    if end == "close":
        loader.close()
    else:
        del loader
        gc.collect()
    _wait_for(before, f"after the loader's {end}")


# -- Ctrl-C ----------------------------------------------------------------------------------------


def _ctrl_c(worker_pids):
    """Ctrl-C as a terminal sends it: to this process (its main thread) and its workers."""
    for pid in worker_pids:
        os.kill(pid, signal.SIGINT)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


@pytest.mark.usefixtures("ctrl_c_raises")  # also when the run was started with SIGINT ignored
@pytest.mark.parametrize("mode", MODES)
def test_ctrl_c_while_waiting_keeps_the_iterator_and_its_workers(mode, tmp_path):
    gate = tmp_path / "gate"
    ds = sk.range(0, 40).map(held_back({13}, str(gate)))  # batch 3 waits for the gate
    expected = [b.tolist() for b in sk.DataLoader(ds, batch_size=4)]
    gate.touch()
    before = _workers()
    loader = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode=mode)
    it = iter(loader)
    got = [next(it).tolist() for _ in range(3)]
    workers = _workers()
    timer = threading.Timer(0.3, _ctrl_c, args=(sorted(workers[0] - before[0]),))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(it)  # waits for batch 3
    finally:
        timer.cancel()  # next() returned early: no Ctrl-C outside the raises block
        timer.join()
    state = json.loads(json.dumps(it.state_dict()))
    assert state["batches"] == 3
    gate.unlink()
    got += [b.tolist() for b in it]  # the same iterator goes on with batch 3
    assert got == expected
    assert [b.tolist() for b in loader.iter(state=state)] == expected[3:]
    assert _workers()[0] == workers[0], "Ctrl-C ended (or replaced) worker processes"
    loader.close()
    _wait_for(before, "after loader.close()")


# -- the parent killed -----------------------------------------------------------------------------

_PARENT_SCRIPT = """
import json
import time
from multiprocessing import forkserver, resource_tracker

import numpy as np
import psutil

import stoker as sk


def main():
    ds = sk.from_arrays(x=np.arange(4000, dtype=np.float64).reshape(1000, 4))
    loader = sk.DataLoader(
        ds.map(lambda r: {"x": r["x"] * 2}), batch_size=8, num_workers=2, worker_mode="process"
    )
    it = iter(loader)
    held = [next(it) for _ in range(12)]  # batches in shared memory, in use
    services = {
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    }
    mine = [p.pid for p in psutil.Process().children(recursive=True)]
    workers = [pid for pid in mine if pid not in services]
    print(json.dumps({"workers": workers, "others": [p for p in mine if p in services]}))
    print(len(held), flush=True)
    time.sleep(120)


if __name__ == "__main__":
    main()
"""


def _gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_parent_killed_with_sigkill_leaves_no_worker_behind(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(_PARENT_SCRIPT))
    shm_before = dev_shm_entries()
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "the script did not start its workers within 60 s"
        pids = json.loads(proc.stdout.readline())
        assert proc.stdout.readline().strip() == "12"
        assert len(pids["workers"]) == 2
        assert all(not _gone(pid) for pid in pids["workers"])
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    deadline = time.monotonic() + GRACE_SECONDS
    while not all(_gone(pid) for pid in pids["workers"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in pids["workers"] if not _gone(pid)]
    # The fork server and resource tracker of the dead parent end on their own too;
    # end any that lingers (they are this test's).
    while not all(_gone(pid) for pid in pids["others"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids["others"] + left:
        if not _gone(pid):
            psutil.Process(pid).kill()
    assert not left, f"workers still running {GRACE_SECONDS} s after their parent was killed"
    assert dev_shm_entries() == shm_before


_FORKING_SCRIPT = """
import os
import sys

import stoker as sk


def main():
    loader = sk.DataLoader(sk.range(1000), batch_size=10, num_workers=2, worker_mode="process")
    it = iter(loader)
    next(it)
    if os.fork() == 0:
        sys.exit(0)  # the child's exit must leave the parent's workers alone
    os.wait()
    print(sum(len(b) for b in it))
    loader.close()


if __name__ == "__main__":
    main()
"""


def test_a_forked_child_leaves_the_parents_workers_alone(tmp_path):
    script = tmp_path / "forking.py"
    script.write_text(_FORKING_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "990"
    assert "Error" not in done.stderr
