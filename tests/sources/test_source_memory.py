import math
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stoker as sk
from stoker._context import Context

CTX = Context(seed=0, epoch=0)


def idx(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def same(a, b) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))


def test_records_and_length_of_a_list_of_strings():
    ds = sk.from_sequence(["a", "b", "c"])
    assert len(ds) == 3
    assert [ds[i] for i in range(3)] == ["a", "b", "c"]
    assert ds[-1] == "c"
    assert ds.__getitems__([2, 0]) == ["c", "a"]
    assert ds._fetch(idx(1), CTX) == ["b"]
    assert ds._gather(idx(0, 1), CTX, None) is NotImplemented


def test_out_of_range_index_is_an_index_error():
    ds = sk.from_sequence([1, 2])
    with pytest.raises(IndexError):
        ds[2]


def test_sequence_is_referenced_not_copied():
    records = [{"a": 1}, {"a": 2}]
    ds = sk.from_sequence(records)
    assert ds[1] is records[1]


@pytest.mark.parametrize(
    ("records", "dtype"),
    [([3, 1, 2], np.int64), ([0.5, -1.0, 2.25], np.float64), ([True, False, True], np.bool_)],
)
def test_numeric_records_are_gathered_like_collate(records, dtype):
    ds = sk.from_sequence(records)
    indices = idx(2, 0, 2, 1)
    fetched = ds._fetch(indices, CTX)
    assert all(same(a, records[i]) for a, i in zip(fetched, indices.tolist(), strict=True))
    expected = sk.default_collate(fetched)
    batch = ds._gather(indices, CTX, None)
    assert batch.dtype == dtype == expected.dtype
    np.testing.assert_array_equal(batch, expected)
    out = np.empty(4, dtype=dtype)
    assert ds._gather(indices, CTX, out) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("records", [[1, 2.0], [1, True], [2**70, 1], [np.int64(1), 2]])
def test_mixed_or_huge_numbers_keep_their_own_objects(records):
    ds = sk.from_sequence(records)
    assert ds._gather(idx(0, 1), CTX, None) is NotImplemented
    got = ds._fetch(idx(0, 1), CTX)
    assert all(same(a, b) for a, b in zip(got, records, strict=True))


def test_empty_sequence():
    ds = sk.from_sequence([])
    assert len(ds) == 0
    assert ds._fetch(idx(), CTX) == []


@pytest.mark.parametrize(
    ("value", "hint"),
    [((x for x in range(3)), "from_iterable"), (np.arange(3), "from_arrays"), ({1, 2}, "list")],
)
def test_non_sequences_are_rejected_with_a_hint(value, hint):
    with pytest.raises(sk.ConfigError, match=hint):
        sk.from_sequence(value)


def test_range_object_is_a_sequence():
    ds = sk.from_sequence(range(5, 10))
    assert ds._fetch(idx(0, 4), CTX) == [5, 9]


scalars = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1),
    st.lists(st.floats(), min_size=1),
    st.lists(st.booleans(), min_size=1),
    st.lists(st.one_of(st.integers(), st.floats(), st.text()), min_size=1),
)


@given(records=scalars, data=st.data())
def test_fetch_and_gather_agree_with_the_sequence(records, data):
    ds = sk.from_sequence(records)
    positions = data.draw(st.lists(st.integers(0, len(records) - 1), max_size=20))
    indices = np.asarray(positions, dtype=np.int64)
    fetched = ds._fetch(indices, CTX)
    assert all(same(a, records[i]) for a, i in zip(fetched, positions, strict=True))
    batch = ds._gather(indices, CTX, None)
    if batch is not NotImplemented and positions:
        np.testing.assert_array_equal(batch, sk.default_collate(fetched))


def test_pickle_round_trip_keeps_the_records():
    for records in ([1, 2, 3], [0.1, math.nan], ["x", "y"]):
        ds = pickle.loads(pickle.dumps(sk.from_sequence(records)))
        got = ds._fetch(idx(0, 1), CTX)
        assert all(same(a, b) for a, b in zip(got, records[:2], strict=True))


def test_pickled_numeric_dataset_carries_the_compact_copy_only():
    records = list(range(100_000))
    size = len(pickle.dumps(sk.from_sequence(records)))
    assert size < 8 * len(records) + 1000
