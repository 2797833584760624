"""``global_batches``: each host's batch becomes its rows of one global ``jax.Array``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, TypeVar, overload

import jax
from jax.sharding import Mesh

from .._ahead import PlacedIterator, PlacedLoader, check_depth, placed
from .._hosts import Shard
from ..errors import ConfigError
from ._presets import AxisNames, MeshPreset
from ._split import place_all, process_shards
from ._tree import split
from ._upfront import check_loader_rows

__all__ = ["global_batch", "global_batches"]

B = TypeVar("B")


def _preset(mesh: Mesh | MeshPreset, data_axis: AxisNames | None) -> MeshPreset:
    if isinstance(mesh, MeshPreset):
        if data_axis is None:
            return mesh
        return MeshPreset(mesh.mesh, data_axis, mesh.param_axis)
    if not isinstance(mesh, Mesh):
        raise ConfigError(
            f"mesh must be a jax.sharding.Mesh or a stoker.jax.MeshPreset, got "
            f"{type(mesh).__name__}"
        )
    if data_axis is None:
        raise ConfigError(
            "data_axis is missing: name the mesh axis (or axes) that split the batch, e.g. "
            f"global_batches(loader, mesh, {mesh.axis_names[0]!r})"
        )
    return MeshPreset(mesh, data_axis)


def _check_hosts(iterable: object) -> None:
    """A loader split over hosts must be split the way JAX numbers its processes."""
    shard = getattr(iterable, "shard", None)
    if not isinstance(shard, Shard) or shard.count == 1:
        return
    index, count = jax.process_index(), jax.process_count()
    if (shard.index, shard.count) != (index, count):
        raise ConfigError(
            f"the loader reads host part {shard.index} of {shard.count}, but this is JAX "
            f"process {index} of {count}: global batches put process i's rows in block i, "
            "so build the loader with shard='jax' (after jax.distributed.initialize())"
        )


def global_batch(batch: Any, mesh: Mesh | MeshPreset, data_axis: AxisNames | None = None) -> Any:
    """This host's batch as its rows of global arrays split over ``data_axis``.

    Every NumPy array of ``batch`` (``rows`` rows) becomes one ``jax.Array`` of
    ``rows * jax.process_count()`` rows, sharded as
    ``NamedSharding(mesh, PartitionSpec(data_axis))``; the result is what
    ``jax.make_array_from_process_local_data`` gives, made without a host copy:
    each local device receives a view of its rows (see :func:`device_put_batch`).
    With the presets' meshes the global batch is the hosts' batches in host
    order. A rank-0 array is replicated (it must be equal on every host); values
    that are not arrays are passed through as this host's.

    Example:
        >>> import jax, numpy as np
        >>> from stoker.jax import data_parallel, global_batch
        >>> x = global_batch({"x": np.ones((4, 2))}, data_parallel(jax.devices()[:1]))["x"]
        >>> x.shape == (4 * jax.process_count(), 2)
        True

    Errors:
        ConfigError: a batch whose rows do not split evenly over this host's devices
            on the data axis (it says which batch_size works), or a mesh whose
            devices of this process do not hold this host's rows.
        TypeError: an array of a dtype JAX cannot hold, naming it.
    """
    preset = _preset(mesh, data_axis)
    leaves, rebuild = split(batch, preset.sharding)
    processes = jax.process_count()
    cut = [process_shards(leaf.path, leaf.array, leaf.sharding, processes) for leaf in leaves]
    return rebuild(iter(place_all(cut)))


@overload
def global_batches(  # type: ignore[overload-overlap]
    iterable: Iterator[B],
    mesh: Mesh | MeshPreset,
    data_axis: AxisNames | None = None,
    prefetch: int = 2,
) -> PlacedIterator[B, Any]: ...


@overload
def global_batches(
    iterable: Iterable[B],
    mesh: Mesh | MeshPreset,
    data_axis: AxisNames | None = None,
    prefetch: int = 2,
) -> PlacedLoader[B, Any]: ...


def global_batches(
    iterable: Iterable[B] | Iterator[B],
    mesh: Mesh | MeshPreset,
    data_axis: AxisNames | None = None,
    prefetch: int = 2,
) -> PlacedIterator[B, Any] | PlacedLoader[B, Any]:
    """Every host-local batch of ``iterable`` as one global batch, ``prefetch`` ahead.

    For multi-host training: each host runs its own loader with
    ``shard="jax"`` (or ``sk.Shard(jax.process_index(), jax.process_count())``)
    and yields its ``batch_size`` rows of every global batch; this turns them into
    global ``jax.Array`` leaves of ``batch_size * jax.process_count()`` rows, split
    over ``data_axis`` (see :func:`global_batch`). On one host the global batch is
    the local batch.

    ``state_dict()`` is this host's state right after the last batch yielded; each
    host saves and restores its own.

    Args:
        iterable: a :class:`~stoker.DataLoader` (each ``iter()`` is the next epoch)
            or one iterator.
        mesh: a ``jax.sharding.Mesh``, or a :class:`MeshPreset` (then ``data_axis``
            defaults to the preset's).
        data_axis: the mesh axis, or tuple of axes, that split the batch's rows.
        prefetch: batches placed ahead of the one yielded.

    Returns:
        For a loader, a re-iterable wrapper (``len()``, ``state_dict()``,
        ``load_state_dict()``) whose every ``iter()`` is an iterator; for an
        iterator, that iterator. The iterators have ``state_dict()``, ``stats()``
        and ``close()``.

    Resources:
        Up to ``prefetch`` placed batches beyond the one yielded stay in device
        memory; the iterator's ``close()`` drops them and closes the loader's
        iterator.

    Example:
        >>> import jax, stoker as sk
        >>> from stoker.jax import fsdp, global_batches
        >>> loader = sk.DataLoader(sk.range(0, 16), batch_size=8)
        >>> preset = fsdp(devices=jax.devices()[:1])
        >>> batch = next(iter(global_batches(loader, preset)))
        >>> batch.shape, batch.sharding.spec == jax.P(("data", "fsdp"))
        ((8,), True)

    Errors:
        ConfigError: a mesh or data axis that cannot work, a bad ``prefetch``, a
            loader whose ``shard`` is not this JAX process's, or whose batches' rows
            (``batch_size``, or a short last batch under ``last_batch="keep"``) do
            not split evenly over the devices of the data axis, raised here; while
            iterating, those of :func:`global_batch`, after the batches already
            placed were yielded.
    """
    preset = _preset(mesh, data_axis)
    depth = check_depth(prefetch)
    _check_hosts(iterable)
    check_loader_rows(iterable, preset.sharding, jax.process_count())

    def place(batch: B) -> Any:
        return global_batch(batch, preset)

    return placed(iterable, place, depth)
