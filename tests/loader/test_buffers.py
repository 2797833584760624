import numpy as np

import stoker as sk


def _arrays(n=64):
    return sk.from_arrays(x=np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3), y=np.arange(n))


def test_a_held_batch_keeps_its_values_after_100_more_batches():
    loader = sk.DataLoader(_arrays(), batch_size=4, shuffle=True, seed=0)
    it = iter(loader)
    held = next(it)
    view = held["x"][1:]  # a view keeps the buffer busy too
    snapshot = {k: v.copy() for k, v in held.items()}
    view_snapshot = view.copy()
    seen = 0
    while seen < 100:
        for _ in it:
            seen += 1
        it = iter(loader)
    np.testing.assert_array_equal(held["x"], snapshot["x"])
    np.testing.assert_array_equal(held["y"], snapshot["y"])
    np.testing.assert_array_equal(view, view_snapshot)


def test_buffers_are_recycled_when_released():
    loader = sk.DataLoader(_arrays(), batch_size=4, prefetch=0)
    it = iter(loader)
    for _ in it:
        pass
    stats = it.stats()
    assert stats.recycled_batches >= stats.batches - 2
    assert stats.allocated_batches <= 2


def test_recycled_batches_are_correct_on_the_record_path():
    ds = sk.from_sequence([np.full((2, 2), i, dtype=np.int32) for i in range(50)])
    loader = sk.DataLoader(ds.map(lambda a: a + 1), batch_size=5, shuffle=True, seed=1)
    kept = []
    for batch in loader:
        assert all(np.all(row == row[0, 0]) for row in batch)
        kept.append(batch[:, 0, 0].copy())
    assert sorted(np.concatenate(kept).tolist()) == list(range(1, 51))
    it = iter(loader)
    for _ in it:
        pass
    assert it.stats().recycled_batches > 0


def test_holding_every_batch_never_overwrites():
    loader = sk.DataLoader(_arrays(40), batch_size=4)
    held = list(loader)
    assert [b["y"].tolist() for b in held] == [list(range(i, i + 4)) for i in range(0, 40, 4)]
