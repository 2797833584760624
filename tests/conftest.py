import threading
import time

import pytest
from hypothesis import settings

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("ci")


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
