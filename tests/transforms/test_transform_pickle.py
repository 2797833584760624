import pickle

import numpy as np

import stoker as sk
from stoker._context import SKIP, Context


def jitter(record, rng):
    return {"x": record["x"] + rng.random(), "y": record["y"]}


def even(record):
    return record["y"] % 2 == 0


def pair(x):
    return (x, -x)


def build():
    arrays = sk.from_arrays(x=np.arange(40.0).reshape(20, 2), y=np.arange(20))
    left = arrays.map(jitter, seeded=True).filter(even).shuffle(seed=4).shard(1, 2)
    right = sk.concat([sk.range(5), sk.from_sequence([7, 8, 9, 10, 11])]).map(pair)
    others = sk.range(100, 110).map(pair)
    return sk.mix([sk.zip(left, right, strict=False), sk.zip(left, others)], weights=[2, 1])


def test_pipeline_round_trips_through_plain_pickle():
    ds = build()
    ctx = Context(seed=5, epoch=3)
    indices = np.arange(len(ds))
    before = ds._fetch(indices, ctx)
    ds.set_weights([1, 3])
    again = pickle.loads(pickle.dumps(ds))
    assert again.weights == [0.25, 0.75]
    after = again._fetch(indices, ctx)
    assert len(again) == len(ds)
    for a, b in zip(before, after, strict=True):
        if a is SKIP:
            assert b is SKIP
            continue
        np.testing.assert_array_equal(a[0]["x"], b[0]["x"])
        assert a[0]["y"] == b[0]["y"]
        assert a[1] == b[1]
    assert any(r is not SKIP for r in after)
    assert any(r is SKIP for r in after)
