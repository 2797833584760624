"""The index samplers: pure epoch orders, exact resume, state checks."""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stoker as sk

Build = Callable[[int, int], sk.Sampler]


def _weights(n: int) -> list[float]:
    return [float(i % 4) + 0.5 for i in range(n)]


def _sparse_weights(n: int) -> list[float]:
    return [0.0 if i % 3 == 1 else float(i % 5) + 1.0 for i in range(n)]


BUILDERS: dict[str, Build] = {
    "sequential": lambda n, seed: sk.SequentialSampler(n),
    "random": lambda n, seed: sk.RandomSampler(n, seed=seed),
    "chunked": lambda n, seed: sk.ChunkedShuffleSampler(n, chunk_size=3, window=7, seed=seed),
    "chunked-default-window": lambda n, seed: sk.ChunkedShuffleSampler(n, 2, seed=seed),
    "weighted": lambda n, seed: sk.WeightedSampler(_weights(n), seed=seed),
    "weighted-more": lambda n, seed: sk.WeightedSampler(
        _weights(n), num_samples=2 * n + 1, seed=seed
    ),
    "weighted-without": lambda n, seed: sk.WeightedSampler(
        _sparse_weights(n), num_samples=max(1, n // 2), replacement=False, seed=seed
    ),
}
SHUFFLING = [name for name in BUILDERS if name != "sequential"]
PERMUTING = ["sequential", "random", "chunked", "chunked-default-window"]


def _epoch(sampler: sk.Sampler, epoch: int) -> list[int]:
    order: list[int] = sampler.cursor(epoch).take(len(sampler) + 5).tolist()
    return order


def _roundtrip(state: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(state))  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", BUILDERS)
def test_epoch_is_a_pure_function_of_seed_and_epoch(name: str) -> None:
    build = BUILDERS[name]
    for epoch in range(3):
        assert _epoch(build(40, 5), epoch) == _epoch(build(40, 5), epoch)
    sampler = build(40, 5)
    later_first = _epoch(sampler, 2)
    assert _epoch(sampler, 0) == _epoch(build(40, 5), 0)
    assert _epoch(sampler, 2) == later_first


@pytest.mark.parametrize("name", SHUFFLING)
def test_different_seeds_and_epochs_give_different_orders(name: str) -> None:
    build = BUILDERS[name]
    sampler = build(60, 0)
    assert _epoch(sampler, 0) != _epoch(sampler, 1)
    assert _epoch(sampler, 0) != _epoch(build(60, 1), 0)


def test_sequential_is_in_order_every_epoch() -> None:
    sampler = sk.SequentialSampler(range(6))
    assert _epoch(sampler, 0) == _epoch(sampler, 9) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("name", PERMUTING)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 50, 101])
def test_permutation_samplers_give_every_index_once(name: str, n: int) -> None:
    sampler = BUILDERS[name](n, 3)
    assert len(sampler) == sampler.source_len == n
    for epoch in range(4):
        assert sorted(_epoch(sampler, epoch)) == list(range(n))


@pytest.mark.parametrize("name", BUILDERS)
def test_resume_at_every_position_equals_the_uninterrupted_stream(name: str) -> None:
    build = BUILDERS[name]
    sampler = build(23, 7)
    full = _epoch(sampler, 3)
    assert len(full) == len(sampler)
    for position in range(len(sampler) + 1):
        cursor = sampler.cursor(3)
        head = cursor.take(position).tolist()
        state = _roundtrip(cursor.state_dict())
        assert state["epoch"] == 3
        assert state["position"] == position
        rest = build(23, 7).restore(state).take(len(full)).tolist()
        assert head + rest == full
        assert sampler.cursor(3, position).take(len(full)).tolist() == full[position:]


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(BUILDERS)),
    n=st.integers(1, 300),
    seed=st.integers(0, 2**40),
    epoch=st.integers(0, 10**6),
    steps=st.lists(st.integers(0, 80), max_size=12),
    cut=st.integers(0, 12),
)
def test_resume_after_any_takes_is_exact(
    name: str, n: int, seed: int, epoch: int, steps: list[int], cut: int
) -> None:
    build = BUILDERS[name]
    sampler = build(n, seed)
    full = _epoch(sampler, epoch)
    cursor = sampler.cursor(epoch)
    taken: list[int] = []
    for i, step in enumerate(steps):
        if i == cut:
            cursor = build(n, seed).restore(_roundtrip(cursor.state_dict()))
        chunk = cursor.take(step)
        assert chunk.dtype == np.int64
        assert chunk.size == min(step, len(full) - len(taken))
        taken += chunk.tolist()
    taken += build(n, seed).restore(_roundtrip(cursor.state_dict())).take(len(full)).tolist()
    assert taken == full


def test_take_returns_full_chunks_until_the_end_of_the_epoch() -> None:
    cursor = sk.RandomSampler(12, seed=0).cursor(0)
    assert [cursor.take(5).size for _ in range(5)] == [5, 5, 2, 0, 0]
    assert cursor.position == 12
    assert cursor.take(0).size == 0
    assert cursor.take(0).dtype == np.int64


def test_take_rejects_a_negative_count() -> None:
    with pytest.raises(sk.ConfigError, match="take"):
        sk.RandomSampler(4).cursor(0).take(-1)


def test_taken_arrays_are_independent_copies() -> None:
    sampler = sk.RandomSampler(10, seed=0)
    chunk = sampler.cursor(0).take(4)
    chunk[:] = -1
    assert sorted(_epoch(sampler, 0)) == list(range(10))


def test_iterating_a_cursor_gives_python_ints() -> None:
    cursor = sk.ChunkedShuffleSampler(9, chunk_size=2, seed=1).cursor(4)
    first = next(cursor)
    rest = list(cursor)
    assert isinstance(first, int)
    assert all(isinstance(i, int) for i in rest)
    assert sorted([first, *rest]) == list(range(9))
    assert cursor.epoch == 4


def test_cursors_of_one_epoch_share_one_permutation() -> None:
    sampler = sk.RandomSampler(1000, seed=2)
    a, b = sampler.cursor(5), sampler.cursor(5, 500)
    assert a.take(1000)[500:].tolist() == b.take(1000).tolist()
    perm = sampler.permutation(5)
    assert perm is sampler.permutation(5)
    assert not perm.flags.writeable


@pytest.mark.parametrize("name", BUILDERS)
def test_samplers_pickle_to_the_same_orders(name: str) -> None:
    sampler = BUILDERS[name](30, 4)
    before = _epoch(sampler, 1)
    clone = pickle.loads(pickle.dumps(sampler))
    assert _epoch(clone, 1) == before


@pytest.mark.parametrize(
    ("other", "field"),
    [
        (sk.RandomSampler(10, seed=1), "seed"),
        (sk.RandomSampler(11, seed=0), "source_len"),
        (sk.SequentialSampler(10), "RandomSampler"),
        (sk.ChunkedShuffleSampler(10, chunk_size=2), "RandomSampler"),
    ],
)
def test_restore_refuses_a_state_from_another_sampler(other: sk.Sampler, field: str) -> None:
    cursor = sk.RandomSampler(10, seed=0).cursor(1)
    cursor.take(3)
    with pytest.raises(sk.StateError, match=field):
        other.restore(cursor.state_dict())


def test_restore_refuses_other_chunking() -> None:
    state = sk.ChunkedShuffleSampler(50, chunk_size=5, seed=0).cursor(0).state_dict()
    with pytest.raises(sk.StateError, match="chunk_size"):
        sk.ChunkedShuffleSampler(50, chunk_size=4, window=40, seed=0).restore(state)
    with pytest.raises(sk.StateError, match="window"):
        sk.ChunkedShuffleSampler(50, chunk_size=5, window=10, seed=0).restore(state)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"position": 11}, "past the end"),
        ({"position": -1}, "position"),
        ({"epoch": "1"}, "epoch"),
        ({"epoch": True}, "epoch"),
    ],
)
def test_restore_refuses_a_broken_state(change: dict[str, object], match: str) -> None:
    sampler = sk.RandomSampler(10, seed=0)
    state = {**sampler.cursor(1).state_dict(), **change}
    with pytest.raises(sk.StateError, match=match):
        sampler.restore(state)


def test_restore_refuses_a_state_that_is_not_a_dict() -> None:
    with pytest.raises(sk.StateError, match="dict"):
        sk.SequentialSampler(3).restore([0, 1])  # type: ignore[arg-type]
    state = sk.SequentialSampler(3).cursor(0).state_dict()
    del state["position"]
    with pytest.raises(sk.StateError, match="position"):
        sk.SequentialSampler(3).restore(state)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: sk.RandomSampler(-1), ">= 0"),
        (lambda: sk.RandomSampler(2.5), "sized"),  # type: ignore[arg-type]
        (lambda: sk.SequentialSampler(True), "int"),
        (lambda: sk.RandomSampler(5, seed=-1), "seed"),
        (lambda: sk.RandomSampler(5, seed=1.0), "seed"),  # type: ignore[arg-type]
        (lambda: sk.ChunkedShuffleSampler(5, chunk_size=0), "chunk_size"),
        (lambda: sk.ChunkedShuffleSampler(5, chunk_size=2, window=0), "window"),
        (lambda: sk.RandomSampler(5).cursor(-1), "epoch"),
        (lambda: sk.RandomSampler(5).cursor(0, 6), "position"),
        (lambda: sk.RandomSampler(5).set_epoch(-2), "epoch"),
    ],
)
def test_bad_arguments_raise_config_error(build: Callable[[], object], match: str) -> None:
    with pytest.raises(sk.ConfigError, match=match) as info:
        build()
    assert isinstance(info.value, ValueError)


def test_a_dataset_gives_its_length() -> None:
    assert len(sk.RandomSampler([10, 20, 30])) == 3
    assert sk.ChunkedShuffleSampler(np.zeros(7), chunk_size=2).source_len == 7


def test_torch_style_protocol_resumes_once() -> None:
    sampler = sk.RandomSampler(20, seed=3)
    assert sampler.state_dict() == sampler.cursor(0).state_dict()
    sampler.set_epoch(2)
    expected = _epoch(sampler, 2)
    it = iter(sampler)
    head = [next(it) for _ in range(7)]
    state = _roundtrip(sampler.state_dict())
    assert state["epoch"] == 2
    assert state["position"] == 7

    other = sk.RandomSampler(20, seed=3)
    other.load_state_dict(state)
    assert other.state_dict() == state
    other.set_epoch(2)  # the same epoch keeps the loaded state
    assert head + list(other) == expected
    assert other.state_dict()["position"] == 20
    assert list(other) == expected  # the loaded state is used once

    other.load_state_dict(state)
    other.set_epoch(3)  # another epoch drops it
    assert list(other) == _epoch(sampler, 3)


def test_load_state_dict_checks_the_state_at_once() -> None:
    state = sk.RandomSampler(20, seed=3).state_dict()
    with pytest.raises(sk.StateError, match="seed"):
        sk.RandomSampler(20, seed=4).load_state_dict(state)


def test_chunked_windows_read_from_few_chunks() -> None:
    chunk, window = 10, 40
    sampler = sk.ChunkedShuffleSampler(1003, chunk_size=chunk, window=window, seed=0)
    order = np.asarray(_epoch(sampler, 1))
    assert sorted(order.tolist()) == list(range(1003))
    for start in range(0, order.size, window):
        chunks = np.unique(order[start : start + window] // chunk)
        assert chunks.size <= window // chunk + 2
    assert not np.array_equal(order, np.sort(order))


def test_chunked_windows_not_aligned_with_chunks() -> None:
    sampler = sk.ChunkedShuffleSampler(103, chunk_size=10, window=25, seed=5)
    for epoch in range(3):
        order = np.asarray(_epoch(sampler, epoch))
        assert sorted(order.tolist()) == list(range(103))
        for start in range(0, 103, 25):
            assert np.unique(order[start : start + 25] // 10).size <= 25 // 10 + 2


def test_chunked_window_of_one_keeps_chunks_contiguous() -> None:
    sampler = sk.ChunkedShuffleSampler(23, chunk_size=5, window=1, seed=2)
    order = np.asarray(_epoch(sampler, 0))
    where = np.argsort(order)  # where[i] is the position of index i
    for start in range(0, 23, 5):
        assert np.all(np.diff(where[start : start + 5]) == 1)
    assert not np.array_equal(order, np.arange(23))


def test_large_windows_built_ahead_give_the_same_order_as_built_in_place() -> None:
    from stoker._sources.block_shuffle import AHEAD_POSITIONS

    n = 3 * AHEAD_POSITIONS + 1000  # four windows, the last a short one
    sampler = sk.ChunkedShuffleSampler(n, chunk_size=AHEAD_POSITIONS // 4, window=AHEAD_POSITIONS)
    cursor = sampler.cursor(2)
    taken = np.concatenate([cursor.take(4099) for _ in range(-(-n // 4099))])
    assert np.array_equal(np.sort(taken), np.arange(n))
    for number in range(4):  # each window on its own, built with nothing ahead
        start = number * AHEAD_POSITIONS
        alone = sampler.cursor(2, start).take(AHEAD_POSITIONS)
        assert np.array_equal(alone, taken[start : start + AHEAD_POSITIONS])
    half = sampler.cursor(2, AHEAD_POSITIONS + 5)
    half.take(1)  # a window is being built ahead while the cursor is pickled
    clone = pickle.loads(pickle.dumps(half))
    assert np.array_equal(clone.take(n), taken[AHEAD_POSITIONS + 6 :])
