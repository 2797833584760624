"""NumPy batches as PyTorch tensors, without a copy: ``as_tensors`` and tree helpers.

``torch.from_numpy`` makes a tensor that shares the array's memory and keeps the
array alive. stoker recycles a batch buffer only when no reference to it is left
(see ``stoker._batching.pool``), so a tensor the caller holds keeps its buffer
out of the pool: it is never overwritten.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch

from .._tree import is_dataclass_instance, is_namedtuple

__all__ = ["as_tensors", "map_leaves", "pinned", "tensor_of", "tensors_in"]

_NUMERIC_KINDS = frozenset("biufc")


def tensor_of(array: np.ndarray) -> torch.Tensor | np.ndarray:
    """``array`` as a tensor sharing its memory, when PyTorch has its dtype.

    An array that a tensor cannot share is copied once: a non-writable one (a
    read-only memory map: an in-place operation on the tensor would crash the
    process), one with negative strides or a non-native byte order. Arrays of
    strings, objects or dtypes PyTorch lacks (``longdouble``) stay arrays.
    """
    if array.dtype.kind not in _NUMERIC_KINDS:
        return array
    if not array.flags.writeable or not array.dtype.isnative or min(array.strides, default=0) < 0:
        array = np.array(array, dtype=array.dtype.newbyteorder("="), order="C")
    try:
        return torch.from_numpy(array)
    except TypeError:
        return array


def map_leaves(tree: Any, fn: Callable[[Any], Any]) -> Any:
    """``tree`` rebuilt with ``fn`` applied to every leaf.

    Containers are dicts (and other mappings), tuples, namedtuples, lists and
    dataclass instances; everything else is a leaf.
    """
    if isinstance(tree, dict) and type(tree) is dict:
        return {k: map_leaves(v, fn) for k, v in tree.items()}
    if isinstance(tree, Mapping):
        items = {k: map_leaves(v, fn) for k, v in tree.items()}
        try:
            clone = copy.copy(tree)
            clone.update(items)  # type: ignore[attr-defined]
        except (TypeError, AttributeError):
            return items
        return clone
    if is_namedtuple(tree):
        return type(tree)(*(map_leaves(v, fn) for v in tree))
    if isinstance(tree, tuple):
        return tuple(map_leaves(v, fn) for v in tree)
    if isinstance(tree, list):
        return [map_leaves(v, fn) for v in tree]
    if is_dataclass_instance(tree):
        fields = {
            f.name: map_leaves(getattr(tree, f.name), fn)
            for f in dataclasses.fields(tree)
            if f.init
        }
        return dataclasses.replace(tree, **fields)
    return fn(tree)


def tensors_in(tree: Any) -> Iterator[torch.Tensor]:
    """Every tensor leaf of ``tree``, in order."""
    found: list[torch.Tensor] = []

    def visit(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
        return leaf

    map_leaves(tree, visit)
    return iter(found)


def _leaf_tensor(leaf: Any) -> Any:
    return tensor_of(leaf) if isinstance(leaf, np.ndarray) else leaf


def as_tensors(tree: Any) -> Any:
    """``tree`` with every NumPy array leaf as a ``torch.Tensor`` sharing its memory.

    The structure is kept (dict, tuple, list, namedtuple, dataclass); strings,
    bytes, tensors and other objects stay as they are. Arrays that a tensor
    cannot share are copied once (see :func:`tensor_of`).

    Example:
        >>> import numpy as np
        >>> batch = {"x": np.arange(3, dtype=np.float32), "name": ["a", "b", "c"]}
        >>> out = as_tensors(batch)
        >>> out["x"], out["name"]
        (tensor([0., 1., 2.]), ['a', 'b', 'c'])
        >>> out["x"][0] = 7.0  # the tensor shares the array's memory
        >>> float(batch["x"][0])
        7.0
    """
    return map_leaves(tree, _leaf_tensor)


def _pin_leaf(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return leaf.pin_memory() if leaf.device.type == "cpu" else leaf
    pin = getattr(leaf, "pin_memory", None)
    return pin() if callable(pin) else leaf  # a custom batch type, as PyTorch allows


def pinned(tree: Any) -> Any:
    """``tree`` with its CPU tensors copied into pinned (page-locked) memory.

    Objects with a ``pin_memory()`` method (custom batch types) are pinned by it.
    Needs CUDA.
    """
    return map_leaves(tree, _pin_leaf)
