"""Smoke tests of ``bench/memory.py`` on tiny data: it measures, prints a table, writes JSON.

Each case runs in a fresh Python process; torch's rows are tried on one case only, as
importing torch takes most of a child's time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "memory.py"


def _run(tmp_path: Path, *args: str) -> tuple[list[str], dict[str, Any]]:
    pytest.importorskip("psutil")
    report = tmp_path / "memory.json"
    command = [sys.executable, str(SCRIPT), "--scale", "0.001", "--workers", "1", *args]
    done = subprocess.run(
        [*command, "--json", str(report)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines(), json.loads(report.read_text())


def _check(result: dict[str, Any]) -> None:
    assert result["workers"] == 1
    assert result["batches"] == -(-result["records"] // 256)
    assert 0 < result["baseline_pss"] <= result["peak_pss"]
    assert result["added_pss"] == result["peak_pss"] - result["baseline_pss"]
    assert result["pss_samples"] >= 2
    assert result["data_bytes"] > 0


def test_memory_script_measures_stoker_on_both_cases(tmp_path: Path) -> None:
    lines, doc = _run(tmp_path, "--loaders", "stoker")

    assert lines[1].split()[:3] == ["case", "loader", "workers"]
    assert [line.split()[:2] for line in lines[3:5]] == [["objects", "stoker"], ["array", "stoker"]]
    assert lines[3].split()[8] == "-"  # no torch row to compare with
    assert doc["format"] == "stoker-bench-memory/1"
    assert doc["settings"]["workers"] == 1
    assert [(r["case"], r["loader"]) for r in doc["results"]] == [
        ("objects", "stoker"),
        ("array", "stoker"),
    ]
    for result in doc["results"]:
        _check(result)
        assert result["torch"] is None  # torch is imported only when it has rows


def test_memory_script_measures_torch_with_its_default_start_method(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    lines, doc = _run(tmp_path, "--cases", "array", "--loaders", "torch")

    assert lines[3].split()[:2] == ["array", "torch"]
    assert lines[3].split()[8] == "1.00x"
    (result,) = doc["results"]
    _check(result)
    assert result["start_method"].endswith("(torch default)")
    assert doc["machine"]["torch"] == result["torch"]


def test_memory_script_rejects_unknown_cases() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--cases", "objects,nope"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "unknown nope; choose from objects, array" in done.stderr
