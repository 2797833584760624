"""What a loader's workers may leave behind, and a check that they left nothing.

A :class:`Snapshot` records this process's child processes, open descriptors,
``stoker`` entries in ``/dev/shm``, shared-memory segments (descriptors and mappings)
and ``stoker-`` threads. :meth:`Snapshot.assert_clean` waits (up to a grace period,
collecting garbage) until nothing new is left, and fails naming what is.

The multiprocessing fork server and resource tracker are started on first use and
live as long as the interpreter: they are never counted, nor are the descriptors the
parent keeps to talk to them (take the first snapshot after :func:`warm_up`).
"""

from __future__ import annotations

import gc
import os
import threading
import time
from dataclasses import dataclass

import psutil

__all__ = [
    "GRACE_SECONDS",
    "Snapshot",
    "children",
    "dev_shm_entries",
    "memfd_descriptors",
    "memfd_mappings",
    "open_descriptors",
    "service_pids",
    "stoker_threads",
    "warm_up",
]

GRACE_SECONDS = 5.0
SEGMENT_PREFIX = "/memfd:stoker-"


def service_pids() -> set[int]:
    """The pids of the fork server and resource tracker of multiprocessing, if running."""
    from multiprocessing import forkserver, resource_tracker

    pids = set()
    server = getattr(forkserver._forkserver, "_forkserver_pid", None)
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    for pid in (server, tracker):
        if isinstance(pid, int):
            pids.add(pid)
    return pids


def children() -> dict[int, str]:
    """Living descendants of this process (pid -> description), services left out."""
    services = service_pids()
    found = {}
    for child in psutil.Process().children(recursive=True):
        if child.pid in services:
            continue
        try:
            found[child.pid] = f"{child.name()} ({child.status()})"
        except psutil.NoSuchProcess:
            continue
    return found


def open_descriptors() -> dict[int, str]:
    """This process's open descriptors (fd -> what it points to)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            found[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
    return found


def memfd_descriptors() -> list[str]:
    """Open descriptors of stoker's shared-memory segments."""
    return sorted(t for t in open_descriptors().values() if t.startswith(SEGMENT_PREFIX))


def memfd_mappings() -> list[str]:
    """Mappings of stoker's shared-memory segments in this process."""
    with open("/proc/self/maps") as f:
        return [line.split(None, 5)[-1].strip() for line in f if SEGMENT_PREFIX in line]


def dev_shm_entries() -> set[str]:
    """Names in ``/dev/shm`` that mention stoker."""
    try:
        return {name for name in os.listdir("/dev/shm") if "stoker" in name}
    except FileNotFoundError:
        return set()


def stoker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("stoker-") and t.is_alive()]


def warm_up() -> None:
    """Start the fork server and resource tracker the way process workers do.

    They live until the interpreter exits, together with the descriptors the parent
    keeps for them; a snapshot taken afterwards does not count them.
    """
    import stoker as sk

    with sk.DataLoader(
        sk.range(0, 4).map(lambda x: x), batch_size=2, num_workers=1, worker_mode="process"
    ) as loader:
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    gc.collect()


@dataclass(frozen=True)
class Snapshot:
    """The resources of this process at one moment."""

    children: frozenset[int]
    descriptors: dict[int, str]
    dev_shm: frozenset[str]
    threads: frozenset[threading.Thread]
    mappings: tuple[str, ...]

    @classmethod
    def take(cls) -> Snapshot:
        gc.collect()
        return cls(
            children=frozenset(children()),
            descriptors=open_descriptors(),
            dev_shm=frozenset(dev_shm_entries()),
            threads=frozenset(stoker_threads()),
            mappings=tuple(memfd_mappings()),
        )

    def leaks(self) -> list[str]:
        """What is open now that was not at the snapshot (empty when nothing)."""
        gc.collect()
        found = []
        procs = {pid: what for pid, what in children().items() if pid not in self.children}
        if procs:
            found.append(f"child processes still running: {procs}")
        now = open_descriptors()
        new = {fd: t for fd, t in now.items() if self.descriptors.get(fd) != t}
        if len(now) > len(self.descriptors):
            found.append(f"{len(now) - len(self.descriptors)} more open descriptors: {new}")
        if segments := [t for fd, t in new.items() if t.startswith(SEGMENT_PREFIX)]:
            found.append(f"shared-memory descriptors still open: {segments}")
        if len(maps := memfd_mappings()) > len(self.mappings):
            found.append(f"shared-memory segments still mapped: {maps}")
        if shm := dev_shm_entries() - self.dev_shm:
            found.append(f"new entries in /dev/shm: {sorted(shm)}")
        if threads := [t.name for t in stoker_threads() if t not in self.threads]:
            found.append(f"threads still running: {threads}")
        return found

    def assert_clean(self, grace: float = GRACE_SECONDS) -> None:
        """Wait up to ``grace`` seconds for everything opened since the snapshot to end."""
        deadline = time.monotonic() + grace
        while True:
            found = self.leaks()
            if not found:
                return
            if time.monotonic() >= deadline:
                raise AssertionError("left behind:\n  " + "\n  ".join(found))
            time.sleep(0.02)
