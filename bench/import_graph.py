"""The import graph of ``src/stoker``: circles, imports that run back up, module sizes.

Every ``import`` and ``from ... import`` of a stoker module counts, wherever it is
written (module level, inside a function, under ``TYPE_CHECKING``): each one ties
two modules together. Modules are ranked by the data path order of
``shared/STYLE.md`` (``RANKS`` below); an import from a module to one of a higher
rank (a later stage, or the loader) "runs back up". The one allowed exception is
the ``Dataset`` and ``IterDataset`` chaining methods, which build transform nodes
(``_dataset`` / ``_iterdataset`` -> ``_transforms``, and ``_transforms`` / ``_sources``
nodes returning datasets).

Usage::

    python bench/import_graph.py [--json] [--src src/stoker]

Exits 1 when there is a circle (other than the allowed one) or a back-up import,
so a test can run it.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

PACKAGE = "stoker"

# Data path order (STYLE.md): a module may import modules of its own rank or lower.
# Matched by longest prefix of the dotted name below ``stoker``.
RANKS: dict[str, int] = {
    # leaves every stage may use
    "errors": 0,
    "_rng": 0,
    "_worker_info": 0,
    "_torch_types": 0,
    "_stats": 0,
    "_reads": 0,
    "_source_caches": 0,
    "_source_advice": 0,
    "_tally": 0,
    "_verdict": 0,
    "_progress": 0,
    "_watchdog": 0,
    "_typing": 0,
    "_shm": 0,
    "_deadline": 0,
    "_decode": 0,
    "_collate": 0,
    "_tree": 0,
    "_background": 0,
    # description of a loader
    "_config": 1,
    "_state": 1,
    "_hosts": 1,
    "_context": 1,
    "_tuning": 1,
    # the sampler protocol (what a sampler and its cursor are, and their state): the
    # sources offer block-aligned orders of their own on it (ds.shuffle_sampler())
    "_sampling.base": 1,
    "_sampling.stateful": 1,
    # what the config and the pipeline decide, worked out once
    "_settings": 2,
    "_sizing": 1,
    # stage 1-4
    "_dataset": 2,
    "_iterdataset": 2,
    "_sources": 3,
    "_sampling": 4,
    "_transforms": 5,
    "_elastic": 5,
    "_batching": 6,
    # 2-4 as the parent sees them
    "_epoch": 7,
    # 5: executors
    "_exec": 8,
    # 6: the window
    "_window": 9,
    # the loader and its iterator
    "_loader": 10,
    "_iterator": 10,
    "_pass": 10,
    # the public surface, adapters, tools
    "__init__": 11,
    "testing": 11,
    "torch": 11,
    "jax": 11,
    "vision": 11,
    "_ahead": 11,
    "_cli": 11,
    "_explain": 11,
    "_bench": 11,
}

# The Dataset <-> transform chaining methods: the one circle that is wanted.
ALLOWED_UP = (
    ("_dataset", "_transforms"),
    ("_dataset", "_sources"),
    ("_iterdataset", "_transforms"),
    ("_iterdataset", "_sources"),
)


def module_name(path: Path, src: Path) -> str:
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def rank(name: str) -> int | None:
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in RANKS:
            return RANKS[key]
    return None


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """The stoker modules ``path`` (module ``name``) imports, as names below ``stoker``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def resolve(target: str) -> str | None:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        return target or None

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    got = resolve(alias.name.removeprefix(PACKAGE).lstrip("."))
                    if got:
                        found.add(got)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                if node.level - 1 > len(package):
                    continue
                stem = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == PACKAGE or node.module.startswith(PACKAGE + ".")):
                stem = node.module.removeprefix(PACKAGE).lstrip(".")
            else:
                continue
            for alias in node.names:  # ``from . import x`` may name a module
                full = f"{stem}.{alias.name}" if stem else alias.name
                got = full if full in modules else resolve(stem)
                if got:
                    found.add(got)
    found.discard(name)
    found.discard("__init__")  # ``from . import x`` through the package itself
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def allowed(a: str, b: str) -> bool:
    return any(a == x and (b == y or b.startswith(y + ".")) for x, y in ALLOWED_UP)


def is_chaining_circle(comp: list[str]) -> bool:
    """A circle made only of ``_dataset`` / ``_iterdataset`` and the nodes their
    chaining methods build."""
    bases = ("_dataset", "_iterdataset")
    return any(b in comp for b in bases) and all(
        m in bases or m.startswith(("_transforms", "_sources")) for m in comp
    )


def analyse(src: Path) -> dict[str, object]:
    files = {module_name(p, src): p for p in sorted(src.rglob("*.py"))}
    modules = set(files)
    graph = {name: imports_of(path, name, modules) for name, path in files.items()}
    up = []
    unranked = sorted(m for m in modules if rank(m) is None)
    for a, targets in sorted(graph.items()):
        ra = rank(a)
        for b in sorted(targets):
            rb = rank(b)
            if ra is not None and rb is not None and rb > ra and not allowed(a, b):
                up.append([a, b])
    comps = circles(graph)
    rooms: dict[str, set[str]] = {}
    for a, targets in graph.items():
        rooms.setdefault(a.split(".")[0], set()).update(b.split(".")[0] for b in targets)
    for room, targets in rooms.items():
        targets.discard(room)
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in sorted(files.items())
    }
    return {
        "modules": len(modules),
        "lines": sum(sizes.values()),
        "circles": comps,
        "bad_circles": [c for c in comps if not is_chaining_circle(c)],
        "room_circles": circles(rooms),
        "back_up": up,
        "unranked": unranked,
        "sizes": sizes,
        "imports": {k: sorted(v) for k, v in sorted(graph.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    parser.add_argument("--src", default=str(Path(__file__).parent.parent / "src" / PACKAGE))
    parser.add_argument("--top", type=int, default=15, help="largest modules to list")
    args = parser.parse_args(argv)
    result = analyse(Path(args.src))
    bad = bool(result["bad_circles"] or result["back_up"] or result["unranked"])
    if args.json:
        print(json.dumps(result, indent=1))
        return int(bad)
    print(f"{result['modules']} modules, {result['lines']} lines")
    comps: list[list[str]] = result["circles"]  # type: ignore[assignment]
    print(f"circles: {len(comps)}")
    for comp in comps:
        tag = " (allowed: Dataset chaining)" if is_chaining_circle(comp) else ""
        print(f"  {' <-> '.join(comp)}{tag}")
    rcomps: list[list[str]] = result["room_circles"]  # type: ignore[assignment]
    print(f"circles between rooms (top-level modules and folders): {len(rcomps)}")
    for comp in rcomps:
        print(f"  {' <-> '.join(comp)}")
    ups: list[list[str]] = result["back_up"]  # type: ignore[assignment]
    print(f"imports that run back up the data path: {len(ups)}")
    for a, b in ups:
        print(f"  {a} -> {b}")
    if result["unranked"]:
        print(f"modules without a rank (add them to RANKS): {result['unranked']}")
    sizes: dict[str, int] = result["sizes"]  # type: ignore[assignment]
    print(f"largest modules (of {len(sizes)}):")
    for name, n in sorted(sizes.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"  {n:5d}  {name}")
    return int(bad)


if __name__ == "__main__":
    sys.exit(main())
