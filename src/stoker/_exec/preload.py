"""What the fork server imports once, so that each worker it forks need not.

Process workers are forked from multiprocessing's fork server: a clean process,
started once, that imports its preload list and then forks a worker per request.
A module the fork server imported is in every worker from its first instant; any
other module a pipeline needs is imported by each worker as it unpickles the
pipeline (a dataset module that imports PyTorch: a second or more, per worker, per
loader, per restart).

So the first process executor of a training process preloads stoker's worker
modules and the modules its pipeline names (functions and classes pickled by
reference), as long as they are already imported here: their import ran in this
process without error. ``__main__`` is never preloaded (the fork server would run
the script). Once the server runs, its list is fixed: later loaders' workers import
what it lacks themselves.
"""

from __future__ import annotations

import pickletools
import sys
from typing import Any

__all__ = ["STOKER_MODULES", "modules_named", "preload"]

STOKER_MODULES = ("stoker._exec.mainless", "stoker._exec.worker")
"""What every worker runs: preloaded always (``mainless`` first: see its docs)."""

_STRINGS = frozenset(
    {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "SHORT_BINSTRING", "BINSTRING"}
)
_GETS = frozenset({"GET", "BINGET", "LONG_BINGET"})
_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def modules_named(payload: bytes) -> list[str]:
    """The modules whose functions or classes ``payload`` (a pickle) names, in order.

    Example:
        >>> import pickle, json
        >>> modules_named(pickle.dumps([json.dumps, json.JSONDecoder]))
        ['json', 'json.decoder']
    """
    found: dict[str, None] = {}
    memo: dict[Any, Any] = {}
    recent: list[Any] = []  # strings pushed (None: something else), most recent last
    try:
        for opcode, arg, _ in pickletools.genops(payload):
            name = opcode.name
            if name in _STRINGS:
                recent.append(arg)
            elif name in _GETS:
                recent.append(memo.get(arg))
            elif name == "MEMOIZE":
                memo[len(memo)] = recent[-1] if recent else None
            elif name in _PUTS:
                memo[arg] = recent[-1] if recent else None
            elif name == "STACK_GLOBAL" and len(recent) >= 2:
                module = recent[-2]
                if isinstance(module, str):
                    found[module] = None
                recent.append(None)  # the object it pushes
            elif name == "GLOBAL" and isinstance(arg, str):
                found[arg.split(" ", 1)[0]] = None
                recent.append(None)
            elif name not in ("FRAME", "PROTO"):
                recent.append(None)  # whatever else it pushes is not a name
            del recent[:-2]  # only the last two are ever read
    except ValueError:  # not a pickle stoker wrote: preload nothing extra
        return []
    return list(found)


def preload(ctx: Any, payload: bytes) -> None:
    """Set the fork server's preload list for a pipeline pickled as ``payload``.

    ``ctx`` is the ``forkserver`` multiprocessing context; a server already running
    keeps its list.
    """
    extra = [
        name
        for name in modules_named(payload)
        if name in sys.modules and name not in ("__main__", "__mp_main__")
    ]
    ctx.set_forkserver_preload([*STOKER_MODULES, *extra])
