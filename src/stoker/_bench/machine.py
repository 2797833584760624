"""A description of the machine a benchmark ran on, for the report and the JSON file."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

import stoker

__all__ = ["cpu_model", "machine_info", "source_revision"]


def _proc_field(path: str, key: str) -> str | None:
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key:
            return value.strip()
    return None


def cpu_model() -> str:
    """The processor model from ``/proc/cpuinfo``, else what ``platform`` knows."""
    return _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown"


def _memory_gb() -> float | None:
    total = _proc_field("/proc/meminfo", "MemTotal")
    if total is None or not total.endswith("kB"):
        return None
    return round(int(total.split()[0]) * 1024 / 1e9, 1)


def source_revision() -> str | None:
    """The git commit stoker was imported from, ``+dirty`` when its sources differ from it.

    None when stoker is not imported from a git checkout (an installed wheel).
    """
    package = Path(stoker.__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(package), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    if not commit:
        return None
    changes = git("status", "--porcelain", "--", ".")
    return f"{commit}+dirty" if changes else commit


def machine_info(torch: Any) -> dict[str, Any]:
    """CPU, memory, OS and library versions; ``torch`` is the module or None."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "host": platform.node(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(usable) if usable is not None else os.cpu_count(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": None if torch is None else str(torch.__version__),
        "torch_threads": None if torch is None else int(torch.get_num_threads()),
        "stoker": stoker.__version__,
        "stoker_revision": source_revision(),
    }
