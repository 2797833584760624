"""What the package metadata promises: version ranges, never one exact release.

A user who has torch 2.15 and runs ``pip install "stoker[torch]"`` must keep their
torch. So every dependency and every extra declares a lower bound (the oldest
version stoker supports) and none pins one release with ``==``. The test and CI
environments fix their torch build with ``constraints.txt`` instead, which is not
part of the package.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def _requirements() -> list[tuple[str, Requirement]]:
    found = [("dependencies", Requirement(text)) for text in PROJECT["dependencies"]]
    for extra, texts in PROJECT["optional-dependencies"].items():
        found += [(f"[{extra}]", Requirement(text)) for text in texts]
    return found


def test_no_dependency_or_extra_pins_one_release():
    pinned = [
        f"{where}: {req}"
        for where, req in _requirements()
        for spec in req.specifier
        if spec.operator in ("==", "===")
    ]
    assert not pinned, "use a range (>=) and pin in constraints.txt: " + ", ".join(pinned)


def test_every_dependency_and_extra_has_a_lower_bound():
    unbounded = [
        f"{where}: {req}"
        for where, req in _requirements()
        if not any(spec.operator in (">=", ">", "~=") for spec in req.specifier)
    ]
    assert not unbounded, ", ".join(unbounded)
    assert PROJECT["optional-dependencies"], "no extras declared"
    for extra, texts in PROJECT["optional-dependencies"].items():
        assert texts, f"[{extra}] is empty"


def test_the_pins_live_in_constraints_txt_and_the_commands_use_it():
    lines = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    pins = [line for line in lines if line.strip() and not line.startswith("#")]
    assert pins, "constraints.txt pins nothing"
    torch_pin = [p for p in pins if re.match(r"torch\s*==", p)]
    assert torch_pin, pins
    torch_range = next(r for _, r in _requirements() if r.name == "torch")
    assert torch_range.specifier.contains(torch_pin[0].split("==")[1].strip())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # The README's two commands and CI install into a fresh venv under the pins.
    installs = re.findall(r"\.venv/bin/pip install [^&\n]+", readme + ci)
    assert len(installs) >= 4, installs
    for install in installs:
        assert "-c constraints.txt" in install, install


def test_the_metadata_names_where_the_project_lives():
    urls = PROJECT["urls"]
    assert {"Homepage", "Documentation", "Source", "Changelog", "Issues"} <= set(urls)
    for name, url in urls.items():
        assert url.startswith("https://"), (name, url)
    assert (ROOT / "CHANGELOG.md").is_file()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## [Unreleased]" in changelog
    assert f"## [{PROJECT['version']}]" in changelog
