"""What a benchmark run measured: one row per loader, target results, one workload's result."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from .base import Kind, Target
from .verify import Check

__all__ = ["Row", "TargetResult", "WorkloadResult"]


@dataclass
class Row:
    """The timed runs of one loader on one workload."""

    loader: str
    kind: Kind
    samples: int
    record_bytes: int
    seconds: list[float] = field(default_factory=list)
    build_seconds: list[float] = field(default_factory=list)
    first_batch_seconds: list[float] = field(default_factory=list)
    warm_seconds: list[float] = field(default_factory=list)
    limit: float | None = None
    worker_mode: str | None = None
    show_mode: bool = False
    versus: str | None = None

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def first_batch_median(self) -> float:
        return statistics.median(self.first_batch_seconds)

    @property
    def warm_median(self) -> float | None:
        return statistics.median(self.warm_seconds) if self.warm_seconds else None

    @property
    def warm_samples_per_s(self) -> float | None:
        warm = self.warm_median
        return None if warm is None else self.samples / warm

    @property
    def of_limit(self) -> float | None:
        """The fraction of the runner's samples/s limit reached, when it has one."""
        return None if self.limit is None else self.samples_per_s / self.limit

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.median

    @property
    def gb_per_s(self) -> float:
        return self.samples * self.record_bytes / self.median / 1e9


@dataclass(frozen=True)
class TargetResult:
    """A :class:`Target` with the value measured for it (None when a row is missing).

    For a ``"speed"`` target, ``warm`` is the same ratio for the second epoch of the
    same loader, when the workload times one (shown beside it; ``met`` is decided
    on the first epoch of a fresh loader).
    """

    loader: str
    measure: str
    bound: float
    value: float | None
    met: bool | None
    warm: float | None = None
    versus: str | None = None


@dataclass
class WorkloadResult:
    """Everything measured for one workload."""

    name: str
    summary: str
    params: dict[str, Any]
    rows: list[Row]
    checks: list[Check]
    failures: list[str]
    targets: tuple[Target, ...] = ()

    def _base(self, kind: Kind, row: Row) -> Row | None:
        if kind == "torch" and row.versus is not None:
            return next((r for r in self.rows if r.loader == row.versus), None)
        return next((r for r in self.rows if r.kind == kind), None)

    def ratio(self, row: Row, kind: Kind) -> float | None:
        """How many times ``row``'s samples/s the first row of ``kind`` is (or the torch
        row that ``row.versus`` names), if there is one."""
        base = self._base(kind, row)
        return None if base is None else row.samples_per_s / base.samples_per_s

    def best_peer(self) -> Row | None:
        """The fastest row that is not stoker's (torch, Grain, SPDL, ...), if any."""
        peers = [r for r in self.rows if r.kind != "stoker"]
        return max(peers, key=lambda r: r.samples_per_s) if peers else None

    def warm_ratio(self, row: Row, kind: Kind) -> float | None:
        """Like :meth:`ratio`, for the second epoch of the same loader (None when not timed)."""
        base = self._base(kind, row)
        if base is None or base.warm_median is None or row.warm_median is None:
            return None
        return (row.samples / row.warm_median) / (base.samples / base.warm_median)

    def first_batch_ratio(self, row: Row, kind: Kind) -> float | None:
        """How many times faster ``row`` gets its first batch than the first row of ``kind``."""
        base = self._base(kind, row)
        return None if base is None else base.first_batch_median / row.first_batch_median

    def target_results(self) -> list[TargetResult]:
        """Every target of the workload with its measured value."""
        rows = {row.loader: row for row in self.rows}
        results = []
        for target in self.targets:
            row = rows.get(target.loader)
            value = warm = None
            versus = None
            peer = self.best_peer()
            if row is not None and target.measure == "speed":
                value, warm = self.ratio(row, "torch"), self.warm_ratio(row, "torch")
            elif row is not None and target.measure == "peer_speed" and peer is not None:
                value, versus = row.samples_per_s / peer.samples_per_s, peer.loader
            elif row is not None and target.measure == "first_batch":
                faster = self.first_batch_ratio(row, "torch")
                value = None if faster is None else 1 / faster
            elif row is not None:
                value = row.of_limit
            met = None
            if value is not None:
                at_most = target.measure == "first_batch"
                met = value <= target.bound if at_most else value >= target.bound
            results.append(
                TargetResult(target.loader, target.measure, target.bound, value, met, warm, versus)
            )
        return results
