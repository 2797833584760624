"""Batches as trees: containers (dict, tuple, list, namedtuple, dataclass) over leaves.

The buffer pool keeps only a batch's NumPy leaves; ``flatten`` / ``unflatten`` take a
batch apart and put a batch of the same structure back together around other leaves.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["TreeDef", "flatten", "is_dataclass_instance", "is_namedtuple", "row_records"]


def is_namedtuple(obj: object) -> bool:
    """True for instances of ``collections.namedtuple`` / ``typing.NamedTuple`` classes."""
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def is_dataclass_instance(obj: object) -> TypeGuard[DataclassInstance]:
    """True for an instance of a dataclass (not the class itself)."""
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


@dataclasses.dataclass(frozen=True, slots=True)
class TreeDef:
    """The structure of a batch; ``kind`` is "leaf", "array", "dict", "tuple", "list",
    "namedtuple" or "dataclass"; ``keys`` name the children of a dict or dataclass."""

    kind: str
    cls: type | None = None
    keys: tuple[Any, ...] = ()
    children: tuple[TreeDef, ...] = ()

    def unflatten(self, leaves: list[Any]) -> Any:
        """Rebuild a tree of this structure; array positions take ``leaves`` in order,
        other leaves become None."""
        return self._build(iter(leaves))

    def _build(self, leaves: Any) -> Any:
        if self.kind == "array":
            return next(leaves)
        if self.kind == "leaf":
            return None
        built = [child._build(leaves) for child in self.children]
        if self.kind == "dict":
            return dict(zip(self.keys, built, strict=True))
        if self.kind == "tuple":
            return tuple(built)
        if self.kind == "list":
            return built
        if self.kind == "namedtuple":
            return self.cls(*built)  # type: ignore[misc]
        return self.cls(**dict(zip(self.keys, built, strict=True)))  # type: ignore[misc]


def flatten(tree: Any) -> tuple[list[np.ndarray], TreeDef]:
    """Split a batch into its NumPy array leaves and its structure."""
    leaves: list[np.ndarray] = []
    return leaves, _flatten(tree, leaves)


def row_records(treedef: TreeDef, leaves: list[np.ndarray], start: int, stop: int) -> list[Any]:
    """Rows ``start:stop`` of a batch's arrays ``leaves`` (of structure ``treedef``)
    read back as records: views of the batch.

    Example:
        >>> import numpy as np
        >>> leaves, treedef = flatten({"x": np.arange(6).reshape(3, 2)})
        >>> [r["x"].tolist() for r in row_records(treedef, leaves, 1, 3)]
        [[2, 3], [4, 5]]
    """
    return [treedef.unflatten([leaf[i] for leaf in leaves]) for i in range(start, stop)]


def _flatten(tree: Any, leaves: list[np.ndarray]) -> TreeDef:
    if isinstance(tree, np.ndarray):
        leaves.append(tree)
        return TreeDef("array")
    if isinstance(tree, Mapping):
        keys = tuple(tree)
        return TreeDef("dict", keys=keys, children=tuple(_flatten(tree[k], leaves) for k in keys))
    if is_namedtuple(tree):
        return TreeDef(
            "namedtuple", cls=type(tree), children=tuple(_flatten(v, leaves) for v in tree)
        )
    if isinstance(tree, tuple):
        return TreeDef("tuple", children=tuple(_flatten(v, leaves) for v in tree))
    if isinstance(tree, list) and tree and not _is_leaf_list(tree):
        return TreeDef("list", children=tuple(_flatten(v, leaves) for v in tree))
    if is_dataclass_instance(tree):
        names = tuple(f.name for f in dataclasses.fields(tree) if f.init)
        return TreeDef(
            "dataclass",
            cls=type(tree),
            keys=names,
            children=tuple(_flatten(getattr(tree, n), leaves) for n in names),
        )
    return TreeDef("leaf")


def _is_leaf_list(value: list[Any]) -> bool:
    # A collated column of strings/bytes/objects is a list of per-record values.
    return not isinstance(value[0], np.ndarray | Mapping | tuple | list)
