"""``releases_gil``: the mark that lets ``worker_mode="auto"`` choose threads.

Threads run a pipeline in parallel only where its work releases the GIL: NumPy
copies, file and socket reads, image decoders, ``time.sleep``. ``auto`` picks thread
workers when every stage of the pipeline is known to do so, and processes otherwise:

* stoker's own sources and index stages are known (``range``, ``from_arrays``,
  ``from_sequence``, ``shuffle``, ``shard``, ``concat``, ``zip``, ``mix``), and so is
  every source that says so with a true ``_releases_gil`` (the table sources, whose
  reads run in Arrow, SQLite or NumPy with the GIL released);
* a ``map``/``filter`` function or a ``from_iterable`` factory is known when it is
  marked with :func:`releases_gil`; a custom ``collate_fn`` likewise, and stoker's own
  ``default_collate`` and ``pad_collate`` (or a ``functools.partial`` of them) are;
* anything else (a user's own ``Dataset`` subclass, a PyTorch dataset) is not.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["pipeline_releases_gil", "releases_gil"]

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__stoker_releases_gil__"

# Stages whose own work is index arithmetic or NumPy copies; they are as free as
# their parents.
_INDEX_STAGES = frozenset(
    {
        "RangeDataset",
        "ArrayDataset",
        "InMemoryDataset",
        "ShuffleDataset",
        "ShardDataset",
        "ConcatDataset",
        "ZipDataset",
        "MixDataset",
    }
)
# Stages that run a user function, held in the named attribute.
_FUNCTION_STAGES = {
    "MapDataset": "_fn",
    "FilterDataset": "_pred",
    "MappedStream": "_fn",
    "FilteredStream": "_pred",
    "FromIterable": "_factory",
}


def releases_gil(fn: F) -> F:
    """Mark ``fn`` as spending its time with the GIL released (I/O, decoding, NumPy).

    With ``worker_mode="auto"`` a pipeline whose functions are all marked runs on
    thread workers, which start in microseconds and share memory; otherwise it runs
    on process workers. The mark changes nothing else.

    Example:
        >>> import stoker as sk
        >>> @sk.releases_gil
        ... def read(path):
        ...     with open(path, "rb") as f:
        ...         return f.read()
        >>> sk.releases_gil(len) is not len  # builtins are wrapped, not changed
        True
    """
    try:
        setattr(fn, _MARK, True)
        return fn
    except (AttributeError, TypeError):
        pass

    @functools.wraps(fn)
    def marked(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    setattr(marked, _MARK, True)
    return marked  # type: ignore[return-value]


def is_marked(fn: object) -> bool:
    """True when ``fn`` (or the function a ``functools.partial`` wraps) was marked
    with :func:`releases_gil`."""
    while isinstance(fn, functools.partial):
        if getattr(fn, _MARK, False):
            return True
        fn = fn.func
    return bool(getattr(fn, _MARK, False))


def _numpy_collate(fn: object) -> bool:
    """True for stoker's own collate functions (NumPy work), or a partial of one."""
    from .._batching.collate import default_collate
    from .._batching.pad import pad_collate

    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn is default_collate or fn is pad_collate


def pipeline_releases_gil(node: object, collate_fn: object = None) -> bool:
    """True when every stage under ``node`` (and ``collate_fn``) is known to release the GIL.

    Example:
        >>> import stoker as sk
        >>> pipeline_releases_gil(sk.range(10).shuffle(0))
        True
        >>> pipeline_releases_gil(sk.range(10).map(lambda x: x + 1))
        False
    """
    if collate_fn is not None and not (is_marked(collate_fn) or _numpy_collate(collate_fn)):
        return False
    name = type(node).__name__
    if name in _FUNCTION_STAGES:
        if not is_marked(getattr(node, _FUNCTION_STAGES[name], None)):
            return False
    elif name not in _INDEX_STAGES and not getattr(node, "_releases_gil", False):
        return False
    parents: list[object] = []
    if hasattr(node, "_parent"):
        parents.append(node._parent)
    parents.extend(getattr(node, "_parts", ()))
    return all(pipeline_releases_gil(parent) for parent in parents)
