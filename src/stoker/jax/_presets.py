"""Mesh presets: a device mesh together with the axes that split the batch.

``data_parallel()`` lays every device on one ``"data"`` axis. ``fsdp()`` builds a
2-D ``("data", "fsdp")`` mesh: the batch is split over both axes (every device reads
its own rows) while parameters are split over ``"fsdp"`` only.

Devices are ordered by process, then by id, so each host's devices hold one
contiguous block of the global batch, in host order: exactly the slice that host's
loader yields under ``shard="jax"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..errors import ConfigError

__all__ = ["MeshPreset", "data_parallel", "fsdp"]

AxisNames = str | tuple[str, ...]


@dataclass(frozen=True)
class MeshPreset:
    """A mesh and the axis (or axes) its batch dimension is split over.

    Args:
        mesh: the device mesh.
        data_axis: the mesh axis, or tuple of axes, that split the batch's rows.
        param_axis: the mesh axis that :meth:`param_sharding` splits parameters
            over (None: parameters are replicated).

    Example:
        >>> import jax
        >>> from stoker.jax import MeshPreset
        >>> mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
        >>> preset = MeshPreset(mesh, "data")
        >>> preset.sharding.spec == jax.P("data")
        True
        >>> preset.replicated.is_fully_replicated
        True

    Errors:
        ConfigError: an axis that the mesh does not have.
    """

    mesh: Mesh
    data_axis: AxisNames
    param_axis: str | None = None

    def __post_init__(self) -> None:
        names = self.mesh.axis_names
        for axis in _axes(self.data_axis):
            if axis not in names:
                raise ConfigError(
                    f"data_axis {self.data_axis!r} names {axis!r}, which is not an axis of "
                    f"the mesh (its axes: {names})"
                )
        if self.param_axis is not None and self.param_axis not in names:
            raise ConfigError(
                f"param_axis {self.param_axis!r} is not an axis of the mesh (its axes: {names})"
            )

    @property
    def batch_spec(self) -> PartitionSpec:
        """``PartitionSpec(data_axis)``: rows split over the data axis, the rest whole."""
        return partition(self.data_axis)

    @property
    def sharding(self) -> NamedSharding:
        """The sharding of a batch leaf (a rank-0 leaf is replicated when placed)."""
        return NamedSharding(self.mesh, self.batch_spec)

    @property
    def replicated(self) -> NamedSharding:
        """A full copy on every device of the mesh."""
        return NamedSharding(self.mesh, partition())

    @property
    def data_size(self) -> int:
        """Devices the batch's rows are split over: a batch must have a multiple of
        this many rows (globally; see :func:`~stoker.jax.global_batches`)."""
        return int(np.prod([self.mesh.shape[a] for a in _axes(self.data_axis)]))

    def named(self, *spec: Any) -> NamedSharding:
        """``NamedSharding(mesh, PartitionSpec(*spec))``, e.g. ``preset.named(None, "fsdp")``."""
        return NamedSharding(self.mesh, partition(*spec))

    def param_sharding(self, params: Any) -> Any:
        """A sharding for every array of ``params`` (a pytree of arrays or shapes' owners).

        Each parameter is split over ``param_axis`` along its largest dimension that
        the axis size divides (the first such, on a tie); parameters with no such
        dimension, scalars, and every parameter when ``param_axis`` is None are
        replicated.

        Example:
            >>> import numpy as np
            >>> from stoker.jax import fsdp
            >>> preset = fsdp(1, devices=jax.devices()[:1])
            >>> specs = preset.param_sharding({"w": np.zeros((4, 8)), "b": np.zeros(8)})
            >>> specs["w"].spec == jax.P(None, "fsdp"), specs["b"].spec == jax.P("fsdp")
            (True, True)
        """
        axis = self.param_axis
        size = 1 if axis is None else self.mesh.shape[axis]

        def one(leaf: Any) -> NamedSharding:
            shape = tuple(np.shape(leaf))
            fits = [d for d, n in enumerate(shape) if n % size == 0 and n >= size]
            if axis is None or not fits:
                return self.replicated
            dim = max(fits, key=lambda d: shape[d])
            return self.named(*[axis if d == dim else None for d in range(len(shape))])

        return jax.tree_util.tree_map(one, params)


def partition(*axes: Any) -> PartitionSpec:
    """``PartitionSpec(*axes)`` (whose constructor is untyped)."""
    return PartitionSpec(*axes)  # type: ignore[no-untyped-call]


def _axes(axis: AxisNames) -> tuple[str, ...]:
    return (axis,) if isinstance(axis, str) else tuple(axis)


def _ordered(devices: Sequence[jax.Device] | None) -> list[jax.Device]:
    if devices is None:
        return sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    found = list(devices)
    if not found:
        raise ConfigError("devices is empty: pass at least one device (or None for all)")
    return found


def data_parallel(devices: Sequence[jax.Device] | None = None) -> MeshPreset:
    """Every device on one ``"data"`` axis: each holds its own rows of the batch.

    Args:
        devices: the devices, in the order of the batch's row blocks (default: all
            devices, ordered by process then id).

    Example:
        >>> from stoker.jax import data_parallel
        >>> preset = data_parallel()
        >>> preset.mesh.axis_names, preset.data_axis
        (('data',), 'data')
        >>> preset.data_size == len(jax.devices())
        True
    """
    found = _ordered(devices)
    return MeshPreset(Mesh(np.array(found, dtype=object), ("data",)), "data")


def fsdp(
    fsdp_size: int | None = None, *, devices: Sequence[jax.Device] | None = None
) -> MeshPreset:
    """A ``("data", "fsdp")`` mesh for fully sharded data parallelism.

    The batch's rows are split over both axes (every device reads its own rows);
    :meth:`MeshPreset.param_sharding` splits parameters over ``"fsdp"`` and
    replicates them over ``"data"``.

    Args:
        fsdp_size: devices on the ``"fsdp"`` axis (default: the devices of one
            process, so parameters are gathered within a host and gradients are
            averaged across hosts).
        devices: as for :func:`data_parallel`.

    Example:
        >>> from stoker.jax import fsdp
        >>> preset = fsdp()
        >>> preset.mesh.axis_names, preset.data_axis, preset.param_axis
        (('data', 'fsdp'), ('data', 'fsdp'), 'fsdp')

    Errors:
        ConfigError: ``fsdp_size`` is not a positive divisor of the number of devices.
    """
    found = _ordered(devices)
    first = found[0].process_index
    size = sum(d.process_index == first for d in found) if fsdp_size is None else fsdp_size
    if not isinstance(size, int) or isinstance(size, bool) or size < 1 or len(found) % size != 0:
        raise ConfigError(
            f"fsdp_size must be a positive divisor of the {len(found)} devices, got {fsdp_size!r}"
        )
    grid = np.array(found, dtype=object).reshape(len(found) // size, size)
    return MeshPreset(Mesh(grid, ("data", "fsdp")), ("data", "fsdp"), param_axis="fsdp")
