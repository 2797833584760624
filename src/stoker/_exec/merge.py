"""One batch from sub-batches built apart, exactly as one build would give it.

Under ``worker_mode="auto"`` the first batch of a pass is split across the thread
workers (see :class:`~stoker._exec.handover.HandoverExecutor`); the parts are joined
here, or found not joinable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._stats import SourceReads
from .jobs import Done

__all__ = ["CannotMerge", "concat_batches", "joined_done"]


class CannotMerge(Exception):
    """Sub-batches whose concatenation might differ from the whole batch."""


def concat_batches(parts: list[Any]) -> Any:
    """One batch from consecutive sub-batches, exactly as one build would give it.

    Example:
        >>> concat_batches([np.array([1, 2]), np.array([3])]).tolist()
        [1, 2, 3]
        >>> sorted(concat_batches([{"a": np.zeros(1)}, {"a": np.ones(2)}])["a"].tolist())
        [0.0, 1.0, 1.0]

    Raises:
        CannotMerge: when the parts are not arrays of one dtype and row shape (in
            matching dicts or tuples): collating them at once might differ.
    """
    first = parts[0]
    if isinstance(first, np.ndarray):
        for p in parts:
            if not isinstance(p, np.ndarray) or p.dtype != first.dtype:
                raise CannotMerge
            if p.ndim == 0 or p.shape[1:] != first.shape[1:] or p.dtype == object:
                raise CannotMerge
        return np.concatenate(parts)
    if type(first) is dict:
        keys = list(first)
        if any(type(p) is not dict or list(p) != keys for p in parts):
            raise CannotMerge
        return {k: concat_batches([p[k] for p in parts]) for k in keys}
    if type(first) is tuple:
        if any(type(p) is not tuple or len(p) != len(first) for p in parts):
            raise CannotMerge
        return tuple(concat_batches([p[i] for p in parts]) for i in range(len(first)))
    raise CannotMerge


def joined_done(value: Any, parts: list[Done]) -> Done:
    """The :class:`Done` of a batch ``value`` joined from ``parts``: their times summed.

    Example:
        >>> joined_done(None, [Done(1, 0.5, 0.1), Done(2, 0.25, 0.1)]).fetch_seconds
        0.75
    """
    done = Done(value, sum(d.fetch_seconds for d in parts), sum(d.collate_seconds for d in parts))
    done.transform_seconds = sum(d.transform_seconds for d in parts)
    done.reads = sum((d.reads for d in parts), SourceReads())
    done.work_seconds = sum(d.work_seconds for d in parts)
    done.cpu_seconds = sum(d.cpu_seconds for d in parts)
    done.cpu_wait_seconds = sum(d.cpu_wait_seconds for d in parts)
    return done
