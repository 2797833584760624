"""Batches placed ahead never leak into the state: it is that of the last one yielded."""

import json

import numpy as np
import pytest

import stoker as sk
import stoker.jax as sj

N, BATCH = 40, 8  # 5 batches an epoch


def _loader(**kw):
    data = sk.from_arrays(x=np.arange(N * 2, dtype=np.float32).reshape(N, 2), y=np.arange(N))
    return sk.DataLoader(data, batch_size=BATCH, shuffle=True, seed=7, **kw)


def _ys(batches):
    return [np.asarray(b["y"]).tolist() for b in batches]


@pytest.mark.parametrize("adapter", ["device_put", "global_batches"])
@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_state_after_batch_k_resumes_at_batch_k_plus_1(devices, adapter, prefetch):
    preset = sj.data_parallel(devices)
    epochs = [_ys(_loader().iter(epoch=e)) for e in range(2)]
    for k in range(len(epochs[0]) + 1):
        if adapter == "device_put":
            placed = sj.device_put(_loader(), preset, prefetch=prefetch)
        else:
            placed = sj.global_batches(_loader(), preset, prefetch=prefetch)
        it = iter(placed)
        head = [np.asarray(next(it)["y"]).tolist() for _ in range(k)]
        assert head == epochs[0][:k]
        state = json.loads(json.dumps(it.state_dict()))
        assert state == placed.state_dict()
        assert state["batches"] == k
        rest = _ys(sj.device_put(_loader().iter(state=state), preset))
        assert rest == epochs[0][k:], (k, prefetch)


def test_state_right_after_creation_and_after_exhaustion(devices):
    preset = sj.data_parallel(devices)
    epochs = [_ys(_loader().iter(epoch=e)) for e in range(2)]
    placed = sj.device_put(_loader(), preset, prefetch=2)
    assert placed.state_dict() == _loader().state_dict()  # before any pass
    it = iter(placed)
    start = it.state_dict()
    assert start["epoch"] == 0
    assert start["batches"] == 0
    assert _ys(sj.device_put(_loader().iter(state=start), preset)) == epochs[0]
    assert _ys(it) == epochs[0]
    end = it.state_dict()  # after StopIteration: the start of the next epoch
    assert end["epoch"] == 1
    assert end["batches"] == 0
    assert placed.state_dict() == end
    assert _ys(sj.device_put(_loader().iter(state=end), preset)) == epochs[1]
    assert _ys(placed) == epochs[1]  # the next iter() is the next epoch


def test_load_state_dict_makes_the_next_pass_resume(devices):
    preset = sj.data_parallel(devices)
    epoch0 = _ys(_loader().iter(epoch=0))
    first = sj.device_put(_loader(), preset)
    it = iter(first)
    next(it), next(it)
    saved = json.dumps(first.state_dict())
    second = sj.device_put(_loader(), preset)
    second.load_state_dict(json.loads(saved))
    assert _ys(second) == epoch0[2:]


def _fails_at(bad):
    def check(record):
        if int(record["y"]) == bad:
            raise KeyError(f"record {bad} is broken")
        return record

    return check


@pytest.mark.usefixtures("no_leaks")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_loading_error_comes_after_the_batches_held_ahead(devices, num_workers):
    preset = sj.data_parallel(devices)
    data = sk.from_arrays(x=np.zeros((N, 2), np.float32), y=np.arange(N)).map(_fails_at(19))
    loader = sk.DataLoader(
        data,
        batch_size=BATCH,
        num_workers=num_workers,
        worker_mode="thread" if num_workers else "auto",
    )
    with loader:
        it = iter(sj.device_put(loader, preset, prefetch=4))
        assert np.asarray(next(it)["y"]).tolist() == list(range(8))
        assert it.state_dict()["batches"] == 1
        assert np.asarray(next(it)["y"]).tolist() == list(range(8, 16))
        assert it.state_dict()["batches"] == 2  # batch 3 (records 16-23) failed, held back
        with pytest.raises(KeyError, match="record 19 is broken"):
            next(it)
        assert it.state_dict()["batches"] == 2


def test_a_placement_error_comes_after_the_batches_held_ahead(devices):
    # 20 records in batches of 8: the short last batch cannot split over 8 devices.
    # (A loader is refused up front; an iterator's batches are checked as they come.)
    data = sk.from_arrays(y=np.arange(20))
    it = sj.device_put(iter(sk.DataLoader(data, batch_size=8)), sj.data_parallel(devices))
    assert len(_ys([{"y": next(it)["y"]}])) == 1
    next(it)
    assert it.state_dict()["batches"] == 2
    with pytest.raises(sk.ConfigError, match=r"4 rows.*last_batch='drop'"):
        next(it)
    assert it.state_dict()["batches"] == 2
    kept = sk.DataLoader(data, batch_size=8, last_batch="drop")
    assert len(list(sj.device_put(kept, sj.data_parallel(devices)))) == 2
