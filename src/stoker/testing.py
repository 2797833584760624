"""Checks that users can run on their own pipelines (and that stoker's tests use).

Example:
    >>> import stoker as sk
    >>> from stoker.testing import assert_resumes_exactly
    >>> loader = sk.DataLoader(sk.range(0, 20).map(lambda x: x * 2), batch_size=3,
    ...                        shuffle=True, seed=1)
    >>> assert_resumes_exactly(loader, epochs=2)
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from ._loader import DataLoader
from ._tree import is_dataclass_instance, is_namedtuple

__all__ = [
    "assert_batches_equal",
    "assert_resumes_exactly",
    "assert_same_batches",
    "assert_same_in_every_mode",
    "assert_same_order",
    "run_epochs",
]


def _copy(batch: Any) -> Any:
    # Batches may live in recycled buffers; keep private copies for comparisons.
    if isinstance(batch, np.ndarray):
        return batch.copy()
    if hasattr(batch, "numpy") and hasattr(batch, "detach"):  # a torch tensor
        return batch.detach().cpu().numpy().copy()
    return copy.deepcopy(batch)


def assert_batches_equal(a: Any, b: Any, where: str = "batch") -> None:
    """Assert that two batches are equal: same structure, dtypes, shapes and values.

    Errors:
        AssertionError: naming the first field that differs.
    """
    a, b = _copy(a), _copy(b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            raise AssertionError(f"{where}: {type(a).__name__} vs {type(b).__name__}")
        if a.dtype != b.dtype or a.shape != b.shape:
            raise AssertionError(f"{where}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}")
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            raise AssertionError(f"{where}: values differ:\n{a}\nvs\n{b}")
        return
    if type(a) is not type(b):
        raise AssertionError(f"{where}: {type(a).__name__} vs {type(b).__name__}")
    if isinstance(a, Mapping):
        if list(a) != list(b):
            raise AssertionError(f"{where}: keys {list(a)} vs {list(b)}")
        for key in a:
            assert_batches_equal(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, tuple | list):
        if len(a) != len(b):
            raise AssertionError(f"{where}: length {len(a)} vs {len(b)}")
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_batches_equal(x, y, f"{where}[{i}]")
        if is_namedtuple(a) and getattr(a, "_fields", ()) != getattr(b, "_fields", ()):
            raise AssertionError(f"{where}: fields differ")
    elif is_dataclass_instance(a):
        for f in dataclasses.fields(a):
            assert_batches_equal(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif a != b:
        raise AssertionError(f"{where}: {a!r} vs {b!r}")


def run_epochs(loader: DataLoader[Any], epochs: int = 1, *, start_epoch: int = 0) -> list[Any]:
    """Copies of every batch of ``epochs`` consecutive epochs, in order."""
    batches: list[Any] = []
    it = loader.iter(epoch=start_epoch)
    for _ in range(epochs):
        batches.extend(_copy(b) for b in it)
        it = loader.iter(state=it.state_dict())
    it.close()
    return batches


def assert_same_batches(
    loader_a: DataLoader[Any], loader_b: DataLoader[Any], *, epochs: int = 1
) -> None:
    """Assert that two loaders yield identical batches over ``epochs`` epochs.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(0, 10)
        >>> assert_same_batches(sk.DataLoader(ds, batch_size=4, prefetch=0),
        ...                     sk.DataLoader(ds, batch_size=4, prefetch=2))

    Errors:
        AssertionError: naming the first batch that differs.
    """
    a = run_epochs(loader_a, epochs)
    b = run_epochs(loader_b, epochs)
    if len(a) != len(b):
        raise AssertionError(f"the loaders yield {len(a)} and {len(b)} batches")
    for k, (x, y) in enumerate(zip(a, b, strict=True)):
        assert_batches_equal(x, y, f"batch {k}")


def assert_same_in_every_mode(
    dataset: Any,
    *,
    epochs: int = 1,
    num_workers: int = 2,
    modes: tuple[Literal["thread", "process", "ray"], ...] = ("thread", "process"),
    **loader_kwargs: Any,
) -> None:
    """Assert that loaders over ``dataset`` yield the same batches inline and with
    ``num_workers`` workers of every mode in ``modes`` (guarantee 1 of stoker's design).

    ``loader_kwargs`` (``batch_size``, ``shuffle``, ``seed``, ``collate_fn``...) are
    passed to every loader; the worker loaders are closed afterwards.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(0, 10)
        >>> assert_same_in_every_mode(ds, batch_size=4, shuffle=True, modes=("thread",))

    Errors:
        AssertionError: naming the mode and the first batch that differs.
    """
    inline = DataLoader(dataset, **loader_kwargs)
    for mode in modes:
        with DataLoader(
            dataset, num_workers=num_workers, worker_mode=mode, **loader_kwargs
        ) as workers:
            try:
                assert_same_batches(inline, workers, epochs=epochs)
            except AssertionError as exc:
                raise AssertionError(f"worker_mode={mode!r}: {exc}") from None


def assert_resumes_exactly(
    loader: DataLoader[Any],
    *,
    epochs: int = 1,
    max_stops: int | None = None,
    fresh: DataLoader[Any] | None = None,
) -> None:
    """Stop after every batch, save ``state_dict()`` through JSON, resume, and compare.

    The uninterrupted run over ``epochs`` epochs is the reference. For each stop, a
    new iterator restored from the JSON state (in ``fresh``, a separately built loader
    over the same data, if given) must yield exactly the rest of the reference: no
    batch lost, repeated or changed, across epoch boundaries too.

    Args:
        loader: the loader to check.
        epochs: how many consecutive epochs the reference covers.
        max_stops: check at most this many stops, spread evenly (None: every batch).
        fresh: a loader to resume in (default: ``loader`` itself).

    Errors:
        AssertionError: naming the stop and the first batch that differs.
    """
    reference = run_epochs(loader, epochs)
    target = fresh if fresh is not None else loader
    stops = list(range(len(reference) + 1))
    if max_stops is not None and len(stops) > max_stops:
        step = len(stops) / max_stops
        stops = sorted({int(i * step) for i in range(max_stops)} | {len(reference)})
    for stop in stops:
        it = loader.iter(epoch=0)
        seen = 0
        state = it.state_dict()
        while seen < stop:
            try:
                next(it)
                seen += 1
            except StopIteration:
                it = loader.iter(state=it.state_dict())
            state = it.state_dict()
        it.close()
        saved = json.loads(json.dumps(state))
        rest: list[Any] = []
        resumed = target.iter(state=saved)
        while len(rest) < len(reference) - stop:
            try:
                rest.append(_copy(next(resumed)))
            except StopIteration:
                if resumed.epoch >= epochs - 1:
                    break
                resumed = target.iter(state=resumed.state_dict())
        extra = next(resumed, None) if resumed.epoch == epochs - 1 else None
        resumed.close()
        if extra is not None:
            raise AssertionError(f"resumed after batch {stop}: more batches than the reference")
        if len(rest) != len(reference) - stop:
            raise AssertionError(
                f"resumed after batch {stop}: got {len(rest)} more batches, "
                f"expected {len(reference) - stop}"
            )
        for k, (x, y) in enumerate(zip(rest, reference[stop:], strict=True)):
            assert_batches_equal(x, y, f"batch {stop + k} (resumed after batch {stop})")


def _global_steps(loaders: list[DataLoader[Any]], epoch: int) -> list[list[int]]:
    """Each step's indices over all hosts (host order), from the order ledger."""
    steps: list[list[int]] = []
    while True:
        parts: list[list[int]] = []
        for loader in loaders:
            try:
                parts.append(loader.batch_indices(epoch, len(steps)))
            except IndexError:
                parts.append([])
        if not any(parts):
            return steps
        if not all(parts):
            hosts = [i for i, p in enumerate(parts) if not p]
            raise AssertionError(
                f"epoch {epoch} step {len(steps)}: hosts {hosts} have no batch while others do"
            )
        steps.append([i for part in parts for i in part])


def assert_same_order(
    a: DataLoader[Any] | list[DataLoader[Any]],
    b: DataLoader[Any] | list[DataLoader[Any]],
    epochs: int = 1,
) -> None:
    """Check that ``a`` and ``b`` deliver the same records in the same steps.

    Each side is one loader, or the loaders of every host of one run (in host order:
    a step's records are then the hosts' batches of that step, one after the other).
    The records come from the order ledger (:meth:`stoker.DataLoader.batch_indices`),
    so nothing is read: before and after a resume, or on 2 and 3 hosts with the same
    global batch, the steps must match.

    Example:
        >>> import stoker as sk
        >>> ds = sk.range(0, 12)
        >>> two = [sk.DataLoader(ds, batch_size=3, shuffle=True, shard=sk.Shard(i, 2))
        ...        for i in range(2)]
        >>> three = [sk.DataLoader(ds, batch_size=2, shuffle=True, shard=sk.Shard(i, 3))
        ...          for i in range(3)]
        >>> assert_same_order(two, three, epochs=2)

    Errors:
        AssertionError: naming the first epoch and step that differ.
        NotSupportedError: a loader whose batches depend on the records' contents.
    """
    left = a if isinstance(a, list) else [a]
    right = b if isinstance(b, list) else [b]
    for epoch in range(epochs):
        sa, sb = _global_steps(left, epoch), _global_steps(right, epoch)
        for step, (x, y) in enumerate(zip(sa, sb, strict=False)):
            if x != y:
                raise AssertionError(f"epoch {epoch} step {step}: records {x} != {y}")
        if len(sa) != len(sb):
            raise AssertionError(f"epoch {epoch}: {len(sa)} steps != {len(sb)} steps")
