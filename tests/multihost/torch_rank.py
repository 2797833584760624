"""One rank of a torch.distributed (gloo) job that loads with shard="torch".

Run by test_torch_distributed.py as: torch_rank.py RANK WORLD PORT OUT STOP_AFTER
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    rank, world, port, out, stop_after = sys.argv[1:6]
    import numpy as np
    import torch
    import torch.distributed as dist

    import stoker as sk

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=int(rank), world_size=int(world)
    )
    try:
        data = sk.from_arrays(np.arange(50, dtype=np.int64))
        loader = sk.DataLoader(
            data, batch_size=3, shuffle=True, seed=11, shard="torch", num_workers=2
        )
        assert loader.shard == sk.Shard(int(rank), int(world))
        mine, gathered, states = [], [], []
        with loader:
            for epoch in range(2):
                for batch in loader.iter(epoch=epoch):
                    local = torch.from_numpy(batch)
                    parts = [torch.empty_like(local) for _ in range(int(world))]
                    dist.all_gather(parts, local)  # the global batch, on every rank
                    mine.append(batch.tolist())
                    gathered.append(torch.cat(parts).tolist())
            it = loader.iter(epoch=0)
            for _ in range(int(stop_after)):
                next(it)
                states.append(it.state_dict())
        dist.barrier()
    finally:
        dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump({"mine": mine, "gathered": gathered, "states": states}, f)


if __name__ == "__main__":
    main()
