"""The hand-written packer of the ``tokens_pack`` workload: ``sk.pack``'s rule in plain
Python and NumPy, for the peers' pipeline (HF ``datasets`` + the PyTorch DataLoader,
packed in the main process) and the reference batches stoker's are checked against.

Rows of :data:`PACK_LENGTH` tokens; in order, each record goes into the first row
of the batch with room for it, and the first record that fits in none of the
batch's rows starts the next batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

__all__ = ["PACK_FIELDS", "PACK_LENGTH", "FirstFit", "greedy_pack", "pack_count"]

PACK_LENGTH = 2048
"""Tokens in a packed row."""
PACK_FIELDS = ("tokens", "segment_ids", "positions")
"""The fields of a packed batch."""
_POSITIONS = np.arange(PACK_LENGTH, dtype=np.int32)


class FirstFit:
    """Where records go in one batch of ``rows`` packed rows: the first row with room.

    ``place(n)`` returns (row, start, segment) for a record of ``n`` tokens (opening a
    new row while there are fewer than ``rows``), or None when no row has room: the
    batch is complete, and the record starts the next one (after ``reset()``).
    """

    def __init__(self, rows: int) -> None:
        self._rows = rows
        self.fill: list[int] = []  # tokens in each open row
        self._segments: list[int] = []

    def reset(self) -> None:
        self.fill, self._segments = [], []

    def place(self, n: int) -> tuple[int, int, int] | None:
        fill = self.fill
        row = next((r for r, used in enumerate(fill) if used + n <= PACK_LENGTH), len(fill))
        if row == len(fill):
            if row == self._rows:
                return None
            fill.append(0)
            self._segments.append(0)
        start = fill[row]
        fill[row] = start + n
        self._segments[row] += 1
        return row, start, self._segments[row]


def pack_count(lengths: np.ndarray, batch_size: int) -> int:
    """How many rows :func:`greedy_pack` makes of records of these lengths, in this order."""
    fit, rows = FirstFit(batch_size), 0
    for n in np.minimum(lengths, PACK_LENGTH).tolist():
        if fit.place(n) is None:
            rows += len(fit.fill)
            fit.reset()
            fit.place(n)
    return rows + len(fit.fill)


def greedy_pack(records: Iterable[np.ndarray], batch_size: int) -> Iterator[dict[str, np.ndarray]]:
    """Batches of up to ``batch_size`` rows of ``PACK_LENGTH`` tokens, packed from ``records``.

    ``sk.pack``'s rule: in order, each record goes into the first row of the batch
    with room for it; the first record that fits in none of its ``batch_size`` rows
    starts the next batch (a record longer than a row is truncated to it). Rows hold
    ``tokens`` (0 for padding), ``segment_ids`` (1, 2, ... for the records of the
    row, 0 for padding) and ``positions`` (0 .. length - 1 within each record; 0 for
    padding), all int32.
    """

    def empty() -> dict[str, np.ndarray]:
        return {f: np.zeros((batch_size, PACK_LENGTH), dtype=np.int32) for f in PACK_FIELDS}

    fit, batch = FirstFit(batch_size), empty()
    tokens, segments, positions = (batch[f] for f in PACK_FIELDS)
    for record in records:
        n = min(len(record), PACK_LENGTH)
        where = fit.place(n)
        if where is None:
            yield batch
            fit.reset()
            batch = empty()
            tokens, segments, positions = (batch[f] for f in PACK_FIELDS)
            where = fit.place(n)
            assert where is not None  # an empty batch has room for any record
        row, start, segment = where
        stop = start + n
        tokens[row, start:stop] = record[:n]
        segments[row, start:stop] = segment
        positions[row, start:stop] = _POSITIONS[:n]
    if fit.fill:
        yield {f: a[: len(fit.fill)] for f, a in batch.items()}
