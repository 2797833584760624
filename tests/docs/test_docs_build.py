"""The docs site builds with ``mkdocs build --strict``: every page, link and docstring.

``--strict`` turns every warning into a failure: a broken link between pages, a page
missing from the navigation, a docstring that griffe cannot parse, a cross-reference
that does not resolve. The Benchmarks page's tables are generated from
``bench/results/*.json`` during the build.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed"
)


def _load_hook():
    spec = importlib.util.spec_from_file_location("bench_page", ROOT / "docs_hooks/bench_page.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(site),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    # The build's own helpers (docs_hooks/) are not published as pages or files.
    assert not [p.name for p in site.rglob("*.py")]
    for page in ("quickstart", "migrating", "sources", "checkpointing", "jax-multihost"):
        assert (site / page / "index.html").exists(), page
    # One API page per public module, with the module's public names.
    api = (site / "api" / "stoker" / "index.html").read_text(encoding="utf-8")
    for name in ("stoker.DataLoader", "stoker.from_parquet", "stoker.LoaderStats"):
        assert f'id="{name}"' in api, name
    for module in ("torch", "jax", "vision", "testing", "errors"):
        assert f'id="stoker.{module}' in (site / "api" / module / "index.html").read_text(
            encoding="utf-8"
        ), module
    # The docstrings' Sphinx roles and "Example:" sections are rewritten for Markdown.
    for role in (":class:", ":func:", ":meth:"):
        assert role not in api, role
    assert "Examples" in api
    bench = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert "bench-tables" not in bench  # the marker was replaced by the tables
    assert "vs PyTorch, same run" in bench


def test_the_benchmark_tables_come_from_the_json_files(tmp_path):
    """Two runs of one series: medians over runs, same-run ratios, the machine."""
    hook = _load_hook()

    def run(stoker_s, torch_s, created):
        rows = [
            {"loader": "stoker", "samples_per_s": stoker_s, "vs_torch": stoker_s / torch_s},
            {"loader": "torch", "samples_per_s": torch_s, "vs_torch": 1.0},
        ]
        return {
            "format": "stoker-bench/1",
            "created": created,
            "machine": {"cpus_usable": 2, "processor": "Test CPU", "python": "3.11"},
            "settings": {"repeats": 3},
            "workloads": [{"name": "ints", "summary": "1,000 ints", "rows": rows}],
        }

    (tmp_path / "box-run1.json").write_text(json.dumps(run(300.0, 100.0, "2026-01-01T00")))
    (tmp_path / "box-run2.json").write_text(json.dumps(run(500.0, 100.0, "2026-01-02T00")))
    (tmp_path / "other-format.json").write_text(json.dumps({"format": "stoker-bench-pad/1"}))
    page = hook.render(sorted(tmp_path.glob("*.json")))
    assert "### box" in page
    assert "Test CPU" in page
    assert "*Runs:* 2" in page
    assert "| stoker | 400 | 300 - 500 | **4.00x** [3.00, 5.00] |" in page
    assert "other-format" not in page
