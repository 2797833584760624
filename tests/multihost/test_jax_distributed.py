"""shard="jax" under a real jax.distributed job: two local processes on the CPU, each
with two devices, building global jax.Arrays with stoker.jax.global_batches."""

from __future__ import annotations

from pathlib import Path

import pytest

import stoker as sk
from multihost.jax_host import GLOBAL_BATCH, data
from multihost.launch import run_hosts

pytest.importorskip("jax")


def test_two_processes_build_the_single_host_global_batches(tmp_path: Path) -> None:
    stop_after = 3
    hosts = run_hosts("jax_host.py", 2, tmp_path, str(stop_after))
    kw = {"shuffle": True, "seed": 5, "last_batch": "drop"}
    single = sk.DataLoader(data(), batch_size=GLOBAL_BATCH, **kw)  # type: ignore[arg-type]
    expected = [b["y"].tolist() for epoch in range(2) for b in single.iter(epoch=epoch)]
    # Inside each process: every global jax.Array had the data-axis sharding, the
    # right values on each of its devices, and the right value as a whole.
    # Here: each host held its half of every global batch, the halves disjoint.
    assert len(hosts[0]["mine"]) == len(hosts[1]["mine"]) == len(expected)
    for step, global_batch in enumerate(expected):
        first, second = hosts[0]["mine"][step], hosts[1]["mine"][step]
        assert first + second == global_batch
        assert not set(first) & set(second)
    assert hosts[0]["states"] == hosts[1]["states"]

    # Resume 2 hosts -> 1 host: the same remaining global stream.
    state = hosts[0]["states"][-1]
    rest = [b["y"].tolist() for b in single.iter(state=state)]
    assert rest == expected[stop_after : len(expected) // 2]
