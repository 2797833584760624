"""``ints_map``: the ``ints`` workload with an identity function applied to every record.

Both loaders make one Python call per record: stoker through ``Dataset.map``, torch
through a dataset whose ``__getitem__`` calls the function. The difference from
``ints`` is the cost of a per-record transform.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import stoker as sk

from ..base import BenchContext, Prepared, Runner, scaled
from . import workload
from ._common import BATCH_SIZE, sequence_batches

RECORDS = 1_000_000

T = TypeVar("T")


def identity(record: T) -> T:
    """The per-record function: returns its argument."""
    return record


class IdentityMapped:
    """A map-style dataset for torch: ``identity(data[i])``, one Python call per record."""

    def __init__(self, data: Sequence[int]) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, index: int) -> int:
        return identity(self._data[index])


@workload("ints_map", "1,000,000 Python ints with an identity map per record, batch 256")
def prepare(ctx: BenchContext) -> Prepared:
    """A list of ints mapped through ``identity`` on both sides."""
    n = scaled(ctx, RECORDS)
    data = list(range(n))
    runners: list[Runner] = []
    if ctx.wants("stoker"):

        def stoker_loader() -> Any:
            return sk.DataLoader(sk.from_sequence(data).map(identity), batch_size=BATCH_SIZE)

        runners.append(Runner("stoker", "stoker", stoker_loader))
    if ctx.wants("torch"):
        torch = ctx.torch

        def torch_loader() -> Any:
            return torch.utils.data.DataLoader(
                IdentityMapped(data), batch_size=BATCH_SIZE, num_workers=0
            )

        runners.append(Runner("torch", "torch", torch_loader))
    return Prepared(
        summary=f"{n:,} Python ints with an identity map per record, batch 256",
        samples=n,
        record_bytes=8,
        runners=tuple(runners),
        reference=lambda: sequence_batches(data, BATCH_SIZE),
        params={"records": n, "batch_size": BATCH_SIZE, "record": "Python int -> int64"},
    )
