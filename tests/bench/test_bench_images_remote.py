"""The image_folder and remote workloads at tiny scale: every row verified, nothing timed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stoker._bench import workloads
from stoker._cli import main


def test_image_and_remote_workloads_are_run_by_name():
    registry = workloads.available()
    assert not registry["image_folder"].default
    assert not registry["remote"].default
    assert not registry["remote_throttled"].default


@pytest.mark.parametrize("name", ["image_folder", "remote", "remote_throttled"])
def test_workload_rows_are_verified(tmp_path: Path, name: str) -> None:
    if name.startswith("remote"):
        pytest.importorskip("fsspec")
        pytest.importorskip("aiohttp")
    out = tmp_path / "bench.json"
    code = main(
        [
            "bench",
            "--workloads",
            name,
            "--scale",
            "0.02",
            "--repeats",
            "1",
            "--loaders",
            "stoker,bare",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--json",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    (workload,) = doc["workloads"]
    assert workload["verification"]["ok"]
    assert workload["rows"][0]["loader"].startswith("stoker")
