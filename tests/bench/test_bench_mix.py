"""Smoke test of the ``mix`` bench workload on small data (234 batches, two weight
changes): both rows verified."""

from __future__ import annotations

from pathlib import Path

import pytest

from stoker._cli import main


def test_mix_runs_by_name_with_both_rows_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", "--scale", "0.06", "--cache-dir", str(tmp_path / "cache")]
    assert main([*args, "--workloads", "mix", "--loaders", "stoker", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "FAIL" not in out
    assert "mix       stoker fixed" in out
    assert "mix       stoker changing" in out
    assert "verified: 2 loaders produced the expected batches" in out


def test_mix_is_not_part_of_a_default_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--list"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("mix"))
    assert "by name" in line
