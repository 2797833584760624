"""The adapters' read-ahead (``PlacedIterator``) on the loader's own job window."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import stoker as sk
from stoker._ahead import PlacedIterator


class _Interrupted:
    """An iterator of 0..n-1 that raises KeyboardInterrupt once, before ``at``, as a
    source waiting for a batch does when Ctrl-C arrives; it then goes on."""

    def __init__(self, n: int, at: int) -> None:
        self._next, self._n, self._at = 0, n, at
        self.interrupted = False

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        if self._next == self._at and not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        if self._next >= self._n:
            raise StopIteration
        self._next += 1
        return self._next - 1


def test_batches_are_placed_depth_ahead_and_the_state_is_the_last_yielded():
    loader = sk.DataLoader(sk.range(0, 12), batch_size=2)
    placed: list[int] = []

    def place(batch: np.ndarray) -> np.ndarray:
        placed.append(int(batch[0]))
        return batch

    it = PlacedIterator(iter(loader), place, depth=3)
    first = next(it)
    assert first.tolist() == [0, 1]
    assert placed == [0, 2, 4, 6]  # the batch handed out and three more, placed ahead
    assert it.state_dict()["batches"] == 1
    rest = [b.tolist() for b in it]
    assert rest == [[2 * i, 2 * i + 1] for i in range(1, 6)]
    assert it.state_dict()["epoch"] == 1  # exhausted: the next epoch's start


def test_ctrl_c_in_the_source_loses_no_batch():
    source = _Interrupted(8, at=5)
    it = PlacedIterator(source, lambda x: x * 10, depth=2)
    got = [next(it) for _ in range(3)]  # batches 3 and 4 are held ahead by now
    with pytest.raises(KeyboardInterrupt):
        next(it)  # placing batch 5 ahead: the source is interrupted
    got += list(it)
    assert source.interrupted
    assert got == [x * 10 for x in range(8)]


def test_a_source_without_state_has_no_state_dict():
    it = PlacedIterator(iter([1, 2, 3]), lambda x: x, depth=2)
    assert list(it) == [1, 2, 3]
    with pytest.raises(TypeError, match="has no state_dict"):
        it.state_dict()


def test_close_drops_the_batches_held_and_closes_the_source():
    loader = sk.DataLoader(sk.range(0, 40), batch_size=2)
    source = iter(loader)
    it = PlacedIterator(source, lambda b: b, depth=4)
    next(it)
    it.close()
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StopIteration):
        next(source)  # closed: the loader's pass ended too
