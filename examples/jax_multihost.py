"""JAX on two hosts, on one machine: each host loads only its rows of every global batch.

Run it with ``python examples/jax_multihost.py``. The script starts two copies of
itself as the two "hosts" of a ``jax.distributed`` job that talk over 127.0.0.1, each
with two CPU devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2``). On a
real cluster each host runs the same code, with the coordinator's address instead.

Every host builds the same loader with ``shard="jax"``: stoker asks JAX which host it
is and loads only that host's ``batch_size`` rows of each global batch.
``stoker.jax.global_batches`` assembles them into ``jax.Array`` leaves of
``batch_size x 2`` rows, sharded over the ``"data"`` axis of a mesh of all four
devices. The check at the end gathers each global batch and compares it with what a
single host would load with the global batch size.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import stoker as sk

HOSTS = 2
GLOBAL_BATCH = 8
SEED = 5


def dataset() -> sk.Dataset:
    """60 records of a 3-float feature and an integer label."""
    features = np.arange(60 * 3, dtype=np.float32).reshape(60, 3)
    return sk.from_arrays(x=features, y=np.arange(60, dtype=np.int32))


def host(index: int, port: int, out: Path) -> None:
    """One host of the job: load, assemble global batches, check them, save the state."""
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax
    from jax.experimental import multihost_utils

    import stoker.jax as sj

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=HOSTS, process_id=index
    )
    # Every device of every host on one "data" axis, ordered by host.
    preset = sj.data_parallel()

    # Each host asks for its share of the global batch; shard="jax" names the host.
    order = {"shuffle": True, "seed": SEED, "last_batch": "drop"}
    loader = sk.DataLoader(dataset(), batch_size=GLOBAL_BATCH // HOSTS, shard="jax", **order)
    # What one host alone would load with the global batch size: the reference.
    single = sk.DataLoader(dataset(), batch_size=GLOBAL_BATCH, **order)

    steps = 0
    batches = sj.global_batches(loader, preset)
    for batch, expected in zip(batches, single, strict=True):
        assert batch["x"].shape == (GLOBAL_BATCH, 3)  # the global shape, over 4 devices
        assert len(batch["x"].addressable_shards) == 2  # this host holds 2 of them
        whole = multihost_utils.process_allgather(batch["y"], tiled=True)
        assert np.array_equal(whole, expected["y"]), (whole, expected["y"])
        steps += 1
        if steps == 3:
            # The state after step 3. It is the same on every host (a position in the
            # global order), so host 0 alone may save it.
            state = batches.state_dict()
    jax.distributed.shutdown()
    out.write_text(json.dumps({"steps": steps, "state": state}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    port = free_port()
    folder = Path(tempfile.mkdtemp())
    outs = [folder / f"host{i}.json" for i in range(HOSTS)]
    hosts = [
        subprocess.Popen([sys.executable, __file__, "host", str(i), str(port), str(outs[i])])
        for i in range(HOSTS)
    ]
    codes = [p.wait(timeout=300) for p in hosts]
    if any(codes):
        raise SystemExit(f"a host failed: exit codes {codes}")
    results = [json.loads(out.read_text()) for out in outs]
    assert results[0]["state"] == results[1]["state"], "the hosts' states differ"
    print(f"{HOSTS} hosts, {results[0]['steps']} global batches of {GLOBAL_BATCH}: all checked")
    print(f"state after step 3, the same on both hosts: epoch {results[0]['state']['epoch']}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["host"]:
        host(int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
    else:
        main()
