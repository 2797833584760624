"""The package layout follows the data path (``shared/STYLE.md``).

``bench/import_graph.py`` ranks every module by its stage and lists the circles in
the import graph and the imports that run back up the data path. The only circle
allowed is the ``Dataset`` <-> transform chaining methods. What is left of the
known debts is listed below: this test fails on any new circle or back-up import,
and on a debt that was paid but is still listed (then delete its line).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "import_graph.py"

# Imports that still run back up (importer, imported), to be paid off.
KNOWN_BACK_UP: set[tuple[str, str]] = set()
# Circles between modules, beyond the allowed one (sorted members).
KNOWN_CIRCLES: set[tuple[str, ...]] = set()


def _graph() -> dict[str, object]:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    result: dict[str, object] = module.analyse(ROOT / "src" / "stoker")
    return result


def test_every_module_has_a_place_on_the_data_path() -> None:
    assert _graph()["unranked"] == []


def test_no_new_import_runs_back_up_the_data_path() -> None:
    found = {tuple(pair) for pair in _graph()["back_up"]}  # type: ignore[attr-defined]
    assert found - KNOWN_BACK_UP == set(), "new imports that run back up the data path"
    assert KNOWN_BACK_UP - found == set(), "paid off: delete these from KNOWN_BACK_UP"


def test_no_new_circle() -> None:
    found = {tuple(c) for c in _graph()["bad_circles"]}  # type: ignore[attr-defined]
    assert found - KNOWN_CIRCLES == set(), "new circles in the import graph"
    assert KNOWN_CIRCLES - found == set(), "paid off: delete these from KNOWN_CIRCLES"


BELOW_THE_LOADER = ["_iterator.py", "_pass.py", "_window.py", "_progress.py", "_exec", "_epoch"]
LOADER_NAMES = {"loader", "_loader", "owner"}


def _is_loader(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id in LOADER_NAMES) or (
        isinstance(node, ast.Attribute) and node.attr in LOADER_NAMES
    )


def test_nothing_below_the_loader_reads_its_members() -> None:
    src = ROOT / "src" / "stoker"
    files = [p for name in BELOW_THE_LOADER for p in sorted((src / name).glob("**/*.py"))]
    files += [src / name for name in BELOW_THE_LOADER if name.endswith(".py")]
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and _is_loader(node.value)
            ):
                found.append(f"{path.relative_to(src)}:{node.lineno} .{node.attr}")
        for line_no, line in enumerate(text.splitlines(), 1):  # examples in docstrings
            if "DataLoader(" in line and ")._" in line:
                found.append(f"{path.relative_to(src)}:{line_no} (an example)")
    assert found == [], "hand these over (a PassSpec, a config, a worker spec) instead"
