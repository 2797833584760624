"""``device_put``: batches onto devices with a sharding, a few batches ahead."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeAlias, TypeVar, overload

import jax
from jax.sharding import Sharding

from .._ahead import PlacedIterator, PlacedLoader, check_depth, placed
from ._presets import MeshPreset
from ._split import device_shards, place_all
from ._tree import check_shardings, split
from ._upfront import check_loader_rows

__all__ = ["ShardingTree", "device_put", "device_put_batch"]

B = TypeVar("B")

ShardingTree: TypeAlias = Sharding | jax.Device | MeshPreset | Mapping[Any, Any] | Sequence[Any]
"""One sharding for every array of a batch, or a dict/tuple/list of them shaped like it."""


def device_put_batch(batch: Any, sharding: ShardingTree) -> Any:
    """One batch on its devices: every NumPy array becomes a ``jax.Array``.

    Each array is cut into the slices ``sharding`` gives each addressable device;
    the slices are views of the batch (no host copy), sent in one asynchronous
    ``jax.device_put`` call and assembled with
    ``jax.make_array_from_single_device_arrays``. The array is taken as the whole
    value, as ``jax.device_put`` does: for one host's part of a global batch use
    :func:`global_batch`.

    A ``NamedSharding`` (or :class:`MeshPreset`) is cut to each array's rank: a
    rank-0 array is replicated, and a 1-D label array under
    ``PartitionSpec("data", "model")`` gets ``PartitionSpec("data")``. Values that
    are not NumPy arrays (lists of strings, None) are passed through unchanged.

    Example:
        >>> import jax, numpy as np
        >>> from stoker.jax import data_parallel, device_put_batch
        >>> batch = {"x": np.arange(6.0).reshape(2, 3), "name": ["a", "b"]}
        >>> placed = device_put_batch(batch, data_parallel(jax.devices()[:1]))
        >>> placed["x"].sharding.spec == jax.P("data"), placed["name"]
        (True, ['a', 'b'])

    Errors:
        TypeError: an array of a dtype JAX cannot hold (strings, objects), naming it.
        ConfigError: rows that do not split evenly over the devices of the batch
            axis, or a sharding tree without a sharding for some array.
    """
    leaves, rebuild = split(batch, sharding)
    cut = [device_shards(leaf.path, leaf.array, leaf.sharding) for leaf in leaves]
    return rebuild(iter(place_all(cut)))


@overload
def device_put(  # type: ignore[overload-overlap]
    iterable: Iterator[B], sharding: ShardingTree, prefetch: int = 2
) -> PlacedIterator[B, Any]: ...


@overload
def device_put(
    iterable: Iterable[B], sharding: ShardingTree, prefetch: int = 2
) -> PlacedLoader[B, Any]: ...


def device_put(
    iterable: Iterable[B] | Iterator[B], sharding: ShardingTree, prefetch: int = 2
) -> PlacedIterator[B, Any] | PlacedLoader[B, Any]:
    """Every batch of ``iterable`` placed with ``sharding``, ``prefetch`` batches ahead.

    Batches are placed as by :func:`device_put_batch`. The copies of the next
    ``prefetch`` batches are dispatched (JAX copies asynchronously) while the
    caller's step runs on the current one.

    Each batch is taken as the whole value, the same on every process: with a
    loader that reads one host's part (``shard="jax"``), use
    :func:`global_batches` instead.

    ``state_dict()`` is the state right after the last batch *yielded*, never
    after the ones held ahead, so a checkpoint taken inside the training step
    resumes at the next batch.

    Args:
        iterable: a :class:`~stoker.DataLoader` (re-iterable: each ``iter()`` is
            the next epoch, with ``state_dict()`` / ``load_state_dict()``), or one
            iterator (one pass).
        sharding: a ``jax.sharding.Sharding``, a ``jax.Device``, a
            :class:`MeshPreset` (its batch sharding), or a dict/tuple/list of them
            shaped like the batch.
        prefetch: batches placed ahead of the one yielded (0 places each batch
            when it is asked for).

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
        >>> from stoker.jax import data_parallel, device_put
        >>> loader = sk.DataLoader(sk.range(0, 8), batch_size=2)
        >>> batches = device_put(loader, data_parallel(jax.devices()[:1]))
        >>> it = iter(batches)
        >>> next(it).tolist()
        [0, 1]
        >>> it.state_dict()["batches"]  # two more are on their way already
        1
        >>> [b.tolist() for b in loader.iter(state=it.state_dict())]
        [[2, 3], [4, 5], [6, 7]]

    Errors:
        ConfigError: ``sharding`` is not a sharding (tree), ``prefetch`` is not an
            int >= 0, or a loader's batches (its ``batch_size``, or the short last
            batch of an epoch under ``last_batch="keep"``) do not split evenly over the
            devices of the batch axis, raised here. While iterating, the errors of
            :func:`device_put_batch` and of the loader reach the caller only after
            the batches already placed were yielded.
    """
    check_shardings(sharding)
    depth = check_depth(prefetch)
    check_loader_rows(iterable, sharding, 1)

    def place(batch: B) -> Any:
        return device_put_batch(batch, sharding)

    return placed(iterable, place, depth)
