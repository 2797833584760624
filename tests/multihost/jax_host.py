"""One host of a jax.distributed job on the CPU that loads with shard="jax".

Run by test_jax_distributed.py as: jax_host.py INDEX COUNT PORT OUT STOP_AFTER
Each host has two CPU devices; the global batches are jax.Arrays over all of them.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

import stoker as sk

GLOBAL_BATCH = 8


def data() -> sk.Dataset[dict[str, np.ndarray]]:
    return sk.from_arrays(
        x=np.arange(60 * 3, dtype=np.float32).reshape(60, 3), y=np.arange(60, dtype=np.int64)
    )


def main() -> None:
    index, count, port, out, stop_after = sys.argv[1:6]
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=int(count), process_id=int(index)
    )
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import stoker.jax as skj

    mesh = Mesh(np.array(jax.devices()), ("data",))
    kw = {"shuffle": True, "seed": 5, "last_batch": "drop"}
    single = sk.DataLoader(data(), batch_size=GLOBAL_BATCH, **kw)
    expected = [b for epoch in range(2) for b in single.iter(epoch=epoch)]

    loader = sk.DataLoader(
        data(),
        batch_size=GLOBAL_BATCH // int(count),
        shard="jax",
        num_workers=2,
        worker_mode="process",
        **kw,
    )
    assert loader.shard == sk.Shard(int(index), int(count)), loader.shard
    mine, states = [], []
    with loader:
        glob = skj.global_batches(loader, mesh, "data")
        step = 0
        for _ in range(2):
            for batch in glob:
                want = expected[step]
                for name in ("x", "y"):
                    arr = batch[name]
                    assert isinstance(arr, jax.Array), type(arr)
                    assert arr.shape == want[name].shape, (arr.shape, want[name].shape)
                    assert arr.sharding.is_equivalent_to(
                        NamedSharding(mesh, PartitionSpec("data")), arr.ndim
                    ), arr.sharding
                    for shard in arr.addressable_shards:
                        assert shard.device.process_index == jax.process_index()
                        np.testing.assert_array_equal(
                            np.asarray(shard.data), want[name][shard.index]
                        )
                    whole = multihost_utils.process_allgather(arr, tiled=True)
                    np.testing.assert_array_equal(whole, want[name])
                local = [np.asarray(s.data) for s in batch["y"].addressable_shards]
                mine.append(np.concatenate(local).tolist())
                step += 1
                if len(states) < int(stop_after):
                    states.append(glob.state_dict())
    assert step == len(expected), (step, len(expected))
    jax.distributed.shutdown()
    with open(out, "w") as f:
        json.dump({"mine": mine, "states": states}, f)


if __name__ == "__main__":
    main()
