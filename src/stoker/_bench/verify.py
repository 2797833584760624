"""The untimed verification pass: every runner's batches against the workload's reference.

An ordered runner must yield the reference's batches in the reference's order. A
runner with ``ordered=False`` may yield them in any order, but every batch must still
be one of the reference's batches, each exactly once: the two are compared as
multisets of batch digests.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .base import Prepared, Runner

__all__ = ["Check", "digest", "fingerprint", "to_numpy", "verify_runner", "worker_mode"]

FINGERPRINT_POINTS = 8
_END = object()


@dataclass(frozen=True)
class Check:
    """The outcome of comparing one runner with the reference.

    ``batches`` counts the batches compared, ``exact`` how many of them element by
    element (the rest by :func:`fingerprint`; an unordered runner's batches are all
    compared exactly, by :func:`digest`). ``detail`` names the first difference.
    ``worker_mode`` is what a stoker iterator's ``stats()`` reported (None for others).
    """

    loader: str
    batches: int
    exact: int
    ok: bool
    detail: str = ""
    ordered: bool = True
    worker_mode: str | None = None


def to_numpy(batch: Any) -> np.ndarray:
    """A batch as a NumPy array: arrays as they are, torch tensors through ``.numpy()``."""
    if isinstance(batch, np.ndarray):
        return batch
    numpy = getattr(batch, "numpy", None)
    if callable(numpy):
        return np.asarray(numpy())
    return np.asarray(batch)


def fingerprint(batch: np.ndarray) -> np.ndarray:
    """A few fixed elements of every record: cheap, and catches wrong or reordered records."""
    flat = batch.reshape(len(batch), -1)
    width = flat.shape[1]
    cols = np.unique(np.linspace(0, width - 1, num=min(FINGERPRINT_POINTS, width)).astype(np.intp))
    return flat[:, cols]


def digest(batch: np.ndarray) -> str:
    """A hash of a batch's shape, dtype and every element: equal digests, equal batches.

    Example:
        >>> digest(np.arange(4)) == digest(np.arange(4).copy())
        True
        >>> digest(np.arange(4)) == digest(np.arange(4)[::-1])
        False
    """
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{batch.dtype.str}{batch.shape}".encode())
    h.update(np.ascontiguousarray(batch).data)
    return h.hexdigest()


def worker_mode(iterator: object) -> str | None:
    """The worker mode a stoker iterator reports in ``stats()``; None for other iterators."""
    stats = getattr(iterator, "stats", None)
    if not callable(stats):
        return None
    mode = getattr(stats(), "worker_mode", None)
    return None if mode is None else str(mode)


def _difference(expected: np.ndarray, got: np.ndarray, exact: bool) -> str:
    if got.shape != expected.shape:
        return f"shape {got.shape}, expected {expected.shape}"
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype}, expected {expected.dtype}"
    if exact:
        if not np.array_equal(got, expected):
            return f"{int(np.count_nonzero(got != expected))} elements differ"
    elif not np.array_equal(fingerprint(got), fingerprint(expected)):
        return "fingerprint differs"
    return ""


def _first(reference: Iterable[np.ndarray], samples: int | None) -> Iterator[np.ndarray]:
    """The reference's batches up to ``samples`` records (all of them for None)."""
    seen = 0
    for batch in reference:
        if samples is not None and seen >= samples:
            return
        seen += len(batch)
        yield batch


def _in_order(
    prepared: Prepared, label: str, batches: Iterator[Any], samples: int | None = None
) -> Check:
    limit = prepared.exact_batches
    compared = exact = 0
    reference = _first(prepared.reference(), samples)
    while True:
        expected = next(reference, None)
        batch = next(batches, _END)
        if expected is None and batch is _END:
            break
        if expected is None:
            return Check(label, compared, exact, False, f"more than {compared} batches")
        if batch is _END:
            return Check(label, compared, exact, False, f"only {compared} batches, expected more")
        is_exact = limit is None or compared < limit
        difference = _difference(expected, to_numpy(batch), is_exact)
        if difference:
            return Check(label, compared, exact, False, f"batch {compared}: {difference}")
        compared += 1
        exact += is_exact
    return Check(label, compared, exact, True)


def _as_multiset(prepared: Prepared, label: str, batches: Iterable[Any]) -> Check:
    expected = Counter(digest(batch) for batch in prepared.reference())
    got = Counter(digest(to_numpy(batch)) for batch in batches)
    compared = sum(got.values())
    missing, extra = expected - got, got - expected
    if not missing and not extra:
        return Check(label, compared, compared, True, ordered=False)
    detail = (
        f"as a multiset: {sum(extra.values())} of {compared} batches are not in the "
        f"reference, {sum(missing.values())} of its {sum(expected.values())} are missing"
    )
    return Check(label, compared, 0, False, detail, ordered=False)


def verify_runner(prepared: Prepared, runner: Runner) -> Check:
    """Read one epoch of ``runner`` and compare its batches with the reference.

    In order for an ordered runner (the first ``exact_batches`` element by element, the
    rest by fingerprint), as a multiset of exact digests for an unordered one. A runner
    that reads only part of the epoch (``runner.samples``) is compared with that part.
    """
    batches = iter(runner.make())
    if runner.reference is not None:  # this row's own configuration
        prepared = replace(prepared, reference=runner.reference)
    if runner.ordered:
        check = _in_order(prepared, runner.label, batches, runner.samples)
    else:
        check = _as_multiset(prepared, runner.label, batches)
    return replace(check, worker_mode=worker_mode(batches))
