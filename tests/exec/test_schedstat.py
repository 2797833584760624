"""``CpuWaitClock``: a thread's time waiting for a CPU, read through a file it keeps."""

from __future__ import annotations

import os
import threading

import pytest

from stoker._exec.schedstat import CpuWaitClock, cpu_wait_seconds

PATH = "/proc/thread-self/schedstat"
pytestmark = pytest.mark.skipif(not os.path.exists(PATH), reason="no schedstats here")


def _spin(seconds):
    import time

    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_the_clock_reads_the_thread_that_built_it_as_a_fresh_read_does():
    out = {}

    def on_thread():
        clock = CpuWaitClock()
        try:
            before = cpu_wait_seconds()
            _spin(0.01)
            read = clock.seconds()
            after = cpu_wait_seconds()
            out["ok"] = before <= read <= after
        finally:
            clock.close()

    thread = threading.Thread(target=on_thread)
    thread.start()
    thread.join()
    assert out == {"ok": True}


def test_the_clock_stays_with_its_thread_when_read_from_another():
    clock = CpuWaitClock()  # this thread's
    try:
        mine = clock.seconds()
        got = []
        thread = threading.Thread(target=lambda: got.append(clock.seconds()))
        thread.start()
        thread.join()
        # A read from another thread still reports this thread: between this
        # thread's reads before and after, whatever the other thread waited.
        assert mine <= got[0] <= cpu_wait_seconds()
    finally:
        clock.close()


def test_close_releases_the_file_and_is_idempotent():
    clock = CpuWaitClock()
    fd = clock._fd
    assert fd >= 0
    clock.close()
    clock.close()
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)
    assert clock.seconds() == 0.0
