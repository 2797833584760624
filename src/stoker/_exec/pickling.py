"""Pickling the pipeline for process workers, with an error that names what failed.

An open connection, file, socket or lock inside a user's dataset cannot be pickled,
and cloudpickle says only ``cannot pickle 'sqlite3.Connection' object``. When the
pipeline fails to pickle, :func:`dumps_for_workers` walks it (attributes, container
items, closure cells; a few levels deep) to the value that fails and raises
:class:`NotPicklable` naming it, e.g. ``MyDataset._conn``, and how to open it in each
worker instead.
"""

from __future__ import annotations

import pickle
import types
from typing import Any

import cloudpickle

from ..errors import NotPicklable

__all__ = ["NotPicklable", "dumps_for_workers", "find_unpicklable"]

_DEPTH = 8


def _picklable(value: Any) -> bool:
    try:
        cloudpickle.dumps(value)
    except Exception:
        return False
    return True


def _children(value: Any) -> list[tuple[str, Any]]:
    """``(label, child)`` pairs, labels as they read after the owner (``.x``, ``[0]``)."""
    if isinstance(value, dict):
        return [(f"[{k!r}]", v) for k, v in value.items()]
    if isinstance(value, list | tuple | set | frozenset):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, types.FunctionType):
        cells = value.__closure__ or ()
        names = value.__code__.co_freevars
        found = []
        for name, cell in zip(names, cells, strict=True):
            try:
                found.append((f".<closure {name}>", cell.cell_contents))
            except ValueError:  # an empty cell
                continue
        return found
    if isinstance(value, type | types.ModuleType):
        return []
    try:
        state = value.__getstate__()  # honours a class's own choice of what to pickle
    except Exception:
        state = getattr(value, "__dict__", None)
    if isinstance(state, tuple) and len(state) == 2:  # (dict, slots)
        merged = {**(state[0] or {}), **(state[1] or {})}
        state = merged
    if isinstance(state, dict):
        return [(f".{k}", v) for k, v in state.items()]
    return []


def find_unpicklable(value: Any, depth: int = _DEPTH) -> tuple[str, Any] | None:
    """The innermost part of ``value`` that fails to pickle: ``(where, part)``, where
    ``where`` starts at the class that holds it (``MyDataset._conn``); None if
    ``value`` pickles.

    Example:
        >>> import threading
        >>> class Holder:
        ...     def __init__(self):
        ...         self.items = [1, threading.Lock()]
        >>> where, part = find_unpicklable({"h": Holder()})
        >>> where
        'Holder.items[1]'
    """
    if _picklable(value):
        return None
    owner, path, current = type(value).__qualname__, "", value
    for _ in range(depth):
        for label, child in _children(current):
            if not _picklable(child):
                if label.startswith("."):
                    owner, path = type(current).__qualname__, label
                else:
                    path += label
                current = child
                break
        else:
            break
    return f"{owner}{path}", current


def dumps_for_workers(value: Any) -> bytes:
    """``cloudpickle.dumps(value)``, or :class:`NotPicklable` naming the part that fails.

    Example:
        >>> import threading
        >>> class Data:
        ...     def __init__(self):
        ...         self._lock = threading.Lock()
        >>> dumps_for_workers(Data())
        Traceback (most recent call last):
        ...
        stoker.errors.NotPicklable: Data._lock: _thread.lock cannot be sent ...

    Errors:
        NotPicklable: naming the attribute and how to open it in each worker.
    """
    try:
        data: bytes = cloudpickle.dumps(value)
        return data
    except (TypeError, pickle.PicklingError, AttributeError) as exc:
        found = find_unpicklable(value)
        if found is None:
            raise
        where, part = found
        kind = type(part)
        module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
        raise NotPicklable(
            f"{where}: {module}{kind.__qualname__} cannot be sent to process workers "
            f"({exc}). Open it in each worker instead: lazily, on first use in "
            "__getitem__ (keep None until then and leave it out in __getstate__), or in "
            'worker_init_fn; or use worker_mode="thread"; for SQLite, sk.from_sqlite '
            "opens a connection per worker for you"
        ) from exc
