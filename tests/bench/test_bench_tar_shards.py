"""Smoke test of the ``tar_shards`` bench workload on tiny shards: rows and verification."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from stoker._cli import main


# torch's workers fork; lance, when an earlier test imported it, warns at every fork.
def test_tar_shards_runs_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--scale", "0.05", "--cache-dir", str(tmp_path / "cache")]
    assert main([*args, "--workloads", "tar_shards", "--repeats", "1"]) == 0
    captured = capsys.readouterr()
    assert "FAIL" not in captured.out
    assert "tar_shards  stoker auto -> thread" in captured.out
    peers = all(importlib.util.find_spec(m) for m in ("torch", "webdataset"))
    if peers:
        assert "verified: 4 loaders produced the expected batches" in captured.out
    else:
        assert "row is left out" in captured.out + captured.err
