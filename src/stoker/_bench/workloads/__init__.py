"""The registry of built-in workloads: one module per workload, found by listing this package.

A new benchmark joins by adding a module here that decorates its ``prepare``
function with :func:`workload`::

    @workload("ints", "1,000,000 Python ints, batch 256")
    def prepare(ctx: BenchContext) -> Prepared: ...

Workloads run in the order of their module names. A workload that needs libraries
beyond the ``[bench]`` extra, or takes long to build its data, passes
``default=False`` (it runs only when named, ``--workloads tokens``) and lists what it
imports in ``requires`` (module, extra), so that a missing library is named, with
the extra to install, before anything runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from ..base import BenchContext, Prepared

__all__ = ["Workload", "available", "workload"]

PrepareFn = Callable[[BenchContext], Prepared]


@dataclass(frozen=True)
class Workload:
    """A named workload: ``prepare(ctx)`` builds its data and its loaders.

    Attributes:
        default: part of a ``stoker bench`` run that names no workloads.
        requires: (module, extra) pairs: the modules ``prepare`` imports beyond the
            ``[bench]`` extra, and the stoker extra that installs each.
    """

    name: str
    summary: str
    prepare: PrepareFn
    default: bool = True
    requires: tuple[tuple[str, str], ...] = ()

    def missing(self) -> list[tuple[str, str]]:
        """The (module, extra) pairs of ``requires`` that cannot be imported here."""
        return [(m, extra) for m, extra in self.requires if importlib.util.find_spec(m) is None]


_REGISTRY: dict[str, Workload] = {}
_discovered = False


def workload(
    name: str, summary: str, *, default: bool = True, requires: tuple[tuple[str, str], ...] = ()
) -> Callable[[PrepareFn], PrepareFn]:
    """Register the decorated ``prepare`` function under ``name``.

    ``default`` and ``requires`` are as in :class:`Workload`.

    Errors:
        ValueError: another workload already has this name.
    """

    def register(prepare: PrepareFn) -> PrepareFn:
        if name in _REGISTRY:
            raise ValueError(f"a benchmark workload named {name!r} is already registered")
        _REGISTRY[name] = Workload(name, summary, prepare, default, requires)
        return prepare

    return register


def available() -> dict[str, Workload]:
    """Every registered workload by name, importing this package's modules on first use."""
    global _discovered
    if not _discovered:
        _discovered = True
        for module in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
            if not module.name.startswith("_"):
                importlib.import_module(f"{__name__}.{module.name}")
    # Sorted by module, whatever order the modules were first imported in.
    ordered = sorted(_REGISTRY.values(), key=lambda w: w.prepare.__module__)
    return {w.name: w for w in ordered}
