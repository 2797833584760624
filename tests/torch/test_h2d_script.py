"""Smoke tests of ``bench/h2d.py``: without CUDA it says so; on the host it runs end to end."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "h2d.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_h2d", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_without_cuda_it_says_so_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert _script().main([]) == 0
    assert "needs a CUDA GPU" in capsys.readouterr().out


def test_on_the_host_it_prints_a_table_and_writes_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "h2d.json"
    argv = ["--device", "cpu", "--batches", "2", "--batch-mib", "1", "--repeats", "1"]
    assert _script().main([*argv, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "same batches delivered by every loader: yes" in out
    document = json.loads(report.read_text())
    assert document["format"] == "stoker-bench-h2d/1"
    rows = [r["row"] for r in document["results"]]
    assert rows == ["stoker pinned", "stoker pageable", "torch pin_memory", "bare pinned copy"]
    for row in document["results"]:
        assert row["bytes_per_epoch"] == 2 * (1 << 20)
        assert row["median_gb_per_s"] > 0
        assert row["pinned"] is False  # nothing is pinned without CUDA
