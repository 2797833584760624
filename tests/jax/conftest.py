"""The JAX tests run on 8 virtual CPU devices.

JAX reads the device count when its backend starts (the first computation or
``jax.devices()``), so it is set here, when the tests are collected. If something
in this process started JAX before, with fewer devices, the tests that need 8 are
skipped with the reason (run ``pytest tests/jax`` in a fresh process).
"""

from __future__ import annotations

import contextlib

import pytest

DEVICES = 8

try:
    import jax
except ImportError:  # the stoker[jax] extra is not installed
    collect_ignore_glob = ["test_*.py"]
else:
    # Refused once the backend started: the fixture below then skips.
    with contextlib.suppress(RuntimeError):
        jax.config.update("jax_num_cpu_devices", DEVICES)


@pytest.fixture
def devices() -> list:
    """8 CPU devices, in id order."""
    found = jax.devices("cpu")
    if len(found) < DEVICES:
        pytest.skip(
            f"needs {DEVICES} JAX CPU devices, but JAX started with {len(found)} before "
            "tests/jax/conftest.py could ask for more; run the JAX tests in a fresh process"
        )
    return found[:DEVICES]
