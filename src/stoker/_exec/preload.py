"""What the fork server imports once, so that each worker it forks need not.

Process workers are forked from multiprocessing's fork server: a clean process,
started once, that imports its preload list and then forks a worker per request.
A module the fork server imported is in every worker from its first instant; any
other module a pipeline needs is imported by each worker as it unpickles the
pipeline (a dataset module that imports PyTorch: a second or more, per worker, per
loader, per restart).

So the first process executor of a training process preloads stoker's worker
modules, the modules its pipeline names (functions and classes pickled by
reference) and the modules its functions import as they run (an ``import`` inside
a decode function, ``from PIL import Image`` say: 25-35 ms a worker, on its first
record, measured on the JPEG benchmark), as long as they are already imported here:
their import ran in this process without error; and with such a module, the modules
it imports itself on first use (:data:`COMPANIONS`: Pillow's format plugins).
``__main__`` is never preloaded (the fork server would run the script). Once the
server runs, its list is fixed: later loaders' workers import what it lacks
themselves.
"""

from __future__ import annotations

import dis
import pickletools
import sys
import sysconfig
import types
from collections.abc import Iterable
from typing import Any

__all__ = ["COMPANIONS", "STOKER_MODULES", "imported_inside", "modules_named", "preload"]

STOKER_MODULES = ("stoker._exec.mainless", "stoker._exec.worker")
"""What every worker runs: preloaded always (``mainless`` first: see its docs)."""

COMPANIONS: dict[str, tuple[str, ...]] = {
    # Pillow imports its common format plugins on the first image it opens
    # (``Image.preinit``): 6-15 ms a worker, JPEG's the most.
    "PIL.Image": (
        "PIL.BmpImagePlugin",
        "PIL.GifImagePlugin",
        "PIL.JpegImagePlugin",
        "PIL.PpmImagePlugin",
        "PIL.PngImagePlugin",
    ),
}
"""Modules that a preloaded module imports itself on first use: preloaded with it,
whether or not the training process imported them yet (the fork server imports each
on its own, and skips one that fails: see :func:`stoker._exec.mainless.import_the_rest`)."""

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


_MAX_CODES = 256
"""Code objects :func:`imported_inside` reads at most (a pipeline's own functions are
a few dozen; the calls it follows could reach a whole library)."""


def imported_inside(functions: Iterable[object]) -> list[str]:
    """The modules that ``import`` statements inside ``functions`` name, in order:
    what they import as they run rather than when their module is imported. Followed
    into nested functions, closures, the module-level functions they call, and the
    methods of classes among ``functions``; only into the user's code (see
    :func:`_users`): a library's lazy imports are its own, and need not run.
    ``from a import b`` names ``a.b`` (a module, if ``b`` is one) and ``a``; relative
    imports are left out.

    Example:
        >>> def helper():
        ...     import json.decoder
        >>> def decode(data):
        ...     from email import message
        ...     return helper()
        >>> decode.__globals__["helper"] = helper
        >>> imported_inside([decode])
        ['email.message', 'email', 'json.decoder']
    """
    found: dict[str, None] = {}
    seen: set[int] = set()
    todo: list[tuple[types.CodeType, dict[str, Any]]] = []

    def add(obj: object) -> None:
        if not _users(obj):
            return
        if isinstance(obj, type):
            if id(obj) in seen:
                return
            seen.add(id(obj))
            for member in list(vars(obj).values()):
                add(getattr(member, "__func__", member))  # classmethod, staticmethod
        elif isinstance(obj, types.FunctionType) and id(obj.__code__) not in seen:
            seen.add(id(obj.__code__))
            todo.append((obj.__code__, obj.__globals__))
            for cell in obj.__closure__ or ():
                try:
                    add(cell.cell_contents)
                except ValueError:  # an empty cell
                    continue

    for obj in functions:
        add(obj)
    read = 0
    while todo and read < _MAX_CODES:
        code, names = todo.pop(0)
        read += 1
        consts: list[Any] = []  # the last two constants loaded: level, fromlist
        for op in dis.get_instructions(code):
            if op.opname == "LOAD_CONST":
                consts = [*consts[-1:], op.argval]
            elif op.opname == "IMPORT_NAME" and len(consts) == 2 and consts[0] == 0:
                fromlist = consts[1] if isinstance(consts[1], tuple) else ()
                for name in [f"{op.argval}.{f}" for f in fromlist if f != "*"]:
                    found[name] = None
                found[op.argval] = None
            elif op.opname == "LOAD_GLOBAL":
                called = names.get(op.argval)
                if isinstance(called, types.FunctionType):  # not into a library's classes
                    add(called)
        for const in code.co_consts:
            if isinstance(const, types.CodeType) and id(const) not in seen:
                seen.add(id(const))
                todo.append((const, names))
    return list(found)


_LIBRARIES = tuple(
    {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
)


def _users(obj: object) -> bool:
    """Whether ``obj`` (a function or class) is the user's code, whose lazy imports
    are read: not from the standard library or an installed package, except
    stoker's own functions (its benchmarks'; not its classes, the dataset nodes)."""
    module = str(getattr(obj, "__module__", None) or "")
    if module == "stoker" or module.startswith("stoker."):
        return not isinstance(obj, type)
    path = str(getattr(sys.modules.get(module), "__file__", None) or "")
    if not path:  # __main__ of a notebook, a module made on the fly
        return True
    return not path.startswith(_LIBRARIES) and "-packages" not in path


def preload(ctx: Any, payload: bytes, functions: Iterable[object] = ()) -> None:
    """Set the fork server's preload list for a pipeline pickled as ``payload``, whose
    pickle met ``functions`` (and classes): the modules they import as they run are
    preloaded too (see :func:`imported_inside`).

    ``ctx`` is the ``forkserver`` multiprocessing context; a server already running
    keeps its list.
    """
    try:
        lazy = imported_inside(functions)
    except Exception:  # an object that cannot be read so: what the pickle names only
        lazy = []
    extra = [
        name
        for name in dict.fromkeys([*modules_named(payload), *lazy])
        if name in sys.modules and name not in ("__main__", "__mp_main__")
    ]
    companions = [name for module in extra for name in COMPANIONS.get(module, ())]
    ctx.set_forkserver_preload([*STOKER_MODULES, *dict.fromkeys([*extra, *companions])])
