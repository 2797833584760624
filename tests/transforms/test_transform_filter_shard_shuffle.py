import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stoker as sk
from stoker._context import SKIP, Context

CTX = Context()


# -- filter -----------------------------------------------------------------------------


def test_filter_marks_removed_records_with_skip():
    ds = sk.range(7).filter(lambda x: x % 3 == 0)
    assert len(ds) == 7
    assert ds.may_skip
    assert ds._fetch(np.arange(7), CTX) == [0, SKIP, SKIP, 3, SKIP, SKIP, 6]
    assert ds[3] == 3
    assert ds._gather(np.arange(2), CTX, None) is NotImplemented


def test_filtered_out_on_direct_access():
    ds = sk.range(4).filter(lambda x: x > 1)
    with pytest.raises(sk.FilteredOut):
        ds[0]
    with pytest.raises(sk.FilteredOut):
        ds.__getitems__([2, 1])
    assert isinstance(sk.FilteredOut("x"), LookupError)


def test_filter_needs_a_callable():
    with pytest.raises(TypeError, match="filter"):
        sk.range(3).filter(None)


def test_stacked_filters():
    ds = sk.range(10).filter(lambda x: x % 2 == 0).filter(lambda x: x % 3 == 0)
    kept = [r for r in ds._fetch(np.arange(10), CTX) if r is not SKIP]
    assert kept == [0, 6]


# -- shard ------------------------------------------------------------------------------


@given(n=st.integers(1, 60), data=st.data())
def test_shards_are_strided_equal_and_disjoint(n, data):
    count = data.draw(st.integers(1, n))
    parent = sk.range(100, 100 + n)
    shards = [parent.shard(i, count) for i in range(count)]
    seen = []
    for i, shard in enumerate(shards):
        assert len(shard) == n // count
        records = shard._fetch(np.arange(len(shard)), CTX)
        assert records == [100 + i + j * count for j in range(len(shard))]
        np.testing.assert_array_equal(shard._gather(np.arange(len(shard)), CTX, None), records)
        seen += records
    assert len(set(seen)) == len(seen) == n - n % count


def test_bad_shards():
    with pytest.raises(sk.ConfigError, match="index"):
        sk.range(10).shard(3, 3)
    with pytest.raises(sk.ConfigError, match="count"):
        sk.range(10).shard(0, 0)
    with pytest.raises(sk.ConfigError, match="empty"):
        sk.range(2).shard(0, 3)


def test_shard_keeps_skips_of_its_parent():
    ds = sk.range(6).filter(lambda x: x != 2).shard(0, 2)
    assert ds.may_skip
    assert ds._fetch(np.arange(3), CTX) == [0, SKIP, 4]


# -- shuffle ----------------------------------------------------------------------------


def test_shuffle_is_a_permutation_that_changes_with_the_epoch():
    ds = sk.range(100).shuffle(seed=5)
    epoch0 = ds._fetch(np.arange(100), Context(epoch=0))
    epoch1 = ds._fetch(np.arange(100), Context(epoch=1))
    assert sorted(epoch0) == sorted(epoch1) == list(range(100))
    assert epoch0 != epoch1
    assert epoch0 == ds._fetch(np.arange(100), Context(epoch=0, seed=99))  # own seed only
    assert epoch0 != sk.range(100).shuffle(seed=6)._fetch(np.arange(100), Context(epoch=0))
    assert epoch0 == ds.permutation(0).tolist()


def test_shuffle_maps_indices_and_delegates_gather():
    parent = sk.from_arrays(np.arange(40).reshape(20, 2))
    ds = parent.shuffle(seed=1)
    indices = np.array([4, 0, 19, 4])
    perm = ds.permutation(3)
    ctx = Context(epoch=3)
    expected = parent._gather(perm[indices], ctx, None)
    np.testing.assert_array_equal(ds._gather(indices, ctx, None), expected)
    out = np.empty((4, 2), dtype=expected.dtype)
    assert ds._gather(indices, ctx, out) is out
    np.testing.assert_array_equal(out, sk.default_collate(ds._fetch(indices, ctx)))
    assert sk.from_sequence(["a"]).shuffle(0)._gather(np.array([0]), ctx, None) is NotImplemented


def test_shuffle_seed_must_be_a_non_negative_int():
    for bad in (-1, 1.5, "1", True):
        with pytest.raises(sk.ConfigError, match="seed"):
            sk.range(3).shuffle(bad)


def test_pickled_shuffle_leaves_its_permutation_behind():
    ds = sk.range(100_000).shuffle(seed=2)
    before = ds._fetch(np.arange(10), CTX)
    again = pickle.loads(pickle.dumps(ds))
    assert len(pickle.dumps(ds)) < 1000
    assert again._fetch(np.arange(10), CTX) == before
