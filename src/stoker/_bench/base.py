"""What a benchmark workload is made of: the context it gets and the runners it returns.

A workload builds its data (into the cache folder when it is large), then returns a
:class:`Prepared`: the loaders to time (one :class:`Runner` each), the number of
samples in one epoch, the payload size of one record, and a reference stream of the
batches every loader must produce. The harness does the rest: it verifies every
runner against the reference in an untimed pass, then times whole epochs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = [
    "KINDS",
    "MEASURES",
    "BenchContext",
    "Kind",
    "Measure",
    "Prepared",
    "Runner",
    "Target",
    "gigabytes",
    "scaled",
]

Kind = Literal["stoker", "torch", "bare"]

Measure = Literal["speed", "peer_speed", "first_batch", "of_limit"]

MEASURES: tuple[Measure, ...] = ("speed", "peer_speed", "first_batch", "of_limit")
"""What a :class:`Target` is about: samples/s against torch's or against the fastest
other loader's, the time to the first batch against torch's, or samples/s against
the runner's ``limit``."""

KINDS: tuple[Kind, ...] = ("stoker", "torch", "bare")
"""The loader families: ``vs torch`` and ``vs bare`` compare with the rows of that kind."""


@dataclass(frozen=True)
class BenchContext:
    """What a workload may depend on when it builds its data and its loaders.

    ``torch`` is the imported module, or None when it is not installed or not asked
    for. ``scale`` multiplies every data size (tests run on tiny data with it).
    """

    cache_dir: Path
    quick: bool
    scale: float
    loaders: frozenset[Kind]
    torch: Any
    log: Callable[[str], None]

    def wants(self, kind: Kind) -> bool:
        """True when rows of this kind should be built (and can be: torch is importable)."""
        if kind == "torch" and self.torch is None:
            return False
        return kind in self.loaders


@dataclass(frozen=True)
class Runner:
    """One row of the table: ``make()`` builds a fresh loader; iterating it is timed.

    A fresh loader per run keeps every run identical (a stoker loader moves on to the
    next epoch at every ``iter()``). Batches must support ``len()``; verification turns
    them into NumPy arrays (``.numpy()`` for torch tensors).

    Attributes:
        ordered: False when the loader may yield the batches in any order (stoker's
            ``ordered=False``); verification then compares the batches as a multiset.
        limit: the most samples/s this loader could reach on the workload (for example
            workers / latency when every record waits on simulated I/O); the report
            says what fraction of it was reached.
        show_mode: the table names the worker mode the loader used (for ``"auto"``).
        versus: the label of the torch row that ``vs torch`` and the targets compare
            this row with (the same worker count, say); None: the first torch row.
        samples: records one epoch of this loader delivers, when it reads only the
            first part of the workload's epoch (a baseline too slow to time whole; it
            must be whole batches): it is timed and verified on those records alone.
        reference: the batches this row must produce, when they differ from the
            workload's reference (another configuration of the same data); None: the
            workload's.
    """

    label: str
    kind: Kind
    make: Callable[[], Iterable[Any]]
    ordered: bool = True
    limit: float | None = None
    show_mode: bool = False
    versus: str | None = None
    samples: int | None = None
    reference: Callable[[], Iterable[np.ndarray]] | None = None


@dataclass(frozen=True)
class Target:
    """A goal for one row, checked and printed after the table (it never fails a run).

    ``measure`` says what is compared with ``bound``:

    * ``"speed"``: the row's samples/s divided by torch's; met when at least ``bound``;
    * ``"peer_speed"``: the row's samples/s divided by the fastest row that is not
      stoker's (torch and the peers: Grain, SPDL, ...); met when at least ``bound``;
    * ``"first_batch"``: the row's time to the first batch divided by torch's; met when
      at most ``bound``;
    * ``"of_limit"``: the row's samples/s divided by its runner's ``limit``; met when at
      least ``bound``.
    """

    loader: str
    measure: Measure
    bound: float


@dataclass(frozen=True)
class Prepared:
    """A workload ready to run.

    Attributes:
        samples: records in one epoch (every runner must deliver exactly this many).
        record_bytes: payload bytes of one record in a batch (GB/s counts these).
        runners: the loaders to compare, in table order.
        reference: a fresh iterable of the expected batches, as NumPy arrays.
        exact_batches: how many leading batches are compared element by element;
            None compares every batch. Later batches are compared by fingerprint.
        params: sizes and settings, recorded in the JSON report.
        targets: goals for some rows, reported after the table.
        summary: the workload's one-line description with the sizes this run really
            uses (after ``--quick`` and the scale); None: the registered summary.
        warm_epoch: also time a second epoch of the same loader in every run, after
            the first: workers that a loader keeps between epochs are already
            running and the data is already mapped, as in every epoch of a training
            job but the first. torch (``persistent_workers=False``, its default)
            starts its workers again.
    """

    samples: int
    record_bytes: int
    runners: tuple[Runner, ...]
    reference: Callable[[], Iterable[np.ndarray]]
    exact_batches: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    targets: tuple[Target, ...] = ()
    warm_epoch: bool = False
    summary: str | None = None


def gigabytes(nbytes: int) -> str:
    """A size for a summary: ``"0.26 GB"``.

    Example:
        >>> gigabytes(262_144_000)
        '0.26 GB'
    """
    return f"{nbytes / 1e9:.2f} GB"


def scaled(ctx: BenchContext, count: int) -> int:
    """``count`` multiplied by the context's scale, at least 1."""
    return max(1, int(count * ctx.scale))
