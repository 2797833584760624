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


def test_tune_allocator_is_checked():
    with pytest.raises(sk.ConfigError, match="tune_allocator must be True or False"):
        sk.DataLoader(sk.range(0, 4), tune_allocator="yes")
