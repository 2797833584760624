"""Run one script as several local processes (hosts) and collect what each wrote."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def run_hosts(script: str, count: int, out: Path, *args: str, timeout: float = 180) -> list[Any]:
    """Start ``count`` processes of ``script`` (each gets its index, the count, a port
    and its output path) and return the JSON each one wrote; fail with their output
    if any of them fails or runs past ``timeout``."""
    port = str(free_port())
    paths = [out / f"host{i}.json" for i in range(count)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / script), str(i), str(count), port, str(paths[i]), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
        )
        for i in range(count)
    ]
    logs = []
    try:
        for p in procs:
            stdout, _ = p.communicate(timeout=timeout)
            logs.append(stdout.decode(errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    failed = [i for i, p in enumerate(procs) if p.returncode != 0]
    if failed:
        detail = "\n".join(
            f"--- host {i} (exit {procs[i].returncode}):\n{logs[i][-3000:]}" for i in failed
        )
        raise AssertionError(f"hosts {failed} failed:\n{detail}")
    return [json.loads(path.read_text()) for path in paths]
