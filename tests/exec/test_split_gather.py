import numpy as np
import pytest

import stoker as sk
from stoker._batching.gather import SPLIT_BYTES


def test_large_batches_split_across_threads_are_identical(no_thread_leak):
    rows = 64
    width = SPLIT_BYTES // (rows * 4) + 1  # one batch is just over the split threshold
    x = np.random.default_rng(0).standard_normal((rows * 5, width), dtype=np.float32)
    y = np.arange(rows * 5)
    ds = sk.from_arrays(x=x, y=y)
    loader = sk.DataLoader(ds, batch_size=rows, shuffle=True, seed=1, prefetch=0)
    order = sk.RandomSampler(len(ds), seed=1).cursor(0).take(len(ds))
    seen = 0
    for k, batch in enumerate(loader):
        idx = order[k * rows : (k + 1) * rows]
        np.testing.assert_array_equal(batch["x"], x[idx])
        np.testing.assert_array_equal(batch["y"], y[idx])
        seen += len(idx)
    assert seen == len(ds)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_leaving_early_ends_the_gather_threads(prefetch, no_thread_leak):
    x = np.zeros((4096, 8192), dtype=np.float32)  # 32 KiB rows, 8 MiB batches
    loader = sk.DataLoader(sk.from_arrays(x), batch_size=256, prefetch=prefetch)
    for k, _ in enumerate(loader):
        if k == 4:
            break
