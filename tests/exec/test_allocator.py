"""The host process is changed only when asked: glibc's malloc thresholds.

Thread workers run in the training process, which is the user's: its allocator is
tuned only under ``DataLoader(tune_allocator=True)``. Whether it was is read from
glibc itself: by default a 40 MiB ``malloc`` is served by ``mmap`` (counted in
``mallinfo2().hblkhd``); with the raised threshold it comes from the heap. Each case
runs in a fresh interpreter, whose allocator no other test has touched.
"""

import ctypes
import subprocess
import sys

import pytest

import stoker as sk

_SCRIPT = """
import ctypes, sys
import stoker as sk


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    ).split()]


libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p


def big_blocks_are_mapped(size=40 << 20):
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)
    mapped = libc.mallinfo2().hblkhd - before >= size
    libc.free(ctypes.c_void_p(block))
    return mapped


if __name__ == "__main__":
    assert big_blocks_are_mapped()  # glibc's default
    loader = sk.DataLoader(
        sk.range(0, 64), batch_size=8, num_workers=2, worker_mode=sys.argv[1],
        tune_allocator=sys.argv[2] == "tune",
    )
    with loader:
        assert sum(len(b) for b in loader) == 64
    print("mapped" if big_blocks_are_mapped() else "kept")
"""


def _glibc_with_mallinfo2():
    try:
        return hasattr(ctypes.CDLL(None), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
@pytest.mark.parametrize(
    ("mode", "option", "expected"),
    [
        ("thread", "default", "mapped"),
        ("auto", "default", "mapped"),
        ("thread", "tune", "kept"),
    ],
)
def test_the_main_process_allocator_is_tuned_only_when_asked(tmp_path, mode, option, expected):
    script = tmp_path / "allocator.py"
    script.write_text(_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), mode, option],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


_CHURN = """
import sys
import numpy as np
import stoker as sk


@sk.releases_gil
def decode_like(i):
    # A decoder's scratch buffer bigger than glibc's largest dynamic mmap threshold
    # (32 MiB): by default it is mapped and unmapped again for every record.
    scratch = np.ones(34 << 20, dtype=np.uint8)
    return scratch[: 3 * 64 * 64 * 4].view(np.float32).reshape(3, 64, 64) + np.float32(i)


def run(tune):
    loader = sk.DataLoader(
        sk.range(0, 48).map(decode_like), batch_size=4, num_workers=2,
        worker_mode="thread", tune_allocator=tune,
    )
    with loader, loader.iter() as it:
        for _ in it:
            pass
        stats = it.stats()
    advice = " ".join(stats.verdict.advice)
    print(stats.page_faults // stats.batches, stats.allocator_tuned, "tune_allocator" in advice)


run(False)
run(True)
"""


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="needs glibc >= 2.33 (mallinfo2)")
def test_threads_that_churn_memory_are_counted_and_told_the_option(tmp_path):
    """A decode-like pipeline on thread workers in an untuned process takes back the
    memory it frees as fresh pages: the stats count the faults and the verdict names
    ``tune_allocator=True``; once it is set, the advice goes (how many faults are left
    then depends on where glibc puts a block this big)."""
    script = tmp_path / "churn.py"
    script.write_text(_CHURN)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    (faults, tuned, named), (_, tuned_after, named_after) = (
        line.split() for line in done.stdout.split("\n") if line
    )
    assert (tuned, named) == ("False", "True"), done.stdout
    assert int(faults) >= 256  # a MiB of fresh pages a batch, or more
    assert (tuned_after, named_after) == ("True", "False"), done.stdout


def test_tune_allocator_is_checked():
    with pytest.raises(sk.ConfigError, match="tune_allocator must be True or False"):
        sk.DataLoader(sk.range(0, 4), tune_allocator="yes")
