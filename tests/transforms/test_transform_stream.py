import pickle

import numpy as np
import pytest

import stoker as sk
from stoker._context import Context
from stoker._rng import record_rng
from stream_helpers import read_with_states


def plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    return value


def as_plain(records):
    return [plain(r) for r in records]


def numbers():
    return iter(range(23))


def noisy(x, rng):
    return (x, int(rng.integers(1000)))


def keep(record):
    return record[0] % 3 != 1


def pipeline():
    return sk.from_iterable(numbers).map(noisy, seeded=True).filter(keep).batch(4)


def test_map_filter_batch_records():
    ds = sk.from_iterable(numbers).map(lambda x: x * 2).filter(lambda x: x % 3 == 0)
    assert list(ds) == [x * 2 for x in range(23) if (x * 2) % 3 == 0]
    batches = list(sk.from_iterable(numbers).batch(10))
    assert [b.tolist() for b in batches] == [
        list(range(10)),
        list(range(10, 20)),
        [20, 21, 22],
    ]
    assert batches[0].dtype == np.int64
    dropped = sk.from_iterable(numbers).batch(10, drop_remainder=True, collate_fn=list)
    assert list(dropped) == [list(range(10)), list(range(10, 20))]


def test_seeded_stream_map_draws_by_stream_position():
    ds = sk.from_iterable(numbers).filter(lambda x: x % 2 == 1).map(noisy, seeded=True)
    ctx = Context(seed=3, epoch=1)
    records = list(ds._open(ctx, None))
    assert [r[0] for r in records] == list(range(1, 23, 2))
    expected = [int(record_rng(3, 1, n, ()).integers(1000)) for n in range(len(records))]
    assert [r[1] for r in records] == expected
    assert list(ds._open(Context(seed=3, epoch=2), None)) != records


@pytest.mark.parametrize("shard", [sk.Shard(0, 1), sk.Shard(1, 2)])
def test_resume_at_every_step_equals_the_uninterrupted_stream(shard):
    ds = pipeline()
    ctx = Context(seed=11, epoch=2, shard=shard)
    records, states = read_with_states(ds, ctx)
    assert records
    for k, state in enumerate(states):
        assert as_plain(ds._open(ctx, state)) == as_plain(records[k:])


def test_state_mirrors_the_stage_tree():
    ds = pipeline()
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    assert set(state) == {"parent"}
    assert set(state["parent"]) == {"parent"}
    assert set(state["parent"]["parent"]) == {"count", "parent"}
    assert state["parent"]["parent"]["parent"] == {"steps": state["parent"]["parent"]["count"]}


def test_public_iteration_resumes_through_load_state_dict():
    ds = pipeline()
    everything = as_plain(ds)
    it = iter(ds)
    first = next(it)
    state = ds.state_dict()
    restored = pipeline()
    restored.load_state_dict(state)
    assert as_plain([first, *restored]) == everything
    assert as_plain(restored) == everything


def test_state_dict_before_iterating_is_the_start():
    ds = pipeline()
    assert ds.state_dict() == {"parent": {"parent": {"count": 0, "parent": {"steps": 0}}}}


def test_load_state_dict_checks_the_shape_now():
    with pytest.raises(sk.StateError, match="parent"):
        pipeline().load_state_dict({"steps": 3})
    with pytest.raises(sk.StateError, match="count"):
        pipeline().load_state_dict({"parent": {"parent": {"count": "x", "parent": {}}}})


def test_argument_errors():
    stream = sk.from_iterable(numbers)
    with pytest.raises(TypeError, match="map"):
        stream.map(1)
    with pytest.raises(TypeError, match="filter"):
        stream.filter("x")
    for bad in (0, -2, 2.5, True):
        with pytest.raises(sk.ConfigError, match="batch_size"):
            stream.batch(bad)
    with pytest.raises(TypeError, match="collate_fn"):
        stream.batch(2, collate_fn=3)


def test_exhausted_batch_stream_stays_exhausted():
    cursor = sk.from_iterable(numbers).batch(20, collate_fn=list)._open(Context(), None)
    assert len(next(cursor)) == 20
    assert len(next(cursor)) == 3
    for _ in range(2):
        with pytest.raises(StopIteration):
            next(cursor)


def test_stream_pipeline_pickles_mid_iteration():
    ds = pipeline()
    it = iter(ds)
    next(it)
    again = pickle.loads(pickle.dumps(ds))
    assert as_plain(again) == as_plain(pipeline())
