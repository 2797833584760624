"""Big records are written into the batch as each one is made (``STREAM_ROW_BYTES``).

Once a loader's batch buffers are planned, records of 64 KiB or more (arrays only) go
through a chain of maps one at a time and are copied into their row at once; each
goes once the next one is made, so a batch of them never lives at once. The batches,
their dtypes and the errors are those of the list path (the same records collated by
``default_collate``). The first batch streams too (its first record sizes the
buffers), and so do the slices of a first batch split across thread workers, each
written straight into its rows of one batch.
"""

import weakref

import numpy as np
import pytest

import stoker as sk
from stoker._batching.builder import STREAM_ROW_BYTES

SIDE = 128  # 128 x 128 float32: 64 KiB, a row big enough to stream


def _image(i):
    return np.full((SIDE, SIDE), i, dtype=np.float32)


def _record(i):
    return {"image": _image(i), "label": np.int64(i).reshape(())}


def _brighten(r, rng):
    return {"image": r["image"] + rng.random(), "label": r["label"]}


def _batches(ds, collate_fn=None, **options):
    loader = sk.DataLoader(ds, batch_size=4, collate_fn=collate_fn, **options)
    with loader:
        return list(loader)


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.keys() == y.keys()
        for key in x:
            assert x[key].dtype == y[key].dtype
            np.testing.assert_array_equal(x[key], y[key])


def test_a_row_of_64_kib_streams():
    assert _image(0).nbytes == STREAM_ROW_BYTES


@pytest.mark.parametrize(
    "options",
    [{}, {"shuffle": True, "seed": 3}, {"num_workers": 2, "worker_mode": "thread"}],
    ids=["in-order", "shuffled", "threads"],
)
def test_streamed_batches_are_the_list_paths(options):
    ds = sk.range(0, 30).map(_record).map(_brighten, seeded=True)
    streamed = _batches(ds, **options)
    listed = _batches(ds, collate_fn=sk.default_collate, **options)  # a collate_fn: lists
    _assert_same(streamed, listed)
    assert sorted(x for b in streamed for x in b["label"].tolist()) == list(range(30))


@pytest.mark.parametrize(
    "options", [{}, {"num_workers": 1, "worker_mode": "thread"}], ids=["inline", "a thread"]
)
def test_records_go_through_the_chain_one_at_a_time(options):
    calls = []

    def read(i):
        calls.append(("read", i))
        return _image(i)

    def crop(a):
        calls.append(("crop", int(a[0, 0])))
        return a * 2

    loader = sk.DataLoader(sk.range(0, 12).map(read).map(crop), batch_size=4, **options)
    with loader:
        batches = [b[:, 0, 0].tolist() for b in loader]
    assert batches == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18, 20, 22]]
    # Every batch streams, the first too: its first record sizes the buffers.
    assert calls == [(step, i) for i in range(12) for step in ("read", "crop")]


def test_small_records_keep_the_list_path():
    calls = []

    def step(i):
        calls.append(i)
        return np.full(4, i, dtype=np.float32)

    def again(a):
        calls.append(-int(a[0]))
        return a

    loader = sk.DataLoader(sk.range(1, 9).map(step).map(again), batch_size=4)
    with loader:
        list(loader)
    # The first record, made alone, shows they are small: the rest of its batch
    # follows it record by record; later batches go through each step whole.
    assert calls[:8] == [1, -1, 2, -2, 3, -3, 4, -4]
    assert calls[8:] == [5, 6, 7, 8, -5, -6, -7, -8]


def test_a_record_of_another_dtype_gives_the_list_paths_batch():
    def varying(i):
        return _image(i).astype(np.float64 if i == 6 else np.float32)

    ds = sk.range(0, 12).map(varying)
    streamed = [b.copy() for b in _batches(ds)]
    listed = _batches(ds, collate_fn=sk.default_collate)
    assert [b.dtype for b in streamed] == [b.dtype for b in listed]
    for a, b in zip(streamed, listed, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_record_of_another_shape_raises_the_collate_error():
    def varying(i):
        return np.zeros((SIDE, SIDE + (i == 9)), dtype=np.float32)

    loader = sk.DataLoader(sk.range(0, 12).map(varying), batch_size=4)
    with loader, pytest.raises(sk.CollateError) as raised:
        list(loader)
    assert raised.value.batch_index == 2


def test_a_record_that_raises_mid_batch_is_named():
    def failing(i):
        if i == 10:
            raise ValueError("bad pixels")
        return _image(i)

    loader = sk.DataLoader(sk.range(0, 12).map(failing), batch_size=4)
    with loader, pytest.raises(ValueError, match="bad pixels") as raised:
        list(loader)
    assert raised.value.sample_index == 10
    assert any("sample index 10" in note for note in raised.value.__notes__)


def test_held_streamed_batches_keep_their_values():
    loader = sk.DataLoader(sk.range(0, 40).map(_image), batch_size=4, prefetch=0)
    with loader:
        held = list(loader)
    assert [b[:, 0, 0].tolist() for b in held] == [
        [float(i) for i in range(k, k + 4)] for k in range(0, 40, 4)
    ]


class _Tracked(np.ndarray):
    """An image that counts how many of its kind are alive."""

    alive = 0
    most = 0


def _tracked(i):
    image = _image(i).view(_Tracked)
    _Tracked.alive += 1
    _Tracked.most = max(_Tracked.most, _Tracked.alive)
    weakref.finalize(image, _gone)
    return image


def _gone():
    _Tracked.alive -= 1


def test_no_more_than_two_streamed_records_live_at_once():
    loader = sk.DataLoader(sk.range(0, 80).map(_tracked), batch_size=8, prefetch=0)
    with loader, loader.iter() as it:
        seen = []
        for batch in it:
            seen.append(batch[:, 0, 0].tolist())
            del batch  # let its buffer go before the next batch is built
    assert seen == [[float(i) for i in range(k, k + 8)] for k in range(0, 80, 8)]
    assert _Tracked.most <= 2  # a record goes once the next one is made, the first batch's too


def _split(fn, rows=8, shared=True):
    """Batch 0 of ``range(rows).map(fn)`` read as two slices on two threads."""
    from stoker._batching.pool import BufferPool
    from stoker._context import Context
    from stoker._exec.jobs import Job, WorkerSpec
    from stoker._exec.merge import split_build
    from stoker._exec.threads import ThreadExecutor

    spec = WorkerSpec(sk.range(0, rows).map(fn), None, rows, "raise", 0, 2, None, None)
    with ThreadExecutor(spec, BufferPool(rows, 4)) as ex:
        job = Job(0, "build", ((Context(), np.arange(rows)),), "batch 0")
        return split_build(ex.submit, job, 2, shared=shared).result().value


def test_thread_slices_write_one_batch():
    batch = _split(_record)
    expected = sk.default_collate([_record(i) for i in range(8)])
    assert batch.keys() == expected.keys()
    for key in batch:
        assert batch[key].dtype == expected[key].dtype
        np.testing.assert_array_equal(batch[key], expected[key])
    assert batch["image"].base is None or batch["image"].base.base is None  # one array


@pytest.mark.parametrize("odd", [1, 5], ids=["first-slice", "second-slice"])
def test_a_thread_slice_that_does_not_fit_gives_the_list_paths_batch(odd):
    def varying(i):
        return _image(i).astype(np.float64 if i == odd else np.float32)

    batch = _split(varying)
    expected = sk.default_collate([varying(i) for i in range(8)])
    assert batch.dtype == expected.dtype == np.float64
    np.testing.assert_array_equal(batch, expected)


def test_a_thread_slice_of_another_shape_raises_the_collate_error():
    def varying(i):
        return np.zeros((SIDE, SIDE + (i == 6)), dtype=np.float32)

    with pytest.raises(sk.CollateError):
        _split(varying)


def test_auto_threads_give_the_list_paths_batches():
    ds = sk.range(0, 30).map(sk.releases_gil(_record))
    auto = _batches(ds, num_workers=2, worker_mode="auto")
    listed = _batches(ds, collate_fn=sk.default_collate)
    _assert_same(auto, listed)
