"""The fork server preloads the modules a pipeline names: workers do not import them."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import cloudpickle

import stoker as sk
from stoker._exec.preload import modules_named

ROOT = Path(__file__).resolve().parents[2]

MODULE = """
import os
IMPORTED_IN = os.getpid()

def where(index):
    return IMPORTED_IN == os.getpid()  # True: this process imported the module itself
"""

SCRIPT = """
import sys
sys.path.insert(0, {folder!r})
import numpy as np
import stoker as sk
import pipeline_module

loader = sk.DataLoader(sk.range(0, 8).map(pipeline_module.where), batch_size=4,
                       num_workers=2, worker_mode="process")
flags = np.concatenate([np.asarray(b) for b in loader]).tolist()
print("imported-by-worker", sum(flags), "of", len(flags))
loader.close()
"""


def test_the_modules_a_pipeline_names_are_found_in_its_pickle():
    pipeline = sk.range(0, 4).map(os.path.basename)
    names = modules_named(cloudpickle.dumps(pipeline))
    assert "posixpath" in names
    assert "stoker._transforms.map" in names


def test_a_pickle_of_something_else_names_nothing_it_does_not_hold():
    assert modules_named(pickle.dumps({"a": [1, 2.5, "x"]})) == []
    assert modules_named(b"not a pickle") == []


def test_workers_find_the_pipeline_module_imported_by_the_fork_server(tmp_path):
    (tmp_path / "pipeline_module.py").write_text(MODULE)
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT.format(folder=str(tmp_path))))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert "imported-by-worker 0 of 8" in done.stdout, done.stdout + done.stderr
