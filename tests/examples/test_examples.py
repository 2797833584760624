"""Every script in ``examples/`` runs as a reader runs it: ``python examples/NAME.py``.

Each runs in a fresh interpreter, from a temporary working directory, and must exit 0
and print what its docstring promises.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# script -> (modules it needs, a line its output must contain)
EXPECTED = {
    "image_classification.py": (("torch", "PIL"), "accuracy on the training images"),
    "jax_multihost.py": (("jax",), "global batches of 8: all checked"),
    "resume_after_crash.py": ((), "identical to the uninterrupted run"),
    "token_packing.py": ((), "resume checked after every batch"),
}


def test_every_example_is_run_here():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(tmp_path, name):
    needs, promise = EXPECTED[name]
    for module in needs:
        pytest.importorskip(module)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    assert promise in result.stdout, result.stdout[-2000:]
