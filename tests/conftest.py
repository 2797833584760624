import gc
import os
import signal
import tempfile
import threading
import time

import pytest
from hypothesis import settings

from exec.leaks import Snapshot, warm_up


def pytest_configure(config):
    # Sources that keep decoded copies in the user's cache folder by default
    # (from_parquet's cache_dir="auto") write them under a folder of this run instead.
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="stoker-test-cache-")


settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("ci")


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """Leave what exists when a test module starts out of later garbage collections.

    The leak checks collect garbage before they look (a loader dropped without
    ``close()`` is finalised then), and a full collection walks every object: with
    PyTorch, JAX, Transformers and Lightning imported, over half a million of them,
    about 0.3 s a collection, several times a test. Once garbage is collected, what
    is left at the start of a module (the imported libraries, the collected tests, the
    fixtures of wider scope) is frozen (``gc.freeze``) and skipped from then on; every
    object a test makes is still collected as before. Each module freezes again, so
    that what the modules before it imported, or code that unfroze the heap (the
    benchmark harness unfreezes what it froze), stays out too.
    """
    gc.collect()
    gc.freeze()


def _stoker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stoker-")]


@pytest.fixture
def no_thread_leak():
    """Fails the test if a stoker thread is still alive shortly after it."""
    before = set(_stoker_threads())
    yield
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        left = [t for t in _stoker_threads() if t not in before and t.is_alive()]
        if not left:
            return
        time.sleep(0.01)
    pytest.fail(f"threads left running: {[t.name for t in left]}")


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` during the test, as in a terminal.

    A test run started in the background (``cmd &`` in a script, ``nohup``, some CI
    runners) inherits SIGINT ignored, and Python then installs no handler: a test that
    presses Ctrl-C would wait for an interrupt that never comes. Tests that send
    SIGINT use this fixture; the handler in force before is restored after the test.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def _workers_warm():
    """Start multiprocessing's fork server (and resource tracker) once per session.

    They outlive every loader by design; starting them before the first snapshot
    keeps them (and the descriptors this process holds for them) out of leak checks.
    """
    warm_up()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_failed] = report.failed
    return report


_failed = pytest.StashKey[bool]()


@pytest.fixture
def no_leaks(request, _workers_warm):
    """Fails the test if, within 5 s after it, any process, descriptor, shared-memory
    segment, ``/dev/shm`` entry or stoker thread started during it is still there.

    A test that failed is not checked: what it leaves is a consequence of the failure
    (its traceback holds its objects) and would only repeat it.
    """
    before = Snapshot.take()
    yield before
    if not request.node.stash.get(_failed, False):
        before.assert_clean()
