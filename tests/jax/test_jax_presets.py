"""Mesh presets: which device holds which rows of the batch, and parameter layouts."""

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import stoker as sk
import stoker.jax as sj


def test_data_parallel_puts_every_device_on_one_data_axis(devices):
    preset = sj.data_parallel(devices)
    assert preset.mesh.axis_names == ("data",)
    assert list(preset.mesh.devices.flat) == devices
    assert preset.data_axis == "data"
    assert preset.data_size == 8
    assert preset.sharding == NamedSharding(preset.mesh, PartitionSpec("data"))
    rows = preset.sharding.devices_indices_map((16, 3))
    assert [rows[d][0] for d in devices] == [slice(2 * i, 2 * i + 2) for i in range(8)]


def test_default_devices_are_ordered_by_process_then_id():
    preset = sj.data_parallel()
    order = [(d.process_index, d.id) for d in preset.mesh.devices.flat]
    assert order == sorted(order)
    assert len(order) == len(jax.devices())


def test_fsdp_splits_the_batch_over_both_axes_in_device_order(devices):
    preset = sj.fsdp(4, devices=devices)
    assert preset.mesh.axis_names == ("data", "fsdp")
    assert dict(preset.mesh.shape) == {"data": 2, "fsdp": 4}
    assert preset.mesh.devices.tolist() == [devices[:4], devices[4:]]
    assert preset.data_axis == ("data", "fsdp")
    assert preset.data_size == 8
    rows = preset.sharding.devices_indices_map((8, 5))
    assert [rows[d] for d in devices] == [(slice(i, i + 1), slice(None)) for i in range(8)]


def test_fsdp_default_puts_one_process_on_the_fsdp_axis(devices):
    preset = sj.fsdp(devices=devices)
    assert dict(preset.mesh.shape) == {"data": 1, "fsdp": 8}


def test_fsdp_parameters_are_split_over_fsdp_and_replicated_over_data(devices):
    preset = sj.fsdp(4, devices=devices)
    params = {"w": np.zeros((6, 8)), "b": np.zeros(8), "odd": np.zeros((3, 5)), "s": np.zeros(())}
    shardings = preset.param_sharding(params)
    assert shardings["w"].spec == PartitionSpec(None, "fsdp")
    assert shardings["b"].spec == PartitionSpec("fsdp")
    assert shardings["odd"].is_fully_replicated
    assert shardings["s"].is_fully_replicated
    w = jax.device_put(np.arange(48.0).reshape(6, 8), shardings["w"])
    # Devices of one "data" row hold disjoint quarters; the two rows hold the same.
    assert {s.data.shape for s in w.addressable_shards} == {(6, 2)}
    cols = {s.device: s.index[1] for s in w.addressable_shards}
    assert cols[devices[1]] == cols[devices[5]] == slice(2, 4)


def test_data_parallel_replicates_parameters(devices):
    preset = sj.data_parallel(devices)
    assert preset.param_sharding({"w": np.zeros((8, 8))})["w"].is_fully_replicated
    assert preset.named(None, "data").spec == PartitionSpec(None, "data")


def test_bad_presets_are_config_errors(devices):
    with pytest.raises(sk.ConfigError, match="positive divisor of the 8 devices"):
        sj.fsdp(3, devices=devices)
    with pytest.raises(sk.ConfigError, match="positive divisor"):
        sj.fsdp(0, devices=devices)
    with pytest.raises(sk.ConfigError, match="devices is empty"):
        sj.data_parallel([])
    mesh = sj.data_parallel(devices).mesh
    with pytest.raises(sk.ConfigError, match="'model', which is not an axis"):
        sj.MeshPreset(mesh, ("data", "model"))
    with pytest.raises(sk.ConfigError, match="param_axis 'fsdp'"):
        sj.MeshPreset(mesh, "data", param_axis="fsdp")
