"""Batches as trees of NumPy arrays, walked together with a tree of shardings.

stoker yields batches as dicts, tuples, lists, namedtuples and dataclasses over NumPy
arrays (JAX's own pytrees know no dataclasses). ``split`` takes a batch apart into
its array leaves, each with its path (``batch['image']``) and the sharding that
applies to it, and returns the function that builds the same batch back around
other leaves. Everything that is not a NumPy array (a list of file names, None, a
Python number) is kept as it is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.sharding import NamedSharding, Sharding, SingleDeviceSharding

from .._tree import is_dataclass_instance, is_namedtuple
from ..errors import ConfigError
from ._presets import MeshPreset, partition

__all__ = ["ArrayLeaf", "check_shardings", "fit_rank", "split"]

_JAX_KINDS = "biufc"  # bool, signed, unsigned, float, complex: dtypes JAX can hold

Rebuild = Callable[[Iterator[Any]], Any]


class ArrayLeaf(NamedTuple):
    """One array of a batch: where it sits, its data, and its sharding."""

    path: str
    array: np.ndarray
    sharding: Sharding


def _as_sharding(spec: object) -> Sharding | None:
    if isinstance(spec, MeshPreset):
        return spec.sharding
    if isinstance(spec, Sharding):
        return spec
    if isinstance(spec, jax.Device):
        return SingleDeviceSharding(spec)
    return None


def check_shardings(spec: object, where: str = "sharding") -> None:
    """Raise ConfigError unless every leaf of ``spec`` is a Sharding, Device, preset or None."""
    if spec is None or _as_sharding(spec) is not None:
        return
    if isinstance(spec, Mapping):
        for key, child in spec.items():
            check_shardings(child, f"{where}[{key!r}]")
    elif isinstance(spec, tuple | list):
        for i, child in enumerate(spec):
            check_shardings(child, f"{where}[{i}]")
    elif is_dataclass_instance(spec):
        for field in dataclasses.fields(spec):
            check_shardings(getattr(spec, field.name), f"{where}.{field.name}")
    else:
        raise ConfigError(
            f"{where} is a {type(spec).__name__}: give a jax.sharding.Sharding, a "
            "jax.Device, a stoker.jax.MeshPreset, or a dict/tuple/list/dataclass of them "
            "shaped like the batch"
        )


def fit_rank(sharding: Sharding, ndim: int) -> Sharding:
    """A NamedSharding cut to ``ndim`` entries (rank 0: replicated); others unchanged."""
    if isinstance(sharding, NamedSharding) and len(sharding.spec) > ndim:
        return NamedSharding(
            sharding.mesh, partition(*sharding.spec[:ndim]), memory_kind=sharding.memory_kind
        )
    return sharding


def split(batch: Any, spec: object) -> tuple[list[ArrayLeaf], Rebuild]:
    """The array leaves of ``batch`` (each with its sharding) and a rebuild function.

    ``rebuild(iter(values))`` returns a batch of the same structure with ``values``
    in place of the array leaves, in order.

    Errors:
        TypeError: an array of a dtype JAX cannot hold (object, str, datetime),
            naming the field.
        ConfigError: a sharding tree with no sharding for some array of the batch.
    """
    leaves: list[ArrayLeaf] = []
    return leaves, _walk(batch, spec, "batch", leaves)


def _child_spec(spec: object, key: Any, field: bool = False) -> object:
    if spec is None or _as_sharding(spec) is not None:
        return spec  # one sharding for the whole subtree
    if field:
        return getattr(spec, key, None)
    if isinstance(spec, Mapping):
        return spec.get(key)
    if isinstance(spec, tuple | list) and isinstance(key, int) and key < len(spec):
        return spec[key]
    return None


def _walk(node: Any, spec: object, where: str, leaves: list[ArrayLeaf]) -> Rebuild:
    if isinstance(node, np.ndarray | np.generic):
        array = np.asarray(node)
        if array.dtype.kind not in _JAX_KINDS:
            raise TypeError(
                f"{where} is a NumPy array of dtype {array.dtype}, which JAX cannot hold: "
                "turn it into numbers in a map, or keep it as a list (lists of strings "
                "and other Python objects are passed through unchanged)"
            )
        sharding = _as_sharding(spec)
        if sharding is None:
            raise ConfigError(
                f"the sharding tree has no sharding for {where}: give one for every array "
                "of the batch, or a single sharding for all"
            )
        leaves.append(ArrayLeaf(where, array, fit_rank(sharding, array.ndim)))
        return _next
    if isinstance(node, Mapping):
        keys = list(node)
        subs = [_walk(node[k], _child_spec(spec, k), f"{where}[{k!r}]", leaves) for k in keys]
        return lambda it: {k: sub(it) for k, sub in zip(keys, subs, strict=True)}
    if isinstance(node, tuple | list):
        subs = [_walk(v, _child_spec(spec, i), f"{where}[{i}]", leaves) for i, v in enumerate(node)]
        if is_namedtuple(node):
            cls = type(node)
            return lambda it: cls(*[sub(it) for sub in subs])
        if isinstance(node, tuple):
            return lambda it: tuple(sub(it) for sub in subs)
        return lambda it: [sub(it) for sub in subs]
    if is_dataclass_instance(node):
        make: Any = type(node)
        names = [f.name for f in dataclasses.fields(node) if f.init]
        subs = [
            _walk(getattr(node, n), _child_spec(spec, n, field=True), f"{where}.{n}", leaves)
            for n in names
        ]
        return lambda it: make(**{n: sub(it) for n, sub in zip(names, subs, strict=True)})
    return lambda it: node  # not an array: passed through unchanged


def _next(it: Iterator[Any]) -> Any:
    return next(it)
