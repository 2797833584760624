"""Smoke tests of ``stoker bench``: tiny data, every workload, the table and the JSON shape.

The command runs in-process with the hidden ``--scale`` option, which shrinks every
data size; nothing here looks at timings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker._bench import workloads
from stoker._bench.base import BenchContext, Prepared, Runner
from stoker._cli import main

# 60,000 ints (235 batches) and a 60 MB memmap (1,220 records: 5 batches, so both the
# exact and the fingerprint comparison run).
SCALE = "0.06"
COLUMNS = ["workload", "loader", "samples/s", "GB/s", "vs torch", "vs bare", "1st batch s"]
# The quick workloads (ints' two rows with workers run on tiny records);
# tests/bench/test_bench_workers.py covers the ones with workers.
EXPECTED_ROWS = {
    "ints": ["stoker", "stoker (sk.range)", "stoker 2 threads", "stoker auto, 2 workers", "torch"],
    "ints_map": ["stoker", "torch"],
    "memmap": ["stoker", "torch", "bare np.take"],
}


def _bench(tmp_path: Path, *args: str) -> int:
    return main(["bench", "--scale", SCALE, "--cache-dir", str(tmp_path / "cache"), *args])


def test_bench_prints_a_table_and_writes_verified_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "out" / "results.json"

    workloads = ",".join(EXPECTED_ROWS)
    assert _bench(tmp_path, "--workloads", workloads, "--repeats", "2", "--json", str(report)) == 0

    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("workload"))
    assert header.split()[:2] == COLUMNS[:2]
    for column in COLUMNS:
        assert column in header
    for workload, loaders in EXPECTED_ROWS.items():
        for loader in loaders:
            assert any(line.startswith(workload) and f" {loader} " in line for line in lines)
    assert "FAIL" not in out
    assert "verified: 10 loaders produced the expected batches" in out

    doc = json.loads(report.read_text())
    assert doc["format"] == "stoker-bench/1"
    assert doc["verification_ok"] is True
    assert {"cpu_count", "platform", "processor", "python", "numpy", "torch", "stoker"} <= set(
        doc["machine"]
    )
    assert doc["settings"]["repeats"] == 2
    assert [w["name"] for w in doc["workloads"]] == list(EXPECTED_ROWS)
    for w in doc["workloads"]:
        assert [row["loader"] for row in w["rows"]] == EXPECTED_ROWS[w["name"]]
        for row in w["rows"]:
            assert len(row["seconds"]) == len(row["first_batch_seconds"]) == 2
            assert row["min_s"] <= row["median_s"] <= row["max_s"]
            assert row["first_batch_median_s"] > 0
            assert row["first_batch_vs_torch"] > 0
            assert row["warm_median_s"] is None
            assert row["samples"] == w["params"]["records"]
            assert row["vs_torch"] > 0
        checks = w["verification"]["checks"]
        assert [c["loader"] for c in checks] == EXPECTED_ROWS[w["name"]]
        assert all(c["ok"] and c["batches"] > 0 for c in checks)
    memmap = doc["workloads"][-1]
    assert all(c["exact"] == 4 < c["batches"] for c in memmap["verification"]["checks"])
    assert all(row["vs_bare"] > 0 for row in memmap["rows"])


def test_bench_reuses_the_generated_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("--workloads", "memmap", "--loaders", "bare", "--repeats", "1")
    assert _bench(tmp_path, *args) == 0
    assert "writing" in capsys.readouterr().err
    assert _bench(tmp_path, *args) == 0
    assert "writing" not in capsys.readouterr().err


def test_bench_without_torch_runs_stoker_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes ``import torch`` fail
    assert _bench(tmp_path, "--workloads", "ints", "--repeats", "1") == 0
    out = capsys.readouterr().out
    assert "torch not installed: pip install 'stoker[torch]' to compare" in out
    rows = [line for line in out.splitlines() if line.startswith("ints ")]
    assert [row.split()[1] for row in rows] == ["stoker"] * 4


def _broken(ctx: BenchContext) -> Prepared:
    def reference() -> Any:
        return iter([np.arange(4), np.arange(4, 8)])

    def wrong() -> Any:
        return [np.arange(4), np.arange(4, 8)[::-1]]

    return Prepared(
        samples=8, record_bytes=8, runners=(Runner("x", "stoker", wrong),), reference=reference
    )


def test_bench_fails_loudly_on_different_batches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workloads.available()
    broken = workloads.Workload("broken", "batches that differ", _broken)
    monkeypatch.setitem(workloads._REGISTRY, "broken", broken)
    report = tmp_path / "r.json"

    assert _bench(tmp_path, "--workloads", "broken", "--repeats", "1", "--json", str(report)) == 1

    out = capsys.readouterr().out
    assert "FAIL: broken / x: batches differ from the reference: batch 1" in out
    assert json.loads(report.read_text())["verification_ok"] is False


def test_bench_rejects_unknown_workloads(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        _bench(tmp_path, "--workloads", "ints,nope")
    assert exc.value.code == 2


def test_bench_lists_workloads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == sorted(names)  # in the order of their module names
    assert {*EXPECTED_ROWS, "jpeg", "memmap_workers", "io_latency", "skewed"} <= set(names)


def test_bench_prints_the_sizes_it_really_uses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--quick and the scale change the sizes; the printed summaries say the real ones."""
    args = ("--quick", "--workloads", "ints,memmap", "--loaders", "stoker", "--repeats", "1")
    report = tmp_path / "results.json"
    assert main(["bench", "--scale", "0.02", "--cache-dir", str(tmp_path / "c"), *args,
                 "--json", str(report)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    doc = json.loads(report.read_text())
    memmap = next(w for w in doc["workloads"] if w["name"] == "memmap")
    records = memmap["params"]["records"]  # 256 MB x 0.02 of 48 KiB records
    assert records == int(256_000_000 * 0.02) // (3 * 64 * 64 * 4)
    memmap_line = f"{memmap['params']['file_bytes'] / 1e9:.2f} GB np.memmap of {records:,}"
    ints_line = f"{int(1_000_000 * 0.02):,} Python ints"
    for text in (captured.out, captured.err, json.dumps(doc)):
        assert memmap_line in text
        assert ints_line in text
    assert "~" not in captured.out
    assert "1,000,000" not in captured.out
