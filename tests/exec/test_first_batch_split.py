"""The first batch of an iterator is built by every process worker, a slice each."""

import contextlib
import os

import numpy as np
import pytest

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


def _pixels(i):
    return {"image": np.full((3, 8, 8), i, np.float32), "label": i}


def _mapped(kind):
    """The lines of /proc/self/maps and the descriptors naming a first batch's segment."""
    with open("/proc/self/maps") as f:
        maps = [line for line in f if "stoker-first-batch" in line]
    links = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"/proc/self/fd/{fd}"))
    return maps if kind == "maps" else [link for link in links if "stoker-first-batch" in link]


def test_the_workers_write_the_first_batch_into_one_shared_batch(no_leaks):
    ds = sk.range(0, 32).map(_pixels)
    want = list(sk.DataLoader(ds, batch_size=8))
    with sk.DataLoader(ds, batch_size=8, num_workers=2, worker_mode="process") as loader:
        it = iter(loader)
        first = next(it)
        # The batch lies in the segment the workers wrote (no collate in this process),
        # whose own descriptor is closed once both slices are over: the one left is the
        # mapping's (Python's mmap keeps one), which goes with the last view.
        assert first["image"].base is not None
        assert _mapped("maps")
        assert len(_mapped("fds")) == 1
        rest = list(it)
    for got, expected in zip([first, *rest], want, strict=True):
        for key in ("image", "label"):
            assert got[key].dtype == expected[key].dtype
            np.testing.assert_array_equal(got[key], expected[key])
    del first, rest, it, got
    import gc

    gc.collect()
    assert not _mapped("maps")  # the memory went with the last view
    assert not _mapped("fds")


def _dtype_by_half(i):
    return np.full(2, i, np.int32 if i < 4 else np.int64)


def _shape_by_half(i):
    return np.zeros(2 if i < 4 else 3)


def test_slices_whose_rows_differ_are_collated_as_one_build(no_leaks):
    ds = sk.range(0, 8).map(_dtype_by_half)
    with sk.DataLoader(ds, batch_size=8, num_workers=2, worker_mode="process") as loader:
        (got,) = list(loader)
    (want,) = list(sk.DataLoader(ds, batch_size=8))
    assert got.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    ds = sk.range(0, 8).map(_shape_by_half)
    with pytest.raises(sk.errors.CollateError) as inline:
        list(sk.DataLoader(ds, batch_size=8))
    with (
        sk.DataLoader(ds, batch_size=8, num_workers=2, worker_mode="process") as loader,
        pytest.raises(sk.errors.CollateError) as split,
    ):
        list(loader)
    assert str(split.value).splitlines()[0] == str(inline.value).splitlines()[0]
    assert split.value.batch_index == 0
