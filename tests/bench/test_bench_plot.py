"""``stoker bench --plot`` and ``stoker bench plot``: the results drawn as a valid PNG."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from stoker._cli import main

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_valid_png(path: Path) -> tuple[int, int]:
    """Walk the PNG's chunks, checking every CRC; return (width, height)."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, data[:8]
    at, kinds = 8, []
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind = data[at + 4 : at + 8]
        body = data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        kinds.append(kind)
        at += 12 + length
    assert kinds[0] == b"IHDR", kinds
    assert kinds[-1] == b"IEND", kinds
    assert b"IDAT" in kinds, kinds
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _results(workloads: int) -> dict:
    rows = [
        {"loader": "stoker x2", "kind": "stoker", "samples_per_s": 2_000.0, "vs_torch": 2.0},
        {"loader": "torch x2", "kind": "torch", "samples_per_s": 1_000.0, "vs_torch": 1.0},
        {"loader": "bare np.take", "kind": "bare", "samples_per_s": 2_500.0, "vs_torch": 2.5},
    ]
    return {
        "format": "stoker-bench/1",
        "machine": {"cpus_usable": 2, "processor": "Test CPU", "torch": "2.13.0"},
        "workloads": [
            {"name": f"w{i}", "params": {"num_workers": [2, 16]}, "rows": rows}
            for i in range(workloads)
        ],
    }


@pytest.mark.parametrize("workloads", [1, 3])
def test_plot_draws_saved_results_as_a_png(tmp_path, capsys, workloads):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results(workloads)))
    out = tmp_path / "charts" / "out.png"
    assert main(["bench", "plot", str(results), "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    width, height = assert_valid_png(out)
    assert width > 300
    assert height > 150


def test_plot_writes_beside_the_results_by_default(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results(1)))
    assert main(["bench", "plot", str(results)]) == 0
    assert_valid_png(tmp_path / "results.png")


def test_plot_refuses_a_file_that_is_not_results(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.raises(SystemExit):
        main(["bench", "plot", str(bad)])
    assert "cannot read" in capsys.readouterr().err


def test_bench_plot_option_draws_the_run(tmp_path, capsys):
    out = tmp_path / "run.png"
    args = ["bench", "--scale", "0.01", "--cache-dir", str(tmp_path / "cache")]
    args += ["--workloads", "ints", "--loaders", "stoker", "--repeats", "1"]
    assert main([*args, "--plot", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert_valid_png(out)
