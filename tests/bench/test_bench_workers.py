"""Smoke tests of the ``stoker bench`` workloads with workers, on tiny data.

Real thread and process workers run here (and torch's, when it is installed); nothing
looks at timings, only at the rows, the verification, the targets and the JSON.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stoker._bench import workloads
from stoker._bench.base import BenchContext, Prepared, Runner, Target
from stoker._bench.verify import digest, verify_runner
from stoker._bench.workloads import jpeg
from stoker._cli import main

# 80 JPEGs (2 batches), a 20 MB memmap (406 records, 2 batches), 163 records with
# 2 ms of simulated I/O (6 batches) and 80 skewed records (5 batches, one slow record).
SCALE = "0.02"
EXPECTED_ROWS = {
    "jpeg": [
        "stoker auto",
        "stoker auto unmarked",
        "stoker all auto",
        "stoker process",
        "stoker thread",
        "torch",
    ],
    "memmap_workers": ["stoker process x2", "torch x2"],
    "io_latency": ["stoker x16", "stoker thread x64", "stoker all auto", "torch x16"],
    "skewed": ["stoker unordered x16", "stoker ordered x16", "torch x16"],
}
TARGETS = {
    "jpeg": [
        ("stoker auto", "speed", 1.5),
        ("stoker auto", "first_batch", 0.5),
        ("stoker auto unmarked", "first_batch", 0.6),
        ("stoker process", "first_batch", 1.5),
    ],
    "memmap_workers": [("stoker process x2", "speed", 3.0)],
    "io_latency": [("stoker x16", "speed", 1.5), ("stoker thread x64", "of_limit", 0.85)],
    "skewed": [("stoker unordered x16", "speed", 2.0)],
}


def _bench(tmp_path: Path, *args: str) -> int:
    return main(["bench", "--scale", SCALE, "--cache-dir", str(tmp_path / "cache"), *args])


def test_worker_workloads_run_verified_against_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    report = tmp_path / "results.json"
    names = ",".join(EXPECTED_ROWS)

    assert _bench(tmp_path, "--workloads", names, "--repeats", "1", "--json", str(report)) == 0

    out = capsys.readouterr().out
    assert "FAIL" not in out
    peers = sum(importlib.util.find_spec(name) is not None for name in ("grain", "spdl"))
    assert f"verified: {15 + peers} loaders produced the expected batches" in out
    assert "jpeg            stoker auto -> thread" in out
    assert "limit: io_latency / stoker thread x64:" in out
    assert "of its limit of 32,000" in out
    target_lines = [line for line in out.splitlines() if line.startswith("target ")]
    assert len(target_lines) == sum(map(len, TARGETS.values()))
    assert all(line.split(":")[0] in ("target met", "target not met") for line in target_lines)
    # The run ends calmly: how many targets were met here, and where they are explained.
    met = sum(line.startswith("target met:") for line in target_lines)
    lines = out.rstrip().splitlines()
    closing = lines[-4:-1]  # then "wrote results.json"
    assert lines[-1] == f"wrote {report}"
    assert closing[0].startswith("verified: ")
    assert closing[1] == (
        f"targets: {met} of {len(target_lines)} met on this machine; "
        "see docs/benchmarks.md for what they mean"
    )
    assert closing[2].startswith("total ")
    assert not [line for line in closing if "MISSED" in line or "FAIL" in line]

    doc = json.loads(report.read_text())
    assert doc["verification_ok"] is True
    by_name = {w["name"]: w for w in doc["workloads"]}
    assert list(by_name) == list(EXPECTED_ROWS)
    for name, loaders in EXPECTED_ROWS.items():
        w = by_name[name]
        assert [row["loader"] for row in w["rows"] if row["kind"] != "bare"] == loaders
        targets = [(t["loader"], t["measure"], t["bound"]) for t in w["targets"]]
        assert targets == TARGETS[name]
        assert all(t["value"] > 0 and isinstance(t["met"], bool) for t in w["targets"])
        speed = [t for t in w["targets"] if t["measure"] == "speed"]
        assert all(t["warm"] > 0 for t in speed)
        for row in w["rows"]:
            assert row["samples"] == w["params"]["records"]
            assert row["first_batch_median_s"] > 0
            assert len(row["warm_seconds"]) == 1
            assert row["warm_vs_torch"] > 0
            assert row["worker_mode"] == (None if row["kind"] == "torch" else row["worker_mode"])
        assert all(c["ok"] and c["batches"] > 0 for c in w["verification"]["checks"])
    modes = {
        row["loader"]: row["worker_mode"]
        for row in by_name["jpeg"]["rows"]
        if row["kind"] != "bare"  # Grain and SPDL, where installed
    }
    assert modes == {
        "stoker auto": "thread",
        "stoker auto unmarked": "process",
        "stoker all auto": "thread",
        "stoker process": "process",
        "stoker thread": "thread",
        "torch": None,
    }
    assert by_name["memmap_workers"]["rows"][0]["worker_mode"] == "process"
    assert by_name["io_latency"]["rows"][1]["limit_samples_per_s"] == 32_000
    assert by_name["io_latency"]["rows"][1]["of_limit"] > 0
    unordered = by_name["skewed"]["verification"]["checks"][0]
    assert unordered["ordered"] is False
    assert unordered["exact"] == unordered["batches"] == 5


def test_jpeg_files_are_written_once_and_reused(tmp_path: Path) -> None:
    logged: list[str] = []
    paths = jpeg.image_files(tmp_path, 3, logged.append)
    assert [Path(p).name for p in paths] == ["000000.jpg", "000001.jpg", "000002.jpg"]
    assert logged[0].startswith("jpeg: writing 3 JPEG files")
    first = Path(paths[1]).read_bytes()

    logged.clear()
    assert jpeg.image_files(tmp_path, 2, logged.append) == paths[:2]
    assert jpeg.image_files(tmp_path, 3, logged.append) == paths
    assert logged == []
    Path(paths[1]).unlink()
    jpeg.image_files(tmp_path, 3, logged.append)
    assert logged[0].startswith("jpeg: writing 1 JPEG files")
    assert Path(paths[1]).read_bytes() == first  # the content depends only on the index
    assert jpeg.decode(first).shape == (256, 256, 3)


def test_targets_without_torch_are_not_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _bench(tmp_path, "--workloads", "skewed", "--loaders", "stoker", "--repeats", "1") == 0
    out = capsys.readouterr().out
    assert "target not measured: skewed / stoker unordered x16: - torch's samples/s" in out
    assert "targets: none measured (they compare with torch, not run here)" in out
    assert "limit: skewed / stoker unordered x16:" in out


def _batches() -> list[np.ndarray]:
    return [np.arange(i * 4, i * 4 + 4) for i in range(5)]


def _prepared(*runners: Runner, targets: tuple[Target, ...] = ()) -> Prepared:
    return Prepared(
        samples=20,
        record_bytes=8,
        runners=runners,
        reference=lambda: iter(_batches()),
        targets=targets,
    )


def test_unordered_runners_are_compared_as_a_multiset() -> None:
    shuffled = Runner("shuffled", "stoker", lambda: _batches()[::-1], ordered=False)
    in_order = Runner("in order", "stoker", lambda: _batches()[::-1])
    doubled = Runner("doubled", "stoker", lambda: [*_batches()[:4], _batches()[0]], ordered=False)
    prepared = _prepared(shuffled, in_order, doubled)

    ok = verify_runner(prepared, shuffled)
    assert (ok.ok, ok.ordered, ok.batches, ok.exact) == (True, False, 5, 5)
    assert not verify_runner(prepared, in_order).ok
    bad = verify_runner(prepared, doubled)
    assert not bad.ok
    assert bad.detail == (
        "as a multiset: 1 of 5 batches are not in the reference, 1 of its 5 are missing"
    )


def test_digest_tells_shape_dtype_and_content_apart() -> None:
    a = np.arange(6, dtype=np.int64)
    assert digest(a) == digest(a.copy())
    assert digest(a) != digest(a.reshape(2, 3))
    assert digest(a) != digest(a.astype(np.int32))
    assert digest(a[::-1]) == digest(np.ascontiguousarray(a[::-1]))


def _with_targets(ctx: BenchContext) -> Prepared:
    fast = Runner("fast", "stoker", _batches, limit=1e-9)
    torch = Runner("torch", "torch", _batches)
    targets = (
        Target("fast", "speed", 0.0),
        Target("fast", "speed", 1e12),
        Target("fast", "first_batch", 1e12),
        Target("fast", "of_limit", 1.0),
        Target("absent", "speed", 1.0),
        Target("fast", "peer_speed", 1e12),
    )
    return _prepared(fast, torch, targets=targets)


def test_targets_are_reported_met_missed_or_not_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workloads.available()
    fake = workloads.Workload("fake", "targets", _with_targets)
    monkeypatch.setitem(workloads._REGISTRY, "fake", fake)
    report = tmp_path / "r.json"

    assert _bench(tmp_path, "--workloads", "fake", "--repeats", "2", "--json", str(report)) == 0

    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("target ")]
    verdicts = [line.split(":")[0] for line in lines]
    met, missed, absent = "target met", "target not met", "target not measured"
    assert verdicts == [met, missed, met, met, absent, missed]
    assert "targets: 3 of 5 met on this machine, 1 not measured; see docs/benchmarks.md" in out
    assert "(target >= 1000000000000.00x)" in lines[1]
    assert "first batch in" in lines[2]
    assert "the best other loader's samples/s (torch;" in lines[5]
    doc: dict[str, Any] = json.loads(report.read_text())
    targets = doc["workloads"][0]["targets"]
    assert [t["met"] for t in targets] == [True, False, True, True, None, False]
    assert targets[-1]["versus"] == "torch"
    assert targets[-2]["value"] is None
    assert targets[0]["warm"] is None  # no second epoch timed
    row = doc["workloads"][0]["rows"][0]
    assert row["of_limit"] > 1
    assert len(row["first_batch_seconds"]) == 2
    assert row["warm_seconds"] == []
    assert row["warm_vs_torch"] is None
