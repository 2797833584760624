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
preloaded after it (``preload.py``) are found where the parent found them; it then
imports those modules itself, each in a ``try`` of its own (see
:func:`import_the_rest`). Every other process the server starts is left as
multiprocessing starts it. ``spawn``
children are fresh interpreters that cannot import anything before that step; a
worker that dies while starting is reported by the executor, naming the missing
guard.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Mapping
from multiprocessing import spawn
from typing import Any

__all__ = ["WORKER_PREFIX", "adopt_server_path", "import_the_rest", "install"]

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


def _server_main() -> Mapping[str, Any] | None:
    """The locals of ``multiprocessing.forkserver.main`` when this runs inside it (the
    fork server importing its preload list), else None."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith("forkserver.py"):
            return frame.f_locals
        frame = frame.f_back
    return None


def adopt_server_path(server: Mapping[str, Any]) -> None:
    """In the fork server, while it imports its preload list: use the ``sys.path``
    its parent passed."""
    path = server.get("sys_path")
    if isinstance(path, list) and all(isinstance(p, str) for p in path):
        sys.path[:] = path


def import_the_rest(server: Mapping[str, Any]) -> None:
    """Import the rest of the fork server's preload list here, each module on its
    own, and leave the server's loop nothing to import.

    The server's loop lets any error but ``ImportError`` through, and the server dies
    of it: every worker start then fails with ``EOFError``. A module that imported
    fine in the training process can still fail in the server (one that checks which
    process imports it, or needs what the script set up). Such a module is left out
    here; a worker that needs it imports it as its pipeline runs, and an error there
    names the record.
    """
    preload = server.get("preload")
    if not isinstance(preload, list) or __name__ not in preload:
        return
    after = preload.index(__name__) + 1
    rest = preload[after:]
    del preload[after:]  # the server's loop is at this module: it ends here
    for name in rest:
        if not isinstance(name, str):
            continue
        with contextlib.suppress(BaseException):  # left to the workers (see above)
            __import__(name)


install()
_server = _server_main()
if _server is not None:
    adopt_server_path(_server)
    import_the_rest(_server)
del _server
