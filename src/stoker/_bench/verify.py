"""The untimed verification pass: every runner's batches against the workload's reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import Prepared, Runner

__all__ = ["Check", "fingerprint", "to_numpy", "verify_runner"]

FINGERPRINT_POINTS = 8
_END = object()


@dataclass(frozen=True)
class Check:
    """The outcome of comparing one runner with the reference.

    ``batches`` counts the batches compared, ``exact`` how many of them element by
    element (the rest by :func:`fingerprint`). ``detail`` names the first difference.
    """

    loader: str
    batches: int
    exact: int
    ok: bool
    detail: str = ""


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


def verify_runner(prepared: Prepared, runner: Runner) -> Check:
    """Read one epoch of ``runner`` and compare each batch with the reference, in order."""
    limit = prepared.exact_batches
    compared = exact = 0
    reference = iter(prepared.reference())
    batches = iter(runner.make())
    while True:
        expected = next(reference, None)
        batch = next(batches, _END)
        if expected is None and batch is _END:
            break
        if expected is None:
            return Check(runner.label, compared, exact, False, f"more than {compared} batches")
        if batch is _END:
            detail = f"only {compared} batches, expected more"
            return Check(runner.label, compared, exact, False, detail)
        is_exact = limit is None or compared < limit
        difference = _difference(expected, to_numpy(batch), is_exact)
        if difference:
            return Check(runner.label, compared, exact, False, f"batch {compared}: {difference}")
        compared += 1
        exact += is_exact
    return Check(runner.label, compared, exact, True)
