"""shard="torch" under a real torch.distributed job: two gloo ranks, two local processes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stoker as sk
from multihost.launch import run_hosts

pytest.importorskip("torch.distributed")


def test_two_ranks_load_disjoint_slices_of_the_global_batches(tmp_path: Path) -> None:
    stop_after = 4
    ranks = run_hosts("torch_rank.py", 2, tmp_path, str(stop_after))
    single = sk.DataLoader(
        sk.from_arrays(np.arange(50, dtype=np.int64)), batch_size=6, shuffle=True, seed=11
    )
    expected = [b.tolist() for epoch in range(2) for b in single.iter(epoch=epoch)]
    # 50 = 8 x 6 + 2: the last global batch of 2 gives each rank one record.
    assert [len(b) for b in ranks[0]["mine"]] == [3] * 8 + [1] + [3] * 8 + [1]
    for step, global_batch in enumerate(expected):
        parts = [rank["mine"][step] for rank in ranks]
        assert parts[0] + parts[1] == global_batch
        assert not set(parts[0]) & set(parts[1])
        assert ranks[0]["gathered"][step] == ranks[1]["gathered"][step] == global_batch
    # The state after every step is the same on both ranks.
    assert ranks[0]["states"] == ranks[1]["states"]

    # Resume 2 ranks -> 1 host with the same global batch: the same global stream.
    state = ranks[0]["states"][-1]
    rest = [b.tolist() for b in single.iter(state=state)]
    assert rest == expected[stop_after : len(expected) // 2]
