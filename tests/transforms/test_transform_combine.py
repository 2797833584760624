import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stoker as sk
from stoker._context import SKIP, Context

CTX = Context()


def draw(record, rng):
    return (record, float(rng.random()))


# -- concat -----------------------------------------------------------------------------


@given(lengths=st.lists(st.integers(0, 6), min_size=1, max_size=5), data=st.data())
def test_concat_index_map(lengths, data):
    parts, expected, start = [], [], 0
    for n in lengths:
        parts.append(sk.range(start, start + n))
        expected += list(range(start, start + n))
        start += 100
    ds = sk.concat(parts)
    assert len(ds) == sum(lengths)
    if not expected:
        return
    positions = data.draw(st.lists(st.integers(0, len(expected) - 1), max_size=30))
    indices = np.asarray(positions, dtype=np.int64)
    records = ds._fetch(indices, CTX)
    assert records == [expected[i] for i in positions]
    if positions:
        batch = ds._gather(indices, CTX, None)
        np.testing.assert_array_equal(batch, sk.default_collate(records))
        out = np.empty(len(positions), dtype=np.int64)
        assert ds._gather(indices, CTX, out) is out
        np.testing.assert_array_equal(out, records)


def test_concat_gathers_nested_batches_across_parts():
    a = sk.from_arrays(x=np.zeros((3, 2), np.float32), y=np.arange(3))
    b = sk.from_arrays(x=np.ones((2, 2), np.float32), y=np.arange(10, 12))
    ds = sk.concat([a, b])
    indices = np.array([4, 0, 3, 2])
    expected = sk.default_collate(ds._fetch(indices, CTX))
    out = {"x": np.empty((4, 2), np.float32), "y": np.empty(4, np.int64)}
    batch = ds._gather(indices, CTX, out)
    assert batch["x"] is out["x"]
    np.testing.assert_array_equal(batch["x"], expected["x"])
    np.testing.assert_array_equal(batch["y"], [11, 0, 10, 2])


def test_concat_without_gather_in_a_part_falls_back():
    ds = sk.concat([sk.range(2), sk.from_sequence(["a", "b"])])
    assert ds._fetch(np.array([3, 0, 2]), CTX) == ["b", 0, "a"]
    assert ds._gather(np.array([3, 0]), CTX, None) is NotImplemented
    np.testing.assert_array_equal(ds._gather(np.array([1, 0]), CTX, None), [1, 0])


def test_concat_parts_get_their_own_stage_path():
    part = sk.range(4).map(draw, seeded=True)
    ds = sk.concat([part, part])
    first = ds._fetch(np.arange(8), Context(seed=1))
    assert [r[0] for r in first] == [0, 1, 2, 3] * 2
    assert [r[1] for r in first[:4]] != [r[1] for r in first[4:]]


def test_concat_keeps_skips():
    ds = sk.concat([sk.range(3).filter(lambda x: x != 1), sk.range(2)])
    assert ds.may_skip
    assert ds._fetch(np.arange(5), CTX) == [0, SKIP, 2, 0, 1]


def test_concat_errors():
    with pytest.raises(sk.ConfigError, match="at least one"):
        sk.concat([])
    with pytest.raises(sk.ConfigError, match="from_sequence"):
        sk.concat([sk.range(2), [1, 2]])
    with pytest.raises(sk.ConfigError, match="list"):
        sk.concat(sk.range(3))
    with pytest.raises(sk.ConfigError, match="streams"):
        sk.concat([sk.from_iterable(lambda: [1])])


# -- zip --------------------------------------------------------------------------------


def test_zip_records_are_tuples():
    ds = sk.zip(sk.range(3), sk.from_sequence("abc"), sk.range(10, 13))
    assert len(ds) == 3
    assert ds[1] == (1, "b", 11)
    assert ds._gather(np.array([0]), CTX, None) is NotImplemented


def test_zip_gather_is_a_tuple_written_into_out():
    ds = sk.zip(sk.range(5), sk.from_arrays(np.arange(10.0).reshape(5, 2)))
    indices = np.array([4, 1])
    expected = sk.default_collate(ds._fetch(indices, CTX))
    out = (np.empty(2, np.int64), np.empty((2, 2)))
    batch = ds._gather(indices, CTX, out)
    assert isinstance(batch, tuple)
    assert batch[0] is out[0]
    assert batch[1] is out[1]
    for got, want in zip(batch, expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_zip_lengths():
    with pytest.raises(sk.ConfigError, match=r"\[3, 5\].*strict=False"):
        sk.zip(sk.range(3), sk.range(5))
    ds = sk.zip(sk.range(3), sk.range(5), strict=False)
    assert len(ds) == 3
    with pytest.raises(sk.ConfigError):
        sk.zip()


def test_zip_skips_when_any_part_skips():
    ds = sk.zip(sk.range(4).filter(lambda x: x != 1), sk.range(4).filter(lambda x: x != 2))
    assert ds.may_skip
    assert ds._fetch(np.arange(4), CTX) == [(0, 0), SKIP, SKIP, (3, 3)]
    arrays = sk.zip(sk.from_arrays(np.zeros((2, 3))), sk.range(2).filter(lambda x: x > 0))
    assert arrays._fetch(np.arange(2), CTX)[0] is SKIP
