"""What a stuck or dead worker process looks like: its stacks, and why it died."""

from __future__ import annotations

import os
import signal
import time

from .jobs import Job

__all__ = ["crash_message", "describe_exit", "dump_stacks", "only_sample", "samples_of"]

_DUMP_SECONDS = 1.0  # for a worker to write its stacks when the watchdog asks


def dump_stacks(pid: int, fd: int | None) -> str:
    """Ask worker ``pid`` for its stacks (SIGUSR1: faulthandler writes them to ``fd``).

    There is no event for "faulthandler is done": the file is read until it stops
    growing, for at most a second (this runs once per stall, from the watchdog).
    """
    if fd is None:
        return "    (this worker cannot dump its stack)\n"
    seen = b""
    try:
        with open(f"/proc/{pid}/fd/{fd}", "r+b") as f:
            f.truncate(0)
            os.kill(pid, signal.SIGUSR1)
            deadline = time.monotonic() + _DUMP_SECONDS
            while time.monotonic() < deadline:
                time.sleep(0.02)
                f.seek(0)
                data = f.read()
                if data and data == seen:
                    break
                seen = data
    except OSError as exc:
        return f"    (could not read its stack: {exc})\n"
    return seen.decode(errors="replace") or "    (it did not answer)\n"


def crash_message(
    worker_id: int,
    pid: int | None,
    code: int | None,
    job: Job | None,
    starting: bool,
    at: int | None = None,
) -> str:
    """What happened to a worker that died, and (when it died starting) why it may have.

    ``at`` is the record a careful job (one read again after a crash, see careful.py)
    was reading, -1 once it collated them.

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> job = Job(3, "build", ((Context(), np.array([5, 6])),), "batch 3", careful="x")
        >>> crash_message(0, 42, -11, job, False, at=6)[:75]
        'worker process 0 (pid 42) was killed by signal SIGSEGV while reading sample'
    """
    where = f"worker process {worker_id} (pid {pid}) {describe_exit(code)}"
    if starting:
        return (
            f"{where} while starting, before it could take a job (its own error, if any, "
            "is printed above). A worker started with start_method='spawn' (or by a fork "
            "server that another library started) runs the main script again: a script "
            "whose loop is not under an 'if __name__ == \"__main__\":' guard starts the "
            "loop again in every worker. Put the loop under that guard, or use the default "
            "start_method='forkserver' (or 'fork'); also check that worker_init_fn and the "
            "dataset can be unpickled in a fresh process"
        )
    if job is None:
        return f"{where} while idle"
    if job.careful is None or at is None:
        return f"{where} while building {job.where}{samples_of(job)}"
    again = f"read again record by record after {job.careful}"
    if at < 0:
        return f"{where} while collating {job.where}{samples_of(job)}, every record read ({again})"
    return f"{where} while reading sample {at} of {job.where} ({again})"


def samples_of(job: Job, limit: int = 16) -> str:
    """`` (samples [i, j, ...])`` for the records ``job`` reads; empty when none are named.

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> samples_of(Job(3, "build", ((Context(), np.array([12, 13])),), "batch 3"))
        ' (samples [12, 13])'
    """
    samples = job.samples()
    if not samples:
        return ""
    shown = ", ".join(map(str, samples[:limit])) + (", …" if len(samples) > limit else "")
    return f" (samples [{shown}])"


def describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def only_sample(job: Job) -> int | None:
    """The sample a job reads when it reads exactly one (then the record that crashed).

    Example:
        >>> import numpy as np
        >>> from stoker._context import Context
        >>> only_sample(Job(0, "build", ((Context(), np.array([5])),), "batch 0"))
        5
    """
    samples = job.samples()
    return samples[0] if len(samples) == 1 else None
