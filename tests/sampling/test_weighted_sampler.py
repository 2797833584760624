"""WeightedSampler: frequencies, changing weights, and the weights digest in states."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import numpy as np
import pytest

import stoker as sk


def test_draws_follow_the_weights() -> None:
    weights = np.array([1.0, 2.0, 3.0, 4.0, 0.0])
    sampler = sk.WeightedSampler(weights, num_samples=100_000, seed=0)
    draws = sampler.cursor(0).take(100_000)
    counts = np.bincount(draws, minlength=5) / draws.size
    np.testing.assert_allclose(counts, weights / weights.sum(), atol=0.01)
    assert counts[4] == 0


def test_draws_are_addressable_by_position_across_blocks() -> None:
    sampler = sk.WeightedSampler(np.arange(1.0, 51.0), num_samples=10_000, seed=3)
    whole = sampler.cursor(2).take(10_000)
    cursor = sampler.cursor(2)
    pieces = [cursor.take(size) for size in (1, 4095, 1, 4097, 3000, 7)]
    np.testing.assert_array_equal(np.concatenate(pieces), whole)
    np.testing.assert_array_equal(sampler.cursor(2, 4095).take(2), whole[4095:4097])


def test_list_and_array_weights_give_the_same_draws_and_digest() -> None:
    a = sk.WeightedSampler([1, 2, 3], seed=1)
    b = sk.WeightedSampler(np.array([1.0, 2.0, 3.0]), seed=1)
    assert a.cursor(0).state_dict() == b.cursor(0).state_dict()
    np.testing.assert_array_equal(a.cursor(0).take(3), b.cursor(0).take(3))


def test_set_weights_mid_epoch_changes_only_later_draws() -> None:
    sampler = sk.WeightedSampler([1.0, 0.0], num_samples=200, seed=0)
    cursor = sampler.cursor(0)
    before = cursor.take(100)
    sampler.set_weights([0.0, 1.0])
    after = cursor.take(100)
    assert set(before.tolist()) == {0}
    assert set(after.tolist()) == {1}

    old = sk.WeightedSampler([3.0, 1.0, 2.0], num_samples=300, seed=4)
    new = sk.WeightedSampler([1.0, 5.0, 1.0], num_samples=300, seed=4)
    mixed = sk.WeightedSampler([3.0, 1.0, 2.0], num_samples=300, seed=4)
    cursor = mixed.cursor(1)
    head = cursor.take(120)
    mixed.set_weights([1.0, 5.0, 1.0])
    tail = cursor.take(300)
    np.testing.assert_array_equal(head, old.cursor(1).take(120))
    np.testing.assert_array_equal(tail, new.cursor(1, 120).take(300))


def test_restore_uses_the_weights_of_the_state_without_set_weights() -> None:
    sampler = sk.WeightedSampler([1.0, 2.0, 3.0], num_samples=50, seed=0)
    cursor = sampler.cursor(0)
    cursor.take(20)
    state = json.loads(json.dumps(cursor.state_dict()))
    expected = cursor.take(50)
    sampler.set_weights([3.0, 2.0, 1.0])
    np.testing.assert_array_equal(sampler.restore(state).take(50), expected)
    np.testing.assert_array_equal(sampler.weights, [1.0, 2.0, 3.0])  # it goes on with them
    fresh = sk.WeightedSampler([5.0, 5.0, 1.0], num_samples=50, seed=0)  # a new process
    np.testing.assert_array_equal(fresh.restore(state).take(50), expected)


def test_a_state_saved_after_set_weights_names_the_change_at_the_next_untaken_position() -> None:
    sampler = sk.WeightedSampler([1.0, 0.0, 0.0], num_samples=100, seed=2)
    cursor = sampler.cursor(0)
    head = cursor.take(30).tolist()
    sampler.set_weights([0.0, 0.0, 1.0])
    state = json.loads(json.dumps(cursor.state_dict()))
    assert state["weight_changes"] == [[0, [1.0, 0.0, 0.0]], [30, [0.0, 0.0, 1.0]]]
    rest = cursor.take(100).tolist()
    assert set(head) == {0}
    assert set(rest) == {2}
    again = sk.WeightedSampler([1.0, 0.0, 0.0], num_samples=100, seed=2)
    assert again.restore(state).take(100).tolist() == rest


def test_loader_over_a_weighted_sampler_resumes_exactly_across_set_weights() -> None:
    def build(sampler):
        return sk.DataLoader(sk.range(0, 40), batch_size=5, sampler=sampler, prefetch=2)

    sampler = sk.WeightedSampler(np.ones(40), num_samples=200, seed=1)
    it = iter(build(sampler))
    batches, states = [], []
    for i, batch in enumerate(it):
        batches.append(batch.tolist())
        if i == 6:
            sampler.set_weights(np.r_[np.ones(10), np.zeros(30)])
        states.append(json.loads(json.dumps(it.state_dict())))
    assert max(max(b) for b in batches[-20:]) < 10
    for stop in range(6, len(batches)):
        fresh = build(sk.WeightedSampler(np.ones(40), num_samples=200, seed=1))
        assert [b.tolist() for b in fresh.iter(state=states[stop])] == batches[stop + 1 :]


def test_without_replacement_the_next_epoch_starts_with_weights_set_during_this_one() -> None:
    def build(sampler):
        return sk.DataLoader(sk.range(0, 6), batch_size=2, sampler=sampler)

    sampler = sk.WeightedSampler([1.0] * 6, num_samples=4, replacement=False, seed=0)
    loader = build(sampler)
    list(loader)
    sampler.set_weights([0, 0, 1, 1, 1, 1])
    state = json.loads(json.dumps(loader.state_dict()))
    second = [b.tolist() for b in loader]
    assert sorted(x for b in second for x in b) == [2, 3, 4, 5]
    fresh = sk.WeightedSampler([1.0] * 6, num_samples=4, replacement=False, seed=0)
    assert [b.tolist() for b in build(fresh).iter(state=state)] == second


def test_many_weights_travel_by_digest_and_must_be_registered() -> None:
    n = sk.WeightedSampler.INLINE_WEIGHTS + 1
    sampler = sk.WeightedSampler(np.ones(n), num_samples=10, seed=0)
    new = np.r_[np.zeros(n - 1), 1.0]
    sampler.set_weights(new)
    state = json.loads(json.dumps(sampler.cursor(0).state_dict()))
    assert isinstance(state["weight_changes"][0][1], str)
    fresh = sk.WeightedSampler(np.ones(n), num_samples=10, seed=0)
    with pytest.raises(sk.StateError, match="register_weights"):
        fresh.restore(state)
    fresh.register_weights(new)
    assert fresh.restore(state).take(10).tolist() == [n - 1] * 10


def test_the_state_holds_the_weights_current_when_saved() -> None:
    sampler = sk.WeightedSampler([1.0, 1.0], num_samples=10, seed=0)
    cursor = sampler.cursor(0)
    sampler.set_weights([1.0, 4.0])
    fresh = sk.WeightedSampler([1.0, 4.0], num_samples=10, seed=0)
    assert cursor.state_dict() == fresh.cursor(0).state_dict()


def test_restore_refuses_another_seed_or_mode() -> None:
    state = sk.WeightedSampler([1.0, 2.0], seed=0).cursor(0).state_dict()
    with pytest.raises(sk.StateError, match="seed"):
        sk.WeightedSampler([1.0, 2.0], seed=1).restore(state)
    with pytest.raises(sk.StateError, match="replacement"):
        sk.WeightedSampler([1.0, 2.0], replacement=False, seed=0).restore(state)
    with pytest.raises(sk.StateError, match="length"):
        sk.WeightedSampler([1.0, 2.0], num_samples=3, seed=0).restore(state)


def test_without_replacement_gives_distinct_indices_and_skips_zero_weights() -> None:
    weights = np.array([0.0, 1.0, 5.0, 0.0, 2.0, 2.0, 0.0, 9.0])
    sampler = sk.WeightedSampler(weights, num_samples=5, replacement=False, seed=2)
    for epoch in range(20):
        drawn = sampler.cursor(epoch).take(10).tolist()
        assert len(drawn) == 5
        assert len(set(drawn)) == 5
        assert not set(drawn) & {0, 3, 6}


def test_without_replacement_first_draws_follow_the_weights() -> None:
    weights = np.array([1.0, 2.0, 7.0])
    sampler = sk.WeightedSampler(weights, num_samples=3, replacement=False, seed=0)
    firsts = [int(sampler.cursor(epoch).take(1)[0]) for epoch in range(3000)]
    share = np.bincount(firsts, minlength=3) / len(firsts)
    np.testing.assert_allclose(share, weights / weights.sum(), atol=0.04)


def test_without_replacement_new_weights_apply_from_the_next_cursor() -> None:
    sampler = sk.WeightedSampler([1.0, 1.0, 1.0, 0.0], num_samples=3, replacement=False)
    cursor = sampler.cursor(0)
    first = cursor.take(1)
    state = cursor.state_dict()
    sampler.set_weights([0.0, 1.0, 1.0, 1.0])
    rest = cursor.take(3)
    assert sorted([*first.tolist(), *rest.tolist()]) == [0, 1, 2]
    assert 0 not in sampler.cursor(0).take(3).tolist()
    # the state holds the weights its epoch was drawn with
    np.testing.assert_array_equal(sampler.restore(state).take(3), rest)


def test_set_weights_from_another_thread_keeps_draws_valid() -> None:
    sampler = sk.WeightedSampler(np.ones(100), num_samples=50_000, seed=0)
    cursor = sampler.cursor(0)
    stop = threading.Event()

    def churn() -> None:
        rng = np.random.default_rng(0)
        while not stop.is_set():
            sampler.set_weights(rng.random(100) + 0.01)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        drawn = np.concatenate([cursor.take(1000) for _ in range(50)])
    finally:
        stop.set()
        thread.join()
    assert drawn.size == 50_000
    assert drawn.min() >= 0
    assert drawn.max() < 100


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: sk.WeightedSampler([1.0, 2.0, -1.0]), r"weights\[2\]"),
        (lambda: sk.WeightedSampler([1.0, float("nan")]), r"weights\[1\]"),
        (lambda: sk.WeightedSampler([float("inf"), 1.0]), r"weights\[0\]"),
        (lambda: sk.WeightedSampler([0.0, 0.0]), "all zero"),
        (lambda: sk.WeightedSampler([]), "empty"),
        (lambda: sk.WeightedSampler([[1.0], [2.0]]), "1-D"),
        (lambda: sk.WeightedSampler(["a", "b"]), "numbers"),
        (lambda: sk.WeightedSampler([1.0], num_samples=0), "num_samples"),
        (lambda: sk.WeightedSampler([1.0], seed=-1), "seed"),
        (lambda: sk.WeightedSampler([1.0], replacement="yes"), "replacement"),  # type: ignore[arg-type]
        (
            lambda: sk.WeightedSampler([1.0, 0.0, 2.0], num_samples=3, replacement=False),
            "positive weights",
        ),
        (lambda: sk.WeightedSampler([1.0, 2.0]).set_weights([1.0]), "2 weights"),
        (lambda: sk.WeightedSampler([1.0, 2.0]).set_weights([1.0, -2.0]), r"weights\[1\]"),
        (
            lambda: sk.WeightedSampler([1.0, 2.0], num_samples=2, replacement=False).set_weights(
                [1.0, 0.0]
            ),
            "positive weights",
        ),
    ],
)
def test_bad_weights_raise_config_error(build: Callable[[], object], match: str) -> None:
    with pytest.raises(sk.ConfigError, match=match):
        build()


def test_defaults() -> None:
    sampler = sk.WeightedSampler([1.0, 2.0, 3.0])
    assert len(sampler) == sampler.source_len == 3
    assert sampler.replacement
    assert sampler.seed == 0
    np.testing.assert_array_equal(sampler.weights, [1.0, 2.0, 3.0])
    assert not sampler.weights.flags.writeable
