"""Anonymous shared-memory segments: created here, attached from another process."""

import gc
import multiprocessing
import os
import threading

import numpy as np
import pytest

from stoker._shm import (
    PREFIX,
    Segment,
    SegmentHandle,
    attach,
    is_sharing,
    receive_with_segment,
    send_with_segment,
    sharing_available,
    sharing_for_workers,
)

pytestmark = pytest.mark.skipif(not sharing_available(), reason="needs memfd and /proc")

TIMEOUT = 30


def memfds(purpose: str = "") -> list[str]:
    """This process's open segment descriptors (as /proc names them)."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, now closed
            continue
        if target.startswith(f"/memfd:{PREFIX}{purpose}"):
            names.append(target)
    return names


def _child(handle: SegmentHandle, conn) -> None:
    """Attach, report what the owner wrote, write back, then read the owner's reply."""
    segment = attach(handle)
    conn.send(bytes(segment.array[:4]))
    segment.array[4:7] = [9, 8, 7]
    conn.send("written")
    conn.recv()
    conn.send(bytes(segment.array[8:10]))
    segment.close()
    conn.close()


def test_a_child_process_attaches_and_writes_are_seen_both_ways():
    segment = Segment(4096, "test-attach")
    segment.array[:4] = [1, 2, 3, 4]
    ctx = multiprocessing.get_context("forkserver")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(segment.handle, child), daemon=True)
    proc.start()
    child.close()
    try:
        assert parent.poll(TIMEOUT)
        assert parent.recv() == b"\x01\x02\x03\x04"
        assert parent.recv() == "written"
        assert segment.array[4:7].tolist() == [9, 8, 7]
        segment.array[8:10] = [42, 43]
        parent.send("go")
        assert parent.poll(TIMEOUT)
        assert parent.recv() == b"\x2a\x2b"
    finally:
        proc.join(TIMEOUT)
        parent.close()
        segment.close()
    assert proc.exitcode == 0
    proc.close()


def test_a_segment_shows_under_its_purpose_and_close_releases_it():
    before = len(memfds())
    segment = Segment(100, "test-name")
    assert set(memfds("test-name")) == {f"/memfd:{PREFIX}test-name (deleted)"}
    assert segment.size == 100
    assert len(segment.array) == 100
    assert segment.array.dtype == np.uint8
    assert repr(segment) == "Segment('test-name', size=100)"
    assert not segment.closed
    segment.close()
    assert segment.closed
    del segment
    gc.collect()
    assert len(memfds()) == before


def _sends_a_segment_and_exits(conn) -> None:
    segment = Segment(4096, "test-pass")
    segment.array[:3] = [7, 8, 9]
    send_with_segment(conn, b"the batch", segment)
    segment.close()
    conn.close()


@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_a_passed_segment_outlives_its_sender(start_method):
    ctx = multiprocessing.get_context(start_method)
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_sends_a_segment_and_exits, args=(child,), daemon=True)
    proc.start()
    child.close()
    proc.join(TIMEOUT)  # it closed its segment and exited before anything was received
    assert proc.exitcode == 0
    proc.close()
    before = len(memfds())
    try:
        data, segment = receive_with_segment(parent)
        assert data == b"the batch"
        assert segment is not None
        assert segment.array[:3].tolist() == [7, 8, 9]
        segment.close()
        del segment
        gc.collect()
        assert len(memfds()) == before  # the passed descriptor went with the mapping
    finally:
        parent.close()


def test_a_message_without_a_segment_arrives_alone():
    a, b = multiprocessing.Pipe()
    with a, b:
        send_with_segment(a, b"plain")
        assert receive_with_segment(b) == (b"plain", None)
        a.close()
        with pytest.raises(EOFError):
            receive_with_segment(b)


def test_close_is_idempotent_and_ends_sharing():
    segment = Segment(64, "test-close")
    handle = segment.handle
    segment.close()
    segment.close()
    with pytest.raises(RuntimeError, match="closed"):
        segment.handle  # noqa: B018
    with pytest.raises(FileNotFoundError):
        attach(handle)


def test_views_survive_close():
    segment = Segment(64, "test-views")
    view = segment.array[8:16].view(np.int64)
    view[0] = 123456789
    segment.close()
    del segment
    gc.collect()
    assert view[0] == 123456789
    view[0] = -1
    assert view.tolist() == [-1]


def test_an_attached_segment_cannot_be_shared_on_and_closes_cleanly():
    before = len(memfds())
    segment = Segment(32, "test-attached")
    attached = attach(segment.handle)
    attached.array[0] = 7
    assert segment.array[0] == 7
    with pytest.raises(RuntimeError, match="created"):
        attached.handle  # noqa: B018
    attached.close()
    attached.close()
    segment.close()
    del segment, attached
    gc.collect()
    assert len(memfds()) == before


@pytest.mark.parametrize("size", [0, -1])
def test_a_segment_needs_at_least_one_byte(size):
    before = len(memfds())
    with pytest.raises(ValueError, match="at least one byte"):
        Segment(size, "test-bad")
    assert len(memfds()) == before


def test_sharing_is_on_only_inside_the_context_and_only_in_its_thread():
    assert not is_sharing()
    seen = []
    with sharing_for_workers():
        assert is_sharing()
        with sharing_for_workers():
            assert is_sharing()
        assert is_sharing()
        thread = threading.Thread(target=lambda: seen.append(is_sharing()))
        thread.start()
        thread.join()
    assert not is_sharing()
    assert seen == [False]


def _resident_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssShmem:"))


def test_populate_allocates_a_range_of_pages_and_keeps_their_bytes():
    seg = Segment(64 * 4096, "populate")
    before = _resident_kib()
    seg.array[:10] = 7
    seg.populate(4096 + 100, 40 * 4096)  # from inside a page: its page is allocated too
    seg.populate(0, 0)  # nothing
    seg.populate(60 * 4096, 10**9)  # past the end: up to the end
    assert bytes(seg.array[:10]) == b"\x07" * 10
    assert not seg.array[10:].any()
    grown = _resident_kib() - before
    seg.close()
    seg.populate(0, 4096)  # closed: nothing to do
    assert grown >= 4 * (1 + 39 + 4) or grown == 4  # all of it, or a kernel before 5.14
