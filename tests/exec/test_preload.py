"""The fork server preloads the modules a pipeline names: workers do not import them."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

import stoker as sk
from stoker._exec.preload import imported_inside, modules_named

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
{imports}

loader = sk.DataLoader(sk.range(0, 8).map({where}), batch_size=4,
                       num_workers=2, worker_mode="process")
flags = np.concatenate([np.asarray(b) for b in loader]).tolist()
print("imported-by-worker", sum(flags), "of", len(flags))
loader.close()
"""


def _run_workers(folder: Path, modules: dict[str, str], imports: str, where: str) -> Any:
    """Write ``modules`` into ``folder`` and run a script that imports ``imports`` and
    maps 8 records with ``where`` on 2 process workers (forkserver)."""
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    script = folder / "run.py"
    script.write_text(SCRIPT.format(folder=str(folder), imports=imports, where=where))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env
    )


def test_the_modules_a_pipeline_names_are_found_in_its_pickle():
    pipeline = sk.range(0, 4).map(os.path.basename)
    names = modules_named(cloudpickle.dumps(pipeline))
    assert "posixpath" in names
    assert "stoker._transforms.map" in names


def test_a_pickle_of_something_else_names_nothing_it_does_not_hold():
    assert modules_named(pickle.dumps({"a": [1, 2.5, "x"]})) == []
    assert modules_named(b"not a pickle") == []


def test_workers_find_the_pipeline_module_imported_by_the_fork_server(tmp_path):
    modules = {"pipeline_module": MODULE}
    done = _run_workers(tmp_path, modules, "import pipeline_module", "pipeline_module.where")
    assert done.returncode == 0, done.stderr
    assert "imported-by-worker 0 of 8" in done.stdout, done.stdout + done.stderr


LAZY_MODULE = """
import os
IMPORTED_IN = os.getpid()
"""

LAZY_PIPELINE = """
def where(index):
    import lazy_module  # imported as the function runs, as decoders often do

    return lazy_module.IMPORTED_IN == os.getpid()
"""


def _helper_importing_json():
    import json.decoder

    return json.decoder


class _Reader:
    def read(self):
        from email import message

        return message


def test_the_imports_inside_a_pipelines_functions_are_found():
    from stoker._transforms.map import MapDataset

    def decode(data):
        import csv
        from xml import dom

        def inner():
            import html.parser

            return html.parser

        return csv, dom, inner, _helper_importing_json()

    found = imported_inside([decode, _Reader, MapDataset])
    assert found[:3] == ["csv", "xml.dom", "xml"]  # in the order the function names them
    assert "html.parser" in found  # a nested function's
    assert "json.decoder" in found  # a module-level function it calls
    assert "email.message" in found  # a method of a class the pickle met
    assert not any(name.startswith("stoker") for name in found)  # stoker's nodes: left out


def test_a_librarys_own_lazy_imports_are_left_to_it():
    assert imported_inside([os.popen]) == []  # it imports subprocess as it runs


def test_classes_that_name_each_other_are_read_once():
    class A:
        def run(self):
            import csv

            return csv

    class B:
        pass

    A.partner, B.partner = B, A  # type: ignore[attr-defined]
    assert imported_inside([A, B]) == ["csv"]


def test_a_relative_import_and_objects_without_code_name_no_module():
    namespace: dict[str, object] = {"__name__": "some_package.module"}
    exec("def relative():\n    from . import sibling\n    return sibling\n", namespace)
    assert imported_inside([namespace["relative"]]) == []
    assert imported_inside([len, 3, None]) == []


def test_workers_find_a_module_their_functions_import_preloaded_by_the_fork_server(tmp_path):
    modules = {"lazy_module": LAZY_MODULE, "lazy_pipeline": "import os\n" + LAZY_PIPELINE}
    # The training script imported lazy_module itself: the fork server may too.
    imports = "import lazy_module\nimport lazy_pipeline"
    done = _run_workers(tmp_path, modules, imports, "lazy_pipeline.where")
    assert done.returncode == 0, done.stderr
    assert "imported-by-worker 0 of 8" in done.stdout, done.stdout + done.stderr


# Imports in the training process and in its workers, and refuses the fork server (a
# plain, single process with no parent like the trainer's).
REFUSING_MODULE = """
import multiprocessing, os
if multiprocessing.current_process().name == "MainProcess" and os.getpid() != PARENT:
    raise RuntimeError("refusing_module will not load in this process")
IMPORTED_IN = os.getpid()
"""


def test_a_module_that_fails_in_the_fork_server_is_left_to_the_workers(tmp_path):
    # multiprocessing's own preload loop dies of any error but ImportError, and every
    # worker start after it fails with EOFError; stoker imports the list itself.
    modules = {
        "refusing_module": "PARENT = int(__import__('os').environ['TRAINER_PID'])\n"
        + REFUSING_MODULE,
        "refusing_pipeline": "import os\n"
        + LAZY_PIPELINE.replace("lazy_module", "refusing_module"),
    }
    imports = (
        "import os\nos.environ['TRAINER_PID'] = str(os.getpid())\n"
        "import refusing_module\nimport refusing_pipeline"
    )
    done = _run_workers(tmp_path, modules, imports, "refusing_pipeline.where")
    assert done.returncode == 0, done.stderr
    assert "EOFError" not in done.stderr
    # Each worker imported it itself, as the pipeline ran.
    assert "imported-by-worker 8 of 8" in done.stdout, done.stdout + done.stderr


PLUGIN_PIPELINE = """
import sys

def where(index):
    from PIL import Image  # Pillow imports its format plugins on the first image it opens

    return "PIL.JpegImagePlugin" in sys.modules
"""


def test_pillows_format_plugins_come_with_it(tmp_path):
    pytest.importorskip("PIL")
    imports = "from PIL import Image\nimport plugin_pipeline"  # no image opened here
    done = _run_workers(
        tmp_path, {"plugin_pipeline": PLUGIN_PIPELINE}, imports, "plugin_pipeline.where"
    )
    assert done.returncode == 0, done.stderr
    assert "imported-by-worker 8 of 8" in done.stdout, done.stdout + done.stderr
