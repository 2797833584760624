"""Run the full benchmark and keep the results: ``python bench/run.py``.

The same as ``stoker bench --repeats 5 --json bench/results/<date>-<host>.json``.
Further arguments are passed on and win over these, for example
``python bench/run.py --workloads memmap`` or ``python bench/run.py --repeats 9``.
"""

from __future__ import annotations

import datetime
import platform
import re
import sys
from pathlib import Path

from stoker._cli import main

RESULTS = Path(__file__).resolve().parent / "results"


def results_path() -> Path:
    """``bench/results/<YYYY-MM-DD>-<host>.json``."""
    host = re.sub(r"[^A-Za-z0-9_.-]+", "-", platform.node()).strip("-") or "host"
    return RESULTS / f"{datetime.date.today().isoformat()}-{host}.json"


if __name__ == "__main__":
    raise SystemExit(
        main(["bench", "--repeats", "5", "--json", str(results_path()), *sys.argv[1:]])
    )
