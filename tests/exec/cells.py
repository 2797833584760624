"""The grid of the contract tests: executors (how batches are built) x plans (what they hold).

An :class:`Entry` is one executor as a user asks for it (``worker_mode`` and
``num_workers``); a plan is a pipeline shape that makes jobs its own way: a plain
map, a filter that fills batches past dropped records, ``sk.pack``, a map whose
failing record is skipped (``on_error="skip"``), a stream read in parts by the
workers, and a mixture of streams. Every plan is built from the public API only, so
the grid holds whatever the core looks like inside.

One record of every plan, :data:`STUCK`, can be held back on demand (:class:`Hold`):
the tests use it to leave a batch in flight for the watchdog, ``timeout=``, Ctrl-C
and ``close()``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import stoker as sk

__all__ = [
    "BATCH",
    "EXECUTORS",
    "FAILING",
    "PLANS",
    "RECORDS",
    "STREAMS",
    "STUCK",
    "Entry",
    "Hold",
    "Plan",
    "as_lists",
    "records_of",
]


@dataclass(frozen=True)
class Entry:
    """One executor under test: the loader's ``worker_mode`` and ``num_workers``."""

    mode: str
    num_workers: int

    def __str__(self) -> str:
        return f"{self.mode}-{self.num_workers}"

    def options(self) -> dict[str, Any]:
        if self.mode == "auto":  # the default worker_mode, as most users leave it
            return {"num_workers": self.num_workers}
        return {"num_workers": self.num_workers, "worker_mode": self.mode}


EXECUTORS = [
    Entry("inline", 0),
    Entry("thread", 2),
    Entry("process", 2),
    Entry("auto", 2),  # unmarked user code: process workers from the first batch
    Entry("ray", 2),
]

RECORDS = 64
BATCH = 4
STUCK = 60  # even (a filter keeps it), in the last batches: read after the workers started
FAILING = 9  # the record that raises in the "skip" plan
SECOND = range(100, 132)  # the second stream of a mixture


class Hold:
    """Holds record :data:`STUCK` back while the file ``gate`` exists, up to ``seconds``.

    The gate is a file, so that thread, process and Ray workers (all on this host) see
    it. When the record starts being held, ``entered`` is written, and ``released``
    when it is let go: a test that sees the first and not the second knows the record
    is held now.
    """

    def __init__(self, folder: Path, seconds: float) -> None:
        self.gate = folder / "gate"
        self.entered = folder / "entered"
        self.released = folder / "released"
        self.seconds = seconds

    def close(self) -> None:
        """Hold the record from now on (the first batches are read without it)."""
        self.gate.touch()

    def open(self) -> None:
        self.gate.unlink(missing_ok=True)

    def wait_until_held(self, seconds: float = 30) -> None:
        """Return once the record is being held (a worker or the caller reached it)."""
        deadline = time.monotonic() + seconds
        while not self.entered.exists():
            if time.monotonic() > deadline:
                raise AssertionError(f"record {STUCK} was not reached within {seconds} s")
            time.sleep(0.005)

    def function(self) -> Callable[[int], int]:
        gate, entered, released = str(self.gate), str(self.entered), str(self.released)
        seconds = self.seconds

        def hold(x: int) -> int:
            if x == STUCK and os.path.exists(gate):
                with open(entered, "w"):
                    pass
                deadline = time.monotonic() + seconds
                while os.path.exists(gate) and time.monotonic() < deadline:
                    time.sleep(0.005)
                with open(released, "w"):
                    pass
            return x

        return hold


def _noisy(x: int, rng: np.random.Generator) -> int:
    return x * 1000 + int(rng.integers(0, 1000))


def _even(x: int) -> bool:
    return x % 2 == 0


def _fail_one(x: int) -> int:
    if x == FAILING:
        raise ValueError(f"bad record {x}")
    return x


def _tokens(x: int) -> dict[str, np.ndarray]:
    return {"tokens": np.full(3 + x % 4, x, dtype=np.int64)}


def _first_stream() -> range:
    return range(RECORDS)


def _second_stream() -> range:
    return SECOND


@dataclass(frozen=True)
class Plan:
    """A pipeline shape: ``build(hold)`` gives the dataset, ``options`` the loader's extras."""

    name: str
    build: Callable[[Callable[[int], int]], Any]
    options: dict[str, Any]
    stream: bool = False

    def __str__(self) -> str:
        return self.name

    def loader(self, entry: Entry, hold: Callable[[int], int], **options: Any) -> Any:
        return sk.DataLoader(
            self.build(hold),
            batch_size=BATCH,
            **entry.options(),
            **self.options,
            **options,
        )


PLANS = [
    Plan("map", lambda h: sk.range(0, RECORDS).map(h).map(_noisy, seeded=True), {}),
    Plan("filter", lambda h: sk.range(0, RECORDS).map(h).filter(_even), {}),
    Plan("pack", lambda h: sk.pack(sk.range(0, RECORDS).map(h).map(_tokens), 8), {}),
    Plan("skip", lambda h: sk.range(0, RECORDS).map(h).map(_fail_one), {"on_error": "skip"}),
    Plan("stream", lambda h: sk.from_iterable(_first_stream).map(h), {}, stream=True),
    Plan(
        "mixed",
        lambda h: sk.mix(
            [sk.from_iterable(_first_stream).map(h), sk.from_iterable(_second_stream)],
            weights=[2, 1],
            on_exhausted="drop",  # every record is read, however the streams are split
        ),
        {},
        stream=True,
    ),
]
STREAMS = [plan for plan in PLANS if plan.stream]


def as_lists(batch: Any) -> Any:
    """A batch as plain lists (a dict of arrays as a dict of lists), for comparisons."""
    if isinstance(batch, dict):
        return {key: value.tolist() for key, value in batch.items()}
    return batch.tolist()


def records_of(batches: list[Any]) -> list[int]:
    """Every record of ``batches`` (sorted): what a stream read in parts must still hold."""
    out: list[int] = []
    for batch in batches:
        out.extend(np.asarray(batch["tokens"] if isinstance(batch, dict) else batch).ravel())
    return sorted(int(x) for x in out)
