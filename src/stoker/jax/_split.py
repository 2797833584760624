"""Per-device placement: each device gets a view of its rows, no host copy in between.

stoker collates a host's batch once, into its planned buffer. To place it on several
devices, every leaf is cut into the slices the sharding gives each addressable
device; the slices are NumPy views of the batch (basic indexing never copies), they
go to their devices in one ``jax.device_put`` call, and
``jax.make_array_from_single_device_arrays`` puts the per-device arrays together
into one ``jax.Array``. The host batch is never concatenated or copied as a whole.

Two layouts are placed this way. ``device_shards``: the leaf is the whole array
(``jax.device_put`` semantics). ``process_shards``: the leaf is this process's part
of a global array whose batch dimension is ``rows * process_count``; this process's
row blocks map onto the leaf's rows in order, as in
``jax.make_array_from_process_local_data``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import NamedSharding, Sharding, SingleDeviceSharding

from ..errors import ConfigError

__all__ = ["Shards", "device_shards", "place_all", "process_shards"]


class Shards(NamedTuple):
    """One leaf cut for its devices: views, their targets, and the global layout."""

    shape: tuple[int, ...]
    sharding: Sharding
    views: list[np.ndarray]
    targets: list[Sharding]


def _target(device: jax.Device, sharding: Sharding) -> Sharding:
    return SingleDeviceSharding(device, memory_kind=sharding.memory_kind)


def rows_split(sharding: Sharding) -> tuple[int, tuple[str, ...]]:
    """How many parts a NamedSharding cuts dimension 0 into, and over which mesh axes
    (1 and none for other shardings)."""
    if not isinstance(sharding, NamedSharding) or not len(sharding.spec):
        return 1, ()
    first = sharding.spec[0]
    if first is None:
        return 1, ()
    axes = (first,) if isinstance(first, str) else tuple(first)
    return math.prod(sharding.mesh.shape[a] for a in axes), axes


def check_rows(path: str, rows: int, sharding: Sharding, processes: int) -> None:
    """ConfigError unless ``rows`` per process split evenly over the batch's devices."""
    parts, axes = rows_split(sharding)
    if (rows * processes) % parts == 0:
        return
    need = parts // math.gcd(parts, processes)
    spread = f" of {processes} processes" if processes > 1 else ""
    raise ConfigError(
        f"{path} has {rows} rows, which do not split evenly over the {parts} devices"
        f"{spread} on the mesh axes {axes} that share the batch dimension: use a "
        f"batch_size that is a multiple of {need}, and last_batch='drop' if the last "
        "batch of an epoch is short"
    )


def _indices(sharding: Sharding, shape: tuple[int, ...]) -> dict[jax.Device, tuple[slice, ...]]:
    """Each addressable device's index into an array of ``shape`` (rank 0: ``()``)."""
    found: dict[jax.Device, tuple[slice, ...]] = {}
    for device, index in sharding.addressable_devices_indices_map(shape).items():
        found[device] = () if index is None else tuple(index)
    return found


def device_shards(path: str, array: np.ndarray, sharding: Sharding) -> Shards:
    """The views of ``array`` (the whole global value) for each addressable device."""
    if array.ndim:
        check_rows(path, array.shape[0], sharding, 1)
    index = _indices(sharding, array.shape)
    views = [array if array.ndim == 0 else array[i] for i in index.values()]
    targets = [_target(d, sharding) for d in index]
    return Shards(array.shape, sharding, views, targets)


def process_shards(path: str, array: np.ndarray, sharding: Sharding, processes: int) -> Shards:
    """The views of ``array`` (this process's rows of the global batch) per device.

    The global batch has ``array.shape[0] * processes`` rows; this process's devices
    hold some blocks of them, which take the local rows in order.

    Errors:
        ConfigError: rows that do not split evenly over the devices, or a mesh whose
            devices of this process do not hold exactly ``array.shape[0]`` rows.
    """
    if array.ndim == 0:  # a per-batch scalar: the same on every host, replicated
        return device_shards(path, array, sharding)
    rows = array.shape[0]
    check_rows(path, rows, sharding, processes)
    shape = (rows * processes, *array.shape[1:])
    index = _indices(sharding, shape)
    starts = sorted({(i[0].start or 0) for i in index.values()})
    first = next(iter(index.values()))[0]
    block = (first.stop if first.stop is not None else shape[0]) - (first.start or 0)
    if block * len(starts) != rows:
        raise ConfigError(
            f"{path}: this process's devices hold {block * len(starts)} of the global "
            f"batch's {shape[0]} rows, but its loader yields {rows}: the mesh's data axis "
            "must split the batch across processes the way the loaders' shard does "
            "(build the mesh with stoker.jax.data_parallel() or fsdp())"
        )
    views = []
    for i in index.values():
        at = starts.index(i[0].start or 0) * block
        views.append(array[(slice(at, at + block), *i[1:])])
    targets = [_target(d, sharding) for d in index]
    return Shards(shape, sharding, views, targets)


def place_all(cut: Sequence[Shards]) -> list[jax.Array]:
    """Send every view to its device in one ``jax.device_put`` call; one array per leaf.

    The copies are asynchronous: this returns once they are dispatched.
    """
    views = [v for shards in cut for v in shards.views]
    targets = [t for shards in cut for t in shards.targets]
    placed: list[Any] = jax.device_put(views, targets)
    out: list[jax.Array] = []
    at = 0
    for shards in cut:
        n = len(shards.views)
        out.append(
            jax.make_array_from_single_device_arrays(
                shards.shape, shards.sharding, placed[at : at + n]
            )
        )
        at += n
    return out
