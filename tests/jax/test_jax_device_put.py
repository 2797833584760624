"""device_put: every batch lands on the right devices with the right values."""

import dataclasses
from typing import NamedTuple

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

import stoker as sk
import stoker.jax as sj


def _data(n=32):
    return sk.from_arrays(
        x=np.arange(n * 3, dtype=np.float32).reshape(n, 3), y=np.arange(n, dtype=np.int32)
    )


def _expected(loader, epoch=0):
    return [{k: v.copy() for k, v in b.items()} for b in loader.iter(epoch=epoch)]


def _assert_on_devices(arr, want, sharding, devices):
    """``arr`` has ``sharding`` and every device holds its rows of ``want``."""
    assert isinstance(arr, jax.Array)
    assert arr.shape == want.shape
    assert arr.dtype == want.dtype
    assert arr.sharding == sharding
    index = sharding.devices_indices_map(want.shape)
    shards = arr.addressable_shards
    assert sorted(s.device.id for s in shards) == sorted(d.id for d in devices)
    for shard in shards:
        assert shard.index == index[shard.device]
        np.testing.assert_array_equal(np.asarray(shard.data), want[shard.index])
    np.testing.assert_array_equal(np.asarray(arr), want)


def test_batches_are_split_over_eight_devices(devices):
    preset = sj.data_parallel(devices)
    loader = sk.DataLoader(_data(), batch_size=8, shuffle=True, seed=4)
    want = _expected(loader, epoch=0)
    got = list(sj.device_put(loader.iter(epoch=0), preset))
    assert len(got) == len(want) == 4
    for batch, expected in zip(got, want, strict=True):
        assert set(batch) == {"x", "y"}
        for name in ("x", "y"):
            _assert_on_devices(batch[name], expected[name], preset.sharding, devices)
        # One row per device: device i holds row i of the batch.
        rows = {s.device: np.asarray(s.data) for s in batch["y"].addressable_shards}
        assert [rows[d].tolist() for d in devices] == [[v] for v in expected["y"]]


def test_fsdp_batches_are_split_over_both_axes(devices):
    preset = sj.fsdp(4, devices=devices)
    loader = sk.DataLoader(_data(), batch_size=16)
    for batch, expected in zip(sj.device_put(loader, preset), _expected(loader), strict=True):
        _assert_on_devices(batch["x"], expected["x"], preset.sharding, devices)
        rows = {s.device: s.index[0] for s in batch["x"].addressable_shards}
        assert [rows[d] for d in devices] == [slice(2 * i, 2 * i + 2) for i in range(8)]


def test_a_tree_of_shardings_and_a_single_device(devices):
    preset = sj.data_parallel(devices)
    loader = sk.DataLoader(_data(), batch_size=8)
    tree = {"x": preset.sharding, "y": devices[3]}
    batch = next(iter(sj.device_put(loader, tree)))
    want = _expected(loader)[0]
    _assert_on_devices(batch["x"], want["x"], preset.sharding, devices)
    assert batch["y"].sharding == SingleDeviceSharding(devices[3])
    np.testing.assert_array_equal(np.asarray(batch["y"]), want["y"])


def test_a_sharding_is_cut_to_each_leafs_rank(devices):
    mesh = sj.fsdp(4, devices=devices).mesh
    sharding = NamedSharding(mesh, PartitionSpec("data", "fsdp"))

    def collate(records):
        return {
            "x": np.stack([r["x"] for r in records]),
            "y": np.stack([r["y"] for r in records]),
            "count": np.int32(len(records)),
            "names": [f"r{int(r['y'])}" for r in records],
        }

    data = sk.from_arrays(
        x=np.arange(8 * 4, dtype=np.float32).reshape(8, 4), y=np.arange(8, dtype=np.int32)
    )
    loader = sk.DataLoader(data, batch_size=4, collate_fn=collate)
    batch = next(iter(sj.device_put(loader, sharding)))
    assert batch["x"].sharding.spec == PartitionSpec("data", "fsdp")
    assert batch["y"].sharding.spec == PartitionSpec("data")
    assert batch["count"].sharding.is_fully_replicated
    assert batch["count"].shape == ()
    assert len(batch["count"].addressable_shards) == 8
    assert int(batch["count"]) == 4
    assert batch["names"] == ["r0", "r1", "r2", "r3"]  # not arrays: passed through
    np.testing.assert_array_equal(np.asarray(batch["x"]), np.arange(16).reshape(4, 4))


class Pair(NamedTuple):
    image: np.ndarray
    label: np.ndarray


@dataclasses.dataclass
class Example:
    image: np.ndarray
    tag: str


def test_namedtuple_and_dataclass_batches_keep_their_type(devices):
    preset = sj.data_parallel(devices)
    records = [Pair(np.full(2, i, np.float32), np.int32(i)) for i in range(8)]
    (batch,) = sj.device_put(sk.DataLoader(records, batch_size=8), preset)
    assert isinstance(batch, Pair)
    np.testing.assert_array_equal(np.asarray(batch.label), np.arange(8))
    examples = [Example(np.full(2, i, np.float32), f"t{i}") for i in range(8)]
    (batch,) = sj.device_put(sk.DataLoader(examples, batch_size=8), preset)
    assert isinstance(batch, Example)
    assert batch.tag == [f"t{i}" for i in range(8)]
    _assert_on_devices(
        batch.image,
        np.repeat(np.arange(8.0), 2).reshape(8, 2).astype(np.float32),
        preset.sharding,
        devices,
    )


def test_each_iter_is_the_next_epoch_and_an_iterator_is_one_pass(devices):
    preset = sj.data_parallel(devices)
    loader = sk.DataLoader(_data(), batch_size=8, shuffle=True, seed=1)
    want = [[b["y"].tolist() for b in loader.iter(epoch=e)] for e in range(2)]
    placed = sj.device_put(sk.DataLoader(_data(), batch_size=8, shuffle=True, seed=1), preset)
    assert len(placed) == 4
    for epoch in range(2):
        assert [np.asarray(b["y"]).tolist() for b in placed] == want[epoch]
    once = sj.device_put(loader.iter(epoch=1), preset)
    assert iter(once) is once
    assert [np.asarray(b["y"]).tolist() for b in once] == want[1]
    assert list(once) == []


def test_arguments_that_cannot_work_fail_when_built(devices):
    loader = sk.DataLoader(_data(), batch_size=8)
    with pytest.raises(sk.ConfigError, match="sharding is a str"):
        sj.device_put(loader, "data")
    with pytest.raises(sk.ConfigError, match=r"sharding\['y'\] is a int"):
        sj.device_put(loader, {"x": devices[0], "y": 3})
    with pytest.raises(sk.ConfigError, match="prefetch must be an int >= 0"):
        sj.device_put(loader, devices[0], prefetch=-1)


def test_a_sharding_tree_without_a_field_names_it(devices):
    loader = sk.DataLoader(_data(), batch_size=8)
    it = iter(sj.device_put(loader, {"x": devices[0]}))
    with pytest.raises(sk.ConfigError, match=r"no sharding for batch\['y'\]"):
        next(it)


def test_arrays_jax_cannot_hold_are_a_type_error_naming_the_field(devices):
    def collate(records):
        return {"y": np.array(records, np.int32), "name": np.array([str(r) for r in records])}

    loader = sk.DataLoader(list(range(8)), batch_size=8, collate_fn=collate)
    with pytest.raises(TypeError, match=r"batch\['name'\] is a NumPy array of dtype <U1"):
        next(iter(sj.device_put(loader, sj.data_parallel(devices))))


def test_rows_that_do_not_split_evenly_say_which_batch_size_works(devices):
    loader = sk.DataLoader(_data(), batch_size=6)
    with pytest.raises(sk.ConfigError, match=r"6 rows.*multiple of 8"):
        sj.device_put(loader, sj.data_parallel(devices))


def test_placed_batches_keep_their_values_while_buffers_are_recycled(devices):
    preset = sj.data_parallel(devices)
    loader = sk.DataLoader(_data(n=96), batch_size=8, shuffle=True, seed=9, prefetch=0)
    want = _expected(loader, epoch=0)
    held = list(sj.device_put(loader.iter(epoch=0), preset, prefetch=3))
    held += list(sj.device_put(loader.iter(epoch=1), preset, prefetch=3))  # reuses buffers
    for batch, expected in zip(held, want, strict=False):
        np.testing.assert_array_equal(np.asarray(batch["x"]), expected["x"])
        np.testing.assert_array_equal(np.asarray(batch["y"]), expected["y"])
