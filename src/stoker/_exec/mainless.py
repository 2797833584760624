"""Worker processes start without running the user's main module again.

A process started by ``forkserver`` or ``spawn`` normally re-runs the parent's main
script (as ``__mp_main__``) before its target runs, so that functions pickled by
reference can be found. A script without an ``if __name__ == "__main__":`` guard
(an example pasted into a file) then starts its training loop again in every
worker, which dies trying to start workers of its own. stoker's workers need
nothing from the main module: the pipeline reaches them pickled by cloudpickle,
which ships ``__main__`` functions and classes by value.

The fork server imports this module (it is in the server's preload list, first);
from then on, its children named ``stoker-worker-<i>`` skip the main-module step of
their start-up. Importing it there also gives the server the parent's ``sys.path``,
which Python 3.11's fork server receives but does not apply, so that the modules
preloaded after it (``preload.py``) are found where the parent found them. Every
other process the server starts is left as multiprocessing starts it. ``spawn``
children are fresh interpreters that cannot import anything before that step; a
worker that dies while starting is reported by the executor, naming the missing
guard.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from multiprocessing import spawn
from typing import Any

__all__ = ["WORKER_PREFIX", "adopt_server_path", "install"]

WORKER_PREFIX = "stoker-worker-"
"""The name prefix of stoker's worker processes (``processes.py`` names them)."""

_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


def install() -> None:
    """Make this process's forked children named ``stoker-worker-*`` skip ``__main__``."""
    original: Callable[[Mapping[str, Any]], None] = spawn.prepare
    if getattr(original, "_stoker_mainless", False):
        return

    def prepare(data: Mapping[str, Any]) -> None:
        if str(data.get("name", "")).startswith(WORKER_PREFIX):
            data = {k: v for k, v in data.items() if k not in _MAIN_KEYS}
        original(data)

    prepare._stoker_mainless = True  # type: ignore[attr-defined]
    spawn.prepare = prepare


def adopt_server_path() -> None:
    """In the fork server, while it imports its preload list: use the ``sys.path``
    its parent passed (found in the frame of ``multiprocessing.forkserver.main``)."""
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith("forkserver.py"):
            path = frame.f_locals.get("sys_path")
            if isinstance(path, list) and all(isinstance(p, str) for p in path):
                sys.path[:] = path
            return
        frame = frame.f_back  # type: ignore[assignment]


install()
adopt_server_path()
