"""ForeignSampler and as_sampler: other libraries' samplers behind the Sampler interface."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import stoker as sk
from stoker._sampling.foreign import ForeignSampler, as_sampler


class EpochShuffle:
    """A duck-typed sampler without ``__len__``: a fresh permutation per ``set_epoch``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.epoch = 0
        self.calls: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.calls.append(epoch)

    def __iter__(self) -> Iterator[int]:
        yield from np.random.default_rng(self.epoch).permutation(self.n).tolist()


class Yields:
    """Iterates over fixed values, whatever they are."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)


def test_a_plain_list_is_a_sampler() -> None:
    sampler = ForeignSampler([3, 1, 2, 0], source_len=4)
    assert len(sampler) == 4
    assert sampler.source_len == 4
    cursor = sampler.cursor(0)
    first = cursor.take(3)
    assert first.dtype == np.int64
    assert first.tolist() == [3, 1, 2]
    assert cursor.take(3).tolist() == [0]
    assert cursor.take(3).size == 0
    assert cursor.position == 4


def test_set_epoch_is_called_and_every_position_resumes() -> None:
    wrapped = EpochShuffle(12)
    sampler = ForeignSampler(wrapped, source_len=12)
    full = sampler.cursor(5).take(100).tolist()
    assert wrapped.calls == [5]
    assert full == np.random.default_rng(5).permutation(12).tolist()
    for position in range(13):
        cursor = sampler.cursor(5)
        head = cursor.take(position).tolist()
        state = json.loads(json.dumps(cursor.state_dict()))
        rest = ForeignSampler(EpochShuffle(12), 12).restore(state).take(100).tolist()
        assert head + rest == full


def test_without_len_iteration_works_but_len_does_not() -> None:
    sampler = ForeignSampler(EpochShuffle(5), source_len=5)
    with pytest.raises(TypeError, match="__len__"):
        len(sampler)
    sampler.set_epoch(2)
    assert sorted(sampler) == [0, 1, 2, 3, 4]
    assert sampler.state_dict()["position"] == 5


def test_resuming_past_what_the_sampler_yields_is_a_state_error() -> None:
    state = ForeignSampler(EpochShuffle(5), source_len=5).cursor(0).state_dict()
    with pytest.raises(sk.StateError, match="yielded only 5"):
        ForeignSampler(EpochShuffle(5), source_len=5).restore({**state, "position": 7})


def test_a_state_from_another_wrapped_type_is_refused() -> None:
    state = ForeignSampler([0, 1], source_len=2).cursor(0).state_dict()
    with pytest.raises(sk.StateError, match="wrapped"):
        ForeignSampler((0, 1), source_len=2).restore(state)


@pytest.mark.parametrize("bad", [5, -1])
def test_indices_out_of_range_are_named(bad: int) -> None:
    cursor = ForeignSampler(Yields([0, 1, bad, 2]), source_len=5).cursor(0)
    assert cursor.take(2).tolist() == [0, 1]
    with pytest.raises(IndexError, match=f"index {bad} at position 2"):
        cursor.take(2)


def test_values_that_are_not_ints_are_refused() -> None:
    cursor = ForeignSampler(Yields([0, 1.5]), source_len=5).cursor(0)
    with pytest.raises(TypeError, match=r"1\.5"):
        cursor.take(2)


def test_not_iterable_is_a_config_error() -> None:
    with pytest.raises(sk.ConfigError, match="iterable"):
        ForeignSampler(42, source_len=3)  # type: ignore[arg-type]
    with pytest.raises(sk.ConfigError, match="iterable"):
        as_sampler(42, 3)


def test_as_sampler_keeps_stoker_samplers_and_wraps_the_rest() -> None:
    sampler = sk.RandomSampler(10)
    assert as_sampler(sampler, 10) is sampler
    wrapped = as_sampler([1, 0], 2)
    assert isinstance(wrapped, ForeignSampler)
    assert wrapped.cursor(0).take(2).tolist() == [1, 0]


def test_as_sampler_refuses_a_sampler_of_another_length() -> None:
    with pytest.raises(sk.ConfigError, match="built for 10 records but the dataset has 12"):
        as_sampler(sk.RandomSampler(10), 12)


def test_as_sampler_refuses_a_batch_sampler() -> None:
    with pytest.raises(sk.ConfigError, match="batch_sampler"):
        as_sampler(sk.BatchSampler(4, 2), 4)


def test_torch_samplers_resume_exactly() -> None:
    data = pytest.importorskip("torch.utils.data")
    wrapped = data.DistributedSampler(range(20), num_replicas=2, rank=1, shuffle=True, seed=3)
    sampler = as_sampler(wrapped, 20)
    assert len(sampler) == 10
    full = sampler.cursor(4).take(10).tolist()
    cursor = sampler.cursor(4)
    head = cursor.take(6).tolist()
    rest = sampler.restore(json.loads(json.dumps(cursor.state_dict()))).take(10).tolist()
    assert head + rest == full
    assert full != sampler.cursor(5).take(10).tolist()


def test_a_sampler_that_was_iterated_still_pickles() -> None:
    sampler = ForeignSampler(EpochShuffle(6), source_len=6)
    sampler.set_epoch(1)
    it = iter(sampler)
    next(it)
    clone = pickle.loads(pickle.dumps(sampler))
    assert sorted(clone) == list(range(6))
    batches = sk.BatchSampler(sampler, 4)
    next(iter(batches))
    assert pickle.loads(pickle.dumps(batches)).state_dict()["position"] == 0
