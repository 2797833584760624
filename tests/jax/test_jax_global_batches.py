"""global_batches on one process: the global batch is the local batch, split over the mesh.

The multi-process case (two jax.distributed processes) is tests/multihost.
"""

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import stoker as sk
import stoker.jax as sj


def _loader(n=32, batch_size=8, **kw):
    data = sk.from_arrays(
        x=np.arange(n * 3, dtype=np.float32).reshape(n, 3), y=np.arange(n, dtype=np.int32)
    )
    return sk.DataLoader(data, batch_size=batch_size, **kw)


def _check(batch, want, sharding, devices):
    for name, expected in want.items():
        arr = batch[name]
        assert arr.shape == expected.shape
        assert arr.sharding == sharding
        index = sharding.devices_indices_map(expected.shape)
        assert {s.device for s in arr.addressable_shards} == set(devices)
        for shard in arr.addressable_shards:
            assert shard.index == index[shard.device]
            np.testing.assert_array_equal(np.asarray(shard.data), expected[shard.index])


def test_one_process_global_batch_is_the_local_batch(devices):
    mesh = Mesh(np.array(devices), ("data",))
    loader = _loader(shuffle=True, seed=2)
    want = [{k: v.copy() for k, v in b.items()} for b in loader.iter(epoch=0)]
    got = list(sj.global_batches(loader.iter(epoch=0), mesh, "data"))
    assert len(got) == len(want) == 4
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    for batch, expected in zip(got, want, strict=True):
        _check(batch, expected, sharding, devices)


def test_fsdp_preset_global_batches(devices):
    preset = sj.fsdp(2, devices=devices)
    loader = _loader(batch_size=16)
    want = [{k: v.copy() for k, v in b.items()} for b in loader.iter(epoch=0)]
    placed = sj.global_batches(loader, preset)
    for batch, expected in zip(placed, want, strict=True):
        _check(batch, expected, preset.sharding, devices)
        rows = {s.device: s.index[0] for s in batch["y"].addressable_shards}
        assert [rows[d] for d in devices] == [slice(2 * i, 2 * i + 2) for i in range(8)]


def test_an_axis_tuple_and_a_preset_with_another_axis(devices):
    preset = sj.fsdp(4, devices=devices)
    batch = next(iter(sj.global_batches(_loader(), preset.mesh, ("data", "fsdp"))))
    assert batch["x"].sharding.spec == PartitionSpec(("data", "fsdp"))
    # Split over "data" only: each row block is replicated over the 4 "fsdp" devices.
    batch = next(iter(sj.global_batches(_loader(), preset, "data")))
    assert batch["x"].sharding.spec == PartitionSpec("data")
    rows = {s.device: s.index[0] for s in batch["x"].addressable_shards}
    assert rows[devices[0]] == rows[devices[3]] == slice(0, 4)
    assert rows[devices[4]] == slice(4, 8)


def test_bad_meshes_and_axes_fail_when_built(devices):
    mesh = Mesh(np.array(devices), ("data",))
    with pytest.raises(sk.ConfigError, match="data_axis is missing"):
        sj.global_batches(_loader(), mesh)
    with pytest.raises(sk.ConfigError, match="'batch', which is not an axis"):
        sj.global_batches(_loader(), mesh, "batch")
    with pytest.raises(sk.ConfigError, match=r"mesh must be a jax\.sharding\.Mesh"):
        sj.global_batches(_loader(), NamedSharding(mesh, PartitionSpec("data")), "data")
    with pytest.raises(sk.ConfigError, match="prefetch must be"):
        sj.global_batches(_loader(), mesh, "data", prefetch=1.5)


def test_a_local_batch_that_does_not_split_over_this_hosts_devices(devices):
    # Refused when the loader is wrapped; an iterator is checked batch by batch.
    with pytest.raises(sk.ConfigError, match=r"4 rows.*8 devices.*multiple of 8"):
        sj.global_batches(_loader(batch_size=4), sj.data_parallel(devices))
    it = sj.global_batches(iter(_loader(batch_size=4)), sj.data_parallel(devices))
    with pytest.raises(sk.ConfigError, match=r"4 rows.*8 devices.*multiple of 8"):
        next(it)


def test_rows_are_counted_for_every_process(devices, monkeypatch):
    # Two processes with 4 devices each need a local batch_size that is a multiple of 4.
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    preset = sj.data_parallel(devices)
    with pytest.raises(sk.ConfigError, match=r"6 rows.*8 devices of 2 processes.*multiple of 4"):
        sj.global_batch({"y": np.arange(6)}, preset)
    # Here every device is this process's: they hold all 16 global rows, not its 8.
    with pytest.raises(sk.ConfigError, match=r"hold 16 of the global batch's 16 rows.*yields 8"):
        sj.global_batch({"y": np.arange(8)}, preset)


def test_non_array_values_stay_local_and_scalars_are_replicated(devices):
    batch = {"y": np.arange(8, dtype=np.int32), "n": np.int32(8), "ids": list("abcdefgh")}
    placed = sj.global_batch(batch, sj.data_parallel(devices))
    assert placed["ids"] == list("abcdefgh")
    assert placed["n"].sharding.is_fully_replicated
    assert int(placed["n"]) == 8
    np.testing.assert_array_equal(np.asarray(placed["y"]), np.arange(8))


def test_a_loader_sharded_unlike_the_jax_processes_is_refused(devices, monkeypatch):
    preset = sj.data_parallel(devices)
    with pytest.raises(sk.ConfigError, match=r"host part 0 of 2, but this is JAX process 0 of 1"):
        sj.global_batches(_loader(shard=sk.Shard(0, 2)), preset)
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with pytest.raises(sk.ConfigError, match="shard='jax'"):
        sj.global_batches(_loader(shard=sk.Shard(1, 2)), preset)
    sj.global_batches(_loader(shard=sk.Shard(0, 2)), preset)  # process 0 of 2: fine
