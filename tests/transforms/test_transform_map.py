import numpy as np
import pytest

import stoker as sk
from stoker._context import SKIP, Context
from stoker._rng import record_rng


def idx(*values: int) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def draw(record, rng):
    return (record, float(rng.random()))


def draws(ds, indices, ctx):
    return [r[1] for r in ds._fetch(idx(*indices), ctx)]


def test_records_and_length():
    ds = sk.range(5).map(lambda x: x * x)
    assert len(ds) == 5
    assert [ds[i] for i in range(5)] == [0, 1, 4, 9, 16]
    assert ds.__getitems__([4, 2]) == [16, 4]
    assert ds._gather(idx(0, 1), Context(), None) is NotImplemented


def test_seeded_draws_come_from_seed_epoch_index_and_stage():
    ds = sk.from_sequence(list("abcdef")).map(draw, seeded=True)
    ctx = Context(seed=7, epoch=2)
    together = draws(ds, [5, 1, 3], ctx)
    alone = [draws(ds, [i], ctx)[0] for i in (5, 1, 3)]
    assert together == alone
    assert together == [float(record_rng(7, 2, i, ()).random()) for i in (5, 1, 3)]
    assert draws(ds, [5], Context(seed=7, epoch=3)) != together[:1]
    assert draws(ds, [5], Context(seed=8, epoch=2)) != together[:1]


def test_seeded_map_under_a_shuffle_draws_at_its_own_index():
    mapped = sk.range(50).map(draw, seeded=True)
    shuffled = mapped.shuffle(seed=3)
    ctx = Context(seed=1, epoch=4)
    perm = shuffled.permutation(4)
    got = shuffled._fetch(np.arange(50), ctx)
    expected = mapped._fetch(perm, ctx.child(0))
    assert got == expected
    assert [r[0] for r in got] == perm.tolist()


def test_stacked_seeded_maps_and_zipped_branches_draw_differently():
    base = sk.range(8)
    twice = base.map(lambda x, rng: [rng.random()], seeded=True).map(
        lambda xs, rng: [*xs, rng.random()], seeded=True
    )
    for first, second in twice._fetch(np.arange(8), Context(seed=0)):
        assert first != second
    left = base.map(draw, seeded=True)
    pairs = sk.zip(left, left)._fetch(np.arange(8), Context(seed=0))
    for a, b in pairs:
        assert a[0] == b[0]
        assert a[1] != b[1]


def test_skipped_records_pass_through_without_calling_fn():
    called = []
    ds = sk.range(6).filter(lambda x: x % 2 == 0).map(lambda x: called.append(x) or x)
    assert ds._fetch(np.arange(6), Context()) == [0, SKIP, 2, SKIP, 4, SKIP]
    assert called == [0, 2, 4]
    assert ds.may_skip
    seeded = sk.range(4).filter(lambda x: x > 1).map(draw, seeded=True)
    assert seeded._fetch(np.arange(4), Context())[:2] == [SKIP, SKIP]


def test_non_callable_fn_is_a_type_error_at_construction():
    with pytest.raises(TypeError, match=r"map\(\) needs a callable, got int"):
        sk.range(3).map(3)


def test_exceptions_from_fn_propagate_unchanged():
    error = KeyError("missing")

    def fail(x):
        raise error

    ds = sk.range(3).map(fail)
    with pytest.raises(KeyError) as info:
        ds[1]
    assert info.value is error
