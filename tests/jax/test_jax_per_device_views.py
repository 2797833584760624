"""Each device receives a view of its rows of the collated batch: no host copy.

``jax.device_put`` is wrapped to record what it is handed; every slice must share
memory with the batch stoker collated, and the global arrays must be built from
the per-device arrays, not from a second host batch.
"""

import jax
import numpy as np
import pytest

import stoker as sk
import stoker.jax as sj


@pytest.fixture
def handed(monkeypatch):
    """The arguments of every ``jax.device_put`` call, recorded."""
    calls = []
    real = jax.device_put

    def recording(x, *args, **kw):
        calls.append((x, args[0] if args else kw.get("device")))
        return real(x, *args, **kw)

    monkeypatch.setattr(jax, "device_put", recording)

    def refuse(*args, **kw):
        raise AssertionError("the host batch went through make_array_from_process_local_data")

    monkeypatch.setattr(jax, "make_array_from_process_local_data", refuse)
    return calls


def _batch():
    return {
        "x": np.arange(16 * 5, dtype=np.float32).reshape(16, 5).copy(),  # owns its data
        "y": np.arange(16, dtype=np.int32),
    }


@pytest.mark.parametrize("place", ["device_put_batch", "global_batch"])
def test_every_device_gets_a_view_of_the_batch(devices, handed, place):
    preset = sj.fsdp(4, devices=devices)
    batch = _batch()
    placed = getattr(sj, place)(batch, preset)
    assert len(handed) == 1  # one call places every slice of every leaf
    views, targets = handed[0]
    assert len(views) == len(targets) == 16  # 8 devices x 2 leaves
    for view in views:
        assert isinstance(view, np.ndarray)
        owner = batch["x"] if view.ndim == 2 else batch["y"]
        assert view.base is owner  # basic slicing: a view, never a copy
        assert np.shares_memory(view, owner)
        assert view.shape[0] == 2
    assert [t.device_set for t in targets[:8]] == [{d} for d in devices]
    for name in ("x", "y"):
        arr = placed[name]
        assert arr.sharding == preset.sharding
        for shard in arr.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), batch[name][shard.index])


def test_a_loaders_planned_buffer_is_sliced_not_copied(devices, handed):
    data = sk.from_arrays(x=np.arange(64 * 5, dtype=np.float32).reshape(64, 5))
    loader = sk.DataLoader(data, batch_size=16, shuffle=True, prefetch=0)
    collated = []

    def spy(batches):
        for batch in batches:
            collated.append(batch)
            yield batch

    placed = sj.device_put(spy(loader.iter(epoch=0)), sj.data_parallel(devices), prefetch=0)
    for step, batch in enumerate(placed):
        views, _ = handed[step]
        assert len(views) == 8
        for view in views:  # views into the batch the loader yielded
            assert not view.flags.owndata
            assert np.shares_memory(view, collated[step]["x"])
        np.testing.assert_array_equal(np.asarray(batch["x"]), collated[step]["x"])
    assert len(handed) == 4


def test_replicated_leaves_hand_the_whole_batch_to_each_device(devices, handed):
    batch = _batch()
    sj.device_put_batch(batch, sj.data_parallel(devices).replicated)
    views, _ = handed[0]
    assert len(views) == 16
    for view in views:
        owner = batch["x"] if view.ndim == 2 else batch["y"]
        assert view.base is owner
        assert view.shape == owner.shape
