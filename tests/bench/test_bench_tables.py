"""Smoke tests of the table workloads of ``stoker bench`` on tiny data.

``tokens_pad``, ``tokens_pack``, ``parquet_numeric`` and ``sqlite`` run by name only;
here they run in-process with the hidden ``--scale`` option (real Parquet and SQLite
files, HF ``datasets`` and torch workers); nothing looks at timings, only at the rows,
the verification, the targets and the JSON.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from stoker._bench import workloads
from stoker._bench.workloads import tokens
from stoker._cli import main

# 1,000 token lists (32 batches; 4 + 4 packed batches), 29,826 numeric rows (30 batches
# of 1024) and 2,000 SQLite rows (8 batches of 256).
SCALE = "0.002"
TABLES = ("tokens_pad", "tokens_pack", "parquet_numeric", "sqlite")
EXPECTED_ROWS = {
    "tokens_pad": ["stoker pad x0", "torch pad x0", "stoker pad x2", "torch pad x2"],
    "tokens_pack": ["stoker pack x0", "torch pack x0", "stoker pack x2", "torch pack x2"],
    "parquet_numeric": ["stoker x0", "stoker x2", "torch x2 per-row (29,826 rows)"],
    "sqlite": ["stoker x0", "torch x0", "stoker x2", "torch x2"],
}
VERSUS = {
    "tokens_pad": {"stoker pad x0": "torch pad x0", "stoker pad x2": "torch pad x2"},
    "tokens_pack": {"stoker pack x0": "torch pack x0", "stoker pack x2": "torch pack x2"},
    "sqlite": {"stoker x0": "torch x0", "stoker x2": "torch x2"},
}


def _bench(tmp_path: Path, *args: str) -> int:
    return main(["bench", "--scale", SCALE, "--cache-dir", str(tmp_path / "cache"), *args])


def test_table_workloads_run_verified_against_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in ("torch", "pyarrow", "datasets"):
        pytest.importorskip(module)
    report = tmp_path / "results.json"

    args = ("--workloads", ",".join(TABLES), "--repeats", "1", "--json", str(report))
    assert _bench(tmp_path, *args) == 0

    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "verified: 15 loaders produced the expected batches" in out
    assert "limit: parquet_numeric / stoker x0:" in out
    doc = json.loads(report.read_text())
    assert doc["verification_ok"] is True
    by_name = {w["name"]: w for w in doc["workloads"]}
    assert list(by_name) == list(TABLES)
    for name, loaders in EXPECTED_ROWS.items():
        w = by_name[name]
        assert [row["loader"] for row in w["rows"]] == loaders
        assert all(c["ok"] and c["batches"] > 0 for c in w["verification"]["checks"])
        assert all(t["value"] > 0 and isinstance(t["met"], bool) for t in w["targets"])
        rows = {row["loader"]: row for row in w["rows"]}
        for row, versus in VERSUS.get(name, {}).items():
            ratio = rows[row]["samples_per_s"] / rows[versus]["samples_per_s"]
            assert rows[row]["vs_torch"] == pytest.approx(ratio)
    for w in by_name.values():  # the mode each stoker loader ran in is reported
        assert all(r["worker_mode"] for r in w["rows"] if r["kind"] == "stoker")
    pad = by_name["tokens_pad"]
    assert all(row["samples"] == pad["params"]["records"] == 1000 for row in pad["rows"])
    pack = by_name["tokens_pack"]
    assert all(row["samples"] == pack["params"]["packed_rows"] for row in pack["rows"])
    assert pack["verification"]["checks"][0]["batches"] > 1
    numeric = by_name["parquet_numeric"]
    torch_row = numeric["rows"][-1]
    assert torch_row["samples"] == numeric["params"]["torch_rows"]
    assert (
        numeric["rows"][0]["limit_samples_per_s"] == numeric["params"]["read_table_samples_per_s"]
    )
    measures = [(t["loader"], t["measure"]) for t in numeric["targets"]]
    assert measures == [
        ("stoker x2", "speed"),
        ("stoker x2", "of_limit"),
        ("stoker x0", "of_limit"),
    ]
    # The data is kept in the cache folder and reused by the next run.
    cache = tmp_path / "cache"
    names = sorted(p.name for p in cache.iterdir())
    assert [n for n in names if n.endswith((".parquet", ".sqlite"))] == [
        "items-2000.sqlite",
        "numeric-16xf32-i64-29826-g262144.parquet",
        "tokens-int32-1000-g8192.parquet",
    ]
    assert "hf-datasets" in names


def test_table_workloads_run_only_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    registry = workloads.available()
    assert all(not registry[name].default for name in TABLES)
    assert all(registry[name].default for name in ("ints", "memmap", "jpeg"))

    assert main(["bench", "--list"]) == 0

    lines = capsys.readouterr().out.splitlines()
    by_name = [line.split()[0] for line in lines if line.endswith("(run by name)")]
    assert set(TABLES) <= set(by_name)
    assert "ints" not in by_name


def test_a_missing_library_is_named_with_its_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = workloads.available()
    missing = (("stoker_no_such_module", "hf"),)
    fake = dataclasses.replace(registry["tokens_pad"], requires=missing)
    assert fake.missing() == [("stoker_no_such_module", "hf")]
    assert registry["sqlite"].missing() == []
    monkeypatch.setitem(workloads._REGISTRY, "tokens_pad", fake)

    with pytest.raises(SystemExit) as exc:
        _bench(tmp_path, "--workloads", "sqlite,tokens_pad")

    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "workload tokens_pad needs stoker_no_such_module" in err
    assert "pip install 'stoker[hf]'" in err
    assert not (tmp_path / "cache").exists()  # refused before any data was written


def test_pack_count_matches_the_rows_packed() -> None:
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 3000, size=300)
    records = [np.full(n, i, dtype=np.int32) for i, n in enumerate(lengths)]

    batches = list(tokens.greedy_pack(records, 4))

    assert tokens.pack_count(lengths, 4) == sum(len(b["tokens"]) for b in batches)
    assert all(len(b["tokens"]) == 4 for b in batches[:-1])
    first = batches[0]
    for row in range(4):  # every segment is one record's tokens, positions from 0
        segments = first["segment_ids"][row]
        for segment in range(1, int(segments.max()) + 1):
            where = segments == segment
            values = first["tokens"][row][where]
            assert (values == values[0]).all()
            assert len(values) == min(lengths[values[0]], tokens.PACK_LENGTH)
            assert first["positions"][row][where].tolist() == list(range(len(values)))
