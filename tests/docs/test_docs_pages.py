"""The docs pages' ```python blocks run, page by page, as a reader pastes them.

Each page's blocks, top to bottom, make one script (a page's sections build on each
other), run in a subprocess with no main guard, as a user runs them. Blocks fenced
```py are illustrations (a GPU, several hosts, names left to the reader) and are
not run.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(
    path.name for path in DOCS.glob("*.md") if "```python\n" in path.read_text(encoding="utf-8")
)


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_the_guides_have_runnable_examples():
    assert {"quickstart.md", "sources.md", "migrating.md", "checkpointing.md"} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_the_python_blocks_of_a_page_run(tmp_path, page):
    for module in ("torch", "pyarrow", "PIL"):
        pytest.importorskip(module)
    script = tmp_path / "page.py"
    script.write_text("\n".join(_python_blocks(DOCS / page)), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Traceback" not in result.stderr, result.stderr[-4000:]


def test_the_error_list_names_every_public_error():
    """The errors page's table (and the README's list) name every class in
    ``stoker.errors``: a new user looking up an error finds it."""
    from stoker import errors

    table = (DOCS / "api" / "errors.md").read_text(encoding="utf-8")
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    for name in errors.__all__:
        assert f"| `{name}` |" in table, name
        assert f"`{name}`" in readme or f"`sk.{name}`" in readme, name
