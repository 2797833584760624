import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_same_batches, run_epochs


def _flat(batches):
    return [int(x) for b in batches for x in np.asarray(b).ravel()]


def test_same_seed_gives_identical_batches():
    ds = sk.range(0, 100).map(lambda x, rng: x + rng.integers(1000), seeded=True)
    a = sk.DataLoader(ds, batch_size=8, shuffle=True, seed=7)
    b = sk.DataLoader(ds, batch_size=8, shuffle=True, seed=7)
    assert_same_batches(a, b, epochs=2)


def test_different_seeds_differ():
    ds = sk.range(0, 100)
    a = run_epochs(sk.DataLoader(ds, batch_size=8, shuffle=True, seed=1))
    b = run_epochs(sk.DataLoader(ds, batch_size=8, shuffle=True, seed=2))
    assert _flat(a) != _flat(b)
    assert sorted(_flat(a)) == sorted(_flat(b)) == list(range(100))


def test_epochs_differ_but_each_is_a_permutation():
    loader = sk.DataLoader(sk.range(0, 50), batch_size=5, shuffle=True, seed=0)
    first, second = _flat(loader), _flat(loader)
    assert first != second
    assert sorted(first) == sorted(second) == list(range(50))


@pytest.mark.parametrize("prefetch", [0, 1, 2, None])
def test_prefetch_does_not_change_batches(prefetch):
    ds = sk.from_sequence([{"x": np.full(3, i), "y": i} for i in range(40)])
    ref = sk.DataLoader(ds, batch_size=6, shuffle=True, seed=3, prefetch=0)
    assert_same_batches(
        ref, sk.DataLoader(ds, batch_size=6, shuffle=True, seed=3, prefetch=prefetch), epochs=2
    )


@pytest.mark.parametrize(("n", "size"), [(10, 3), (12, 4), (7, 10), (1, 1)])
def test_keep_and_drop_count_exactly(n, size):
    keep = run_epochs(sk.DataLoader(sk.range(0, n), batch_size=size, shuffle=True))
    assert sorted(_flat(keep)) == list(range(n))
    assert len(keep) == -(-n // size)
    drop = run_epochs(sk.DataLoader(sk.range(0, n), batch_size=size, last_batch="drop"))
    assert [len(b) for b in drop] == [size] * (n // size)
    assert _flat(drop) == list(range(n // size * size))


@pytest.mark.parametrize(("n", "size", "epochs"), [(10, 3, 5), (7, 10, 4), (9, 3, 2)])
def test_rollover_carries_the_rest_into_the_next_epoch(n, size, epochs):
    loader = sk.DataLoader(sk.range(0, n), batch_size=size, shuffle=True, last_batch="rollover")
    batches = run_epochs(loader, epochs)
    assert all(len(b) == size for b in batches)
    # the batches cut the concatenated epoch orders, and only the final carry is missing
    sampler = sk.RandomSampler(n, seed=0)
    stream = [int(i) for e in range(epochs) for i in sampler.cursor(e).take(n)]
    assert _flat(batches) == stream[: len(stream) // size * size]


def test_rollover_first_batch_joins_both_epochs():
    loader = sk.DataLoader(sk.range(0, 5), batch_size=2, last_batch="rollover")
    it = iter(loader)
    assert [b.tolist() for b in it] == [[0, 1], [2, 3]]
    assert it.state_dict()["carry"] == [[0, 4]]
    assert [b.tolist() for b in loader] == [[4, 0], [1, 2], [3, 4]]
    assert len(loader) == 2


def test_len_matches_batches():
    loader = sk.DataLoader(sk.range(0, 10), batch_size=3)
    assert len(loader) == len(list(loader)) == 4
    assert len(sk.DataLoader(sk.range(0, 10), batch_size=3, last_batch="drop")) == 3


def test_filter_keeps_batches_full():
    ds = sk.range(0, 30).filter(lambda x: x % 3 != 0)
    batches = [b.tolist() for b in sk.DataLoader(ds, batch_size=4)]
    assert [len(b) for b in batches] == [4, 4, 4, 4, 4]
    assert [x for b in batches for x in b] == [x for x in range(30) if x % 3 != 0]
    with pytest.raises(TypeError, match="filter"):
        len(sk.DataLoader(ds, batch_size=4))


def test_filter_that_drops_everything_yields_nothing():
    assert list(sk.DataLoader(sk.range(0, 10).filter(lambda x: False), batch_size=4)) == []


def test_independent_iterators_over_one_loader():
    loader = sk.DataLoader(sk.range(0, 20), batch_size=5, shuffle=True, seed=0)
    a, b = iter(loader), iter(loader)
    assert (a.epoch, b.epoch) == (0, 1)
    got_a, got_b = [], []
    for x, y in zip(a, b, strict=True):
        got_a.append(x.tolist())
        got_b.append(y.tolist())
    assert got_a == [x.tolist() for x in loader.iter(epoch=0)]
    assert got_b == [x.tolist() for x in loader.iter(epoch=1)]


def test_unbatched_yields_records():
    loader = sk.DataLoader(sk.range(0, 5).map(str), batch_size=None)
    assert list(loader) == ["0", "1", "2", "3", "4"]


def test_set_weights_takes_effect_within_prefetch_batches():
    sampler = sk.WeightedSampler(np.ones(50), num_samples=400, seed=0)
    loader = sk.DataLoader(sk.range(0, 50), batch_size=10, sampler=sampler, prefetch=2)
    it = iter(loader)
    for _ in range(3):
        next(it)
    sampler.set_weights(np.eye(50)[7])  # from now on only record 7
    later = [b.tolist() for b in it]
    settled = later[3:]  # at most prefetch + 1 batches were drawn before the change
    assert settled
    assert all(x == 7 for b in settled for x in b)
