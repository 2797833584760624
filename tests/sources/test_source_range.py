import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stoker as sk
from stoker._context import Context

CTX = Context(seed=0, epoch=0)


@given(
    start=st.integers(-1000, 1000),
    stop=st.integers(-1000, 1000),
    step=st.integers(-7, 7).filter(bool),
)
def test_records_match_python_range(start, stop, step):
    expected = range(start, stop, step)
    ds = sk.range(start, stop, step)
    assert len(ds) == len(expected)
    indices = np.arange(len(expected), dtype=np.int64)[::-1]
    fetched = ds._fetch(indices, CTX)
    assert fetched == [expected[i] for i in indices.tolist()]
    assert all(type(x) is int for x in fetched)
    batch = ds._gather(indices, CTX, None)
    assert batch.dtype == np.int64
    assert batch.tolist() == fetched
    if fetched:
        np.testing.assert_array_equal(batch, sk.default_collate(fetched))


def test_one_argument_counts_from_zero():
    ds = sk.range(4)
    assert [ds[i] for i in range(4)] == [0, 1, 2, 3]
    assert ds[-1] == 3


def test_gather_writes_into_out():
    ds = sk.range(10, 100, 5)
    out = np.empty(3, dtype=np.int64)
    assert ds._gather(np.array([0, 2, 17]), CTX, out) is out
    assert out.tolist() == [10, 20, 95]


def test_values_near_the_int64_limits():
    top = 2**63 - 1
    ds = sk.range(top - 2, top)
    assert ds._fetch(np.array([1]), CTX) == [top - 1]
    assert ds._gather(np.array([0, 1]), CTX, None).tolist() == [top - 2, top - 1]


def test_bad_arguments():
    with pytest.raises(sk.ConfigError, match="step"):
        sk.range(0, 10, 0)
    with pytest.raises(sk.ConfigError, match="int64"):
        sk.range(0, 2**64)
    with pytest.raises(TypeError):
        sk.range(1.5)


def test_pickle_and_repr():
    ds = pickle.loads(pickle.dumps(sk.range(3, 9, 2)))
    assert [ds[i] for i in range(len(ds))] == [3, 5, 7]
    assert repr(ds) == "RangeDataset(3, 9, 2)"
