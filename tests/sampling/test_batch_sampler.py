"""BatchSampler: keep, drop and rollover, exact resume, the torch-style protocol."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pytest

import stoker as sk
from stoker._sampling.foreign import ForeignSampler


def _order(sampler: sk.Sampler, epoch: int) -> list[int]:
    order: list[int] = sampler.cursor(epoch).take(len(sampler)).tolist()
    return order


def _drain(cursor: Any) -> list[list[int]]:
    batches = []
    while (batch := cursor.next_batch()) is not None:
        batches.append(batch.tolist())
    return batches


def _flat(lists: Iterable[list[int]]) -> list[int]:
    return list(itertools.chain.from_iterable(lists))


def _roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state))  # type: ignore[no-any-return]


def test_keep_yields_the_short_last_batch() -> None:
    inner = sk.RandomSampler(10, seed=1)
    batches = sk.BatchSampler(inner, batch_size=3)
    for epoch in range(4):
        batches.set_epoch(epoch)
        got = list(batches)
        assert [len(b) for b in got] == [3, 3, 3, 1]
        assert len(batches) == 4
        assert _flat(got) == _order(inner, epoch)


def test_drop_leaves_the_short_last_batch_out() -> None:
    inner = sk.RandomSampler(10, seed=1)
    batches = sk.BatchSampler(inner, batch_size=3, last_batch="drop")
    for epoch in range(4):
        batches.set_epoch(epoch)
        got = list(batches)
        assert [len(b) for b in got] == [3, 3, 3]
        assert len(batches) == 3
        assert _flat(got) == _order(inner, epoch)[:9]


@pytest.mark.parametrize(("n", "size"), [(10, 4), (10, 5), (3, 7), (7, 3), (1, 2), (0, 3)])
def test_rollover_loses_and_repeats_nothing_over_epochs(n: int, size: int) -> None:
    inner = sk.RandomSampler(n, seed=2)
    batches = sk.BatchSampler(inner, batch_size=size, last_batch="rollover")
    epochs = 6
    stream: list[int] = []
    for epoch in range(epochs):
        batches.set_epoch(epoch)
        got = list(batches)
        assert len(got) == len(batches) == batches.num_batches(epoch)
        assert all(len(b) == size for b in got)
        stream += _flat(got)
    everything = _flat(_order(inner, e) for e in range(epochs))
    carry = batches.carry_into(epochs)
    assert len(stream) == (epochs * n) // size * size
    assert stream + carry == everything


@pytest.mark.parametrize(("n", "size"), [(10, 4), (3, 7), (9, 3)])
def test_rollover_carry_out_chains_like_the_pure_carry(n: int, size: int) -> None:
    batches = sk.BatchSampler(sk.RandomSampler(n, seed=5), size, last_batch="rollover")
    carry: list[int] = []
    for epoch in range(6):
        assert carry == batches.carry_into(epoch)
        cursor = batches.batch_cursor(epoch, carry=carry)
        chained = _drain(cursor)
        batches.set_epoch(epoch)
        assert chained == list(batches)
        carry = cursor.carry_out()
        assert len(carry) < size


def test_rollover_first_batch_starts_with_the_carry() -> None:
    batches = sk.BatchSampler(sk.SequentialSampler(5), 3, last_batch="rollover")
    cursor = batches.batch_cursor(1, carry=[3, 4])
    first = cursor.next_batch()
    assert first is not None
    assert first.tolist() == [3, 4, 0]
    assert cursor.state_dict()["carry"] == []
    assert _drain(cursor) == [[1, 2, 3]]
    assert cursor.carry_out() == [4]


@pytest.mark.parametrize("mode", ["keep", "drop", "rollover"])
def test_resume_after_every_batch_is_exact(mode: Any) -> None:
    batches = sk.BatchSampler(sk.ChunkedShuffleSampler(17, 4, seed=1), 5, last_batch=mode)
    carry = batches.carry_into(3)
    reference = batches.batch_cursor(3, carry=carry)
    full = _drain(reference)
    final_carry = reference.carry_out()
    for k in range(len(full) + 2):
        head: list[list[int]] = []
        cursor = batches.batch_cursor(3, carry=carry)
        for _ in range(k):
            batch = cursor.next_batch()
            if batch is not None:
                head.append(batch.tolist())
        state = _roundtrip(cursor.state_dict())
        other = sk.BatchSampler(sk.ChunkedShuffleSampler(17, 4, seed=1), 5, last_batch=mode)
        resumed = other.restore(state)
        assert head + _drain(resumed) == full
        assert resumed.carry_out() == final_carry


def test_batch_cursor_restore_moves_it_in_place() -> None:
    batches = sk.BatchSampler(sk.RandomSampler(11, seed=0), 4)
    cursor = batches.batch_cursor(2)
    cursor.next_batch()
    state = cursor.state_dict()
    rest = _drain(cursor)
    other = batches.batch_cursor(0)
    other.restore(state)
    assert other.epoch == 2
    assert other.position == 4
    assert _drain(other) == rest


def test_state_fields() -> None:
    batches = sk.BatchSampler(sk.RandomSampler(10, seed=0), 4, last_batch="rollover")
    cursor = batches.batch_cursor(1, carry=batches.carry_into(1))
    state = cursor.state_dict()
    assert state["epoch"] == 1
    assert state["position"] == 0
    assert state["carry"] == batches.carry_into(1)
    assert state["sampler"] == batches.sampler.cursor(1).state_dict()
    cursor.next_batch()
    state = cursor.state_dict()
    assert state["carry"] == []
    assert state["position"] == 2
    assert state["sampler"]["position"] == 2


def test_torch_style_protocol() -> None:
    batches = sk.BatchSampler(sk.RandomSampler(10, seed=0), 3, last_batch="rollover")
    batches.set_epoch(1)
    expected = list(batches)
    batches.set_epoch(1)
    it = iter(batches)
    head = [next(it)]
    state = _roundtrip(batches.state_dict())
    other = sk.BatchSampler(sk.RandomSampler(10, seed=0), 3, last_batch="rollover")
    other.load_state_dict(state)
    assert other.state_dict() == state
    assert head + list(other) == expected
    assert list(other) == expected  # the loaded state is used once; the epoch stays


def test_state_dict_before_iterating_is_the_epoch_start() -> None:
    batches = sk.BatchSampler(sk.SequentialSampler(5), 2, last_batch="rollover")
    batches.set_epoch(1)
    state = batches.state_dict()
    assert (state["epoch"], state["position"], state["carry"]) == (1, 0, [4])


def test_ints_and_datasets_mean_sequential() -> None:
    assert list(sk.BatchSampler(5, 2)) == [[0, 1], [2, 3], [4]]
    assert list(sk.BatchSampler(["a", "b", "c"], 2, "drop")) == [[0, 1]]
    assert sk.BatchSampler(np.zeros(4), 3).source_len == 4


def test_foreign_samplers_can_be_batched() -> None:
    batches = sk.BatchSampler(ForeignSampler([4, 3, 2, 1, 0], source_len=5), 2)
    assert list(batches) == [[4, 3], [2, 1], [0]]


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: sk.BatchSampler(5, 0), "batch_size"),
        (lambda: sk.BatchSampler(5, "2"), "batch_size"),  # type: ignore[arg-type]
        (lambda: sk.BatchSampler(5, 2, "partial"), "'keep', 'drop', 'rollover'"),  # type: ignore[arg-type]
        (lambda: sk.BatchSampler(sk.BatchSampler(5, 2), 2), "already a BatchSampler"),
        (lambda: sk.BatchSampler(object(), 2), "sampler must be"),  # type: ignore[arg-type]
        (lambda: sk.BatchSampler({1, 2}, 2), "ForeignSampler"),
        (lambda: sk.BatchSampler(5, 2).batch_cursor(0, carry=[1]), "rollover"),
        (lambda: sk.BatchSampler(5, 2, "rollover").batch_cursor(0, carry=[1, 2]), "fewer"),
        (lambda: sk.BatchSampler(5, 3, "rollover").batch_cursor(0, carry=[7]), "outside"),
        (lambda: sk.BatchSampler(5, 3, "rollover").batch_cursor(0, carry=[0.5]), "int"),  # type: ignore[list-item]
        (lambda: sk.BatchSampler(5, 2).batch_cursor(0, position=6), "position"),
        (lambda: sk.BatchSampler(5, 2).set_epoch(-1), "epoch"),
    ],
)
def test_bad_arguments_raise_config_error(build: Callable[[], object], match: str) -> None:
    with pytest.raises(sk.ConfigError, match=match):
        build()


def test_restore_refuses_a_state_from_another_batch_sampler() -> None:
    state = sk.BatchSampler(sk.RandomSampler(10, seed=0), 4).batch_cursor(0).state_dict()
    with pytest.raises(sk.StateError, match="batch_size"):
        sk.BatchSampler(sk.RandomSampler(10, seed=0), 3).restore(state)
    with pytest.raises(sk.StateError, match="last_batch"):
        sk.BatchSampler(sk.RandomSampler(10, seed=0), 4, "drop").restore(state)
    with pytest.raises(sk.StateError, match="seed"):
        sk.BatchSampler(sk.RandomSampler(10, seed=1), 4).restore(state)
    with pytest.raises(sk.StateError, match="RandomSampler"):
        sk.BatchSampler(sk.RandomSampler(10, seed=0), 4).sampler.restore(
            {**state, "kind": "RandomSampler"}
        )
    with pytest.raises(sk.StateError, match="differ"):
        sk.BatchSampler(sk.RandomSampler(10, seed=0), 4).restore({**state, "position": 3})
    with pytest.raises(sk.StateError, match="rollover"):
        sk.BatchSampler(sk.RandomSampler(10, seed=0), 4).restore({**state, "carry": [1]})
    with pytest.raises(sk.StateError, match="sampler"):
        sk.BatchSampler(sk.RandomSampler(10, seed=0), 4).load_state_dict(
            {k: v for k, v in state.items() if k != "sampler"}
        )


def test_carry_out_before_the_end_is_an_error() -> None:
    cursor = sk.BatchSampler(5, 2, "rollover").batch_cursor(0)
    cursor.next_batch()
    with pytest.raises(RuntimeError, match="next_batch"):
        cursor.carry_out()
    assert _drain(cursor) == [[2, 3]]
    assert cursor.carry_out() == [4]
    assert cursor.next_batch() is None
    assert cursor.carry_out() == [4]
