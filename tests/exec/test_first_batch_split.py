"""The first batch of an iterator is built by every process worker, a slice each."""

import os

import numpy as np

import stoker as sk


def _pid_and_index(i):
    return np.array([os.getpid(), i])


def _record(i):
    return {"x": np.full(3, i), "name": "r" * (i % 5), "n": i if i % 4 < 2 else float(i)}


def test_the_first_batch_is_built_by_both_process_workers():
    ds = sk.range(0, 32).map(_pid_and_index)
    with sk.DataLoader(ds, batch_size=8, num_workers=2, worker_mode="process") as loader:
        batches = list(loader)
    first = batches[0]
    assert first[:, 1].tolist() == list(range(8))
    assert len(set(first[:, 0].tolist())) == 2  # a slice from each worker
    assert all(len(set(b[:, 0].tolist())) == 1 for b in batches[1:])  # then whole batches
    assert os.getpid() not in set(np.concatenate(batches)[:, 0].tolist())


def test_a_split_batch_is_collated_as_one_build():
    ds = sk.range(0, 12).map(_record)
    with sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="process") as loader:
        got = list(loader)
    want = list(sk.DataLoader(ds, batch_size=4))
    assert [b["name"] for b in got] == [b["name"] for b in want]
    for g, w in zip(got, want, strict=True):
        for key in ("x", "n"):  # the halves alone would collate "n" to int64, then float64
            assert g[key].dtype == w[key].dtype
            np.testing.assert_array_equal(g[key], w[key])


def test_a_source_that_reads_whole_batches_is_not_split():
    with sk.DataLoader(sk.range(0, 8), batch_size=8, num_workers=2, worker_mode="process") as ld:
        (batch,) = list(ld)
    assert batch.tolist() == list(range(8))


def test_a_custom_collate_is_never_split():
    ds = sk.range(0, 8).map(_pid_and_index)
    with sk.DataLoader(
        ds, batch_size=8, num_workers=2, worker_mode="process", collate_fn=np.stack
    ) as loader:
        (batch,) = list(loader)
    assert len(set(batch[:, 0].tolist())) == 1
