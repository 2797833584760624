"""The JAX adapters refuse a loader whose batches cannot split over the devices when
they wrap it, not after an epoch of good batches."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import stoker as sk
import stoker.jax as sj


def test_device_put_refuses_a_batch_size_that_does_not_split(devices):
    loader = sk.DataLoader(sk.range(0, 96), batch_size=12)
    with pytest.raises(sk.ConfigError, match="multiple of 8"):
        sj.device_put(loader, sj.data_parallel(devices))


def test_device_put_refuses_a_short_last_batch_up_front(devices):
    # 100 records in batches of 8: 12 good batches, then 4 rows for 8 devices.
    loader = sk.DataLoader(sk.range(0, 100), batch_size=8)
    with pytest.raises(sk.ConfigError, match=r"last batch.*last_batch='drop'"):
        sj.device_put(loader, sj.data_parallel(devices))
    dropped = sk.DataLoader(sk.range(0, 100), batch_size=8, last_batch="drop")
    assert len(list(sj.device_put(dropped, sj.data_parallel(devices)))) == 12


def test_device_put_checks_every_sharding_of_a_tree(devices):
    mesh = jax.sharding.Mesh(devices[:4], ("data",))
    tree = {"x": NamedSharding(mesh, PartitionSpec("data")), "y": devices[0]}
    loader = sk.DataLoader(sk.from_arrays(x=np.arange(12), y=np.arange(12)), batch_size=6)
    with pytest.raises(sk.ConfigError, match="multiple of 4"):
        sj.device_put(loader, tree)
    fine = sk.DataLoader(sk.from_arrays(x=np.arange(12), y=np.arange(12)), batch_size=4)
    assert len(list(sj.device_put(fine, tree))) == 3


def test_global_batches_refuses_rows_that_do_not_split(devices):
    loader = sk.DataLoader(sk.range(0, 100), batch_size=16)  # last batch: 4 rows
    with pytest.raises(sk.ConfigError, match="last batch"):
        sj.global_batches(loader, sj.data_parallel(devices))
    with pytest.raises(sk.ConfigError, match="batch_size"):
        sj.global_batches(sk.DataLoader(sk.range(0, 96), batch_size=6), sj.data_parallel(devices))


def test_iterators_and_unknown_sizes_are_checked_as_batches_come(devices):
    # A plain iterator says nothing about its rows: the check stays per batch.
    it = iter(sk.DataLoader(sk.range(0, 12), batch_size=6))
    placed = sj.device_put(it, sj.data_parallel(devices))
    with pytest.raises(sk.ConfigError, match="multiple of 8"):
        next(placed)
    # A filter hides the last batch's size; batch_size is still checked up front.
    filtered = sk.DataLoader(sk.range(0, 100).filter(lambda x: x % 3), batch_size=8)
    sj.device_put(filtered, sj.data_parallel(devices))
