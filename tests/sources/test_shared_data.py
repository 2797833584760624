"""In-memory sources hand process workers shared memory, not a copy each."""

import contextlib
import gc
import multiprocessing
import os
import pickle
import sys
import threading

import cloudpickle
import numpy as np
import pytest

import stoker as sk
from stoker._context import Context
from stoker._shm import PREFIX, sharing_available, sharing_for_workers
from stoker._sources.shared import SharedArray, SharedRecords

pytestmark = pytest.mark.skipif(not sharing_available(), reason="needs memfd and /proc")

CTX = Context(seed=0, epoch=0)
TIMEOUT = 30


# -- helpers ----------------------------------------------------------------------------


def segments() -> int:
    """How many segments this process holds open (by the descriptors /proc lists)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the descriptor listdir itself used, now closed
            count += os.readlink(f"/proc/self/fd/{fd}").startswith(f"/memfd:{PREFIX}")
    return count


def for_workers(ds) -> bytes:
    """The dataset pickled as a loader pickles it for its process workers."""
    with sharing_for_workers():
        return cloudpickle.dumps(ds)


def mapping_of(array: np.ndarray) -> str:
    """The name of the mapping that holds ``array``'s data ("" for anonymous memory)."""
    address = array.__array_interface__["data"][0]
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            start, end = (int(x, 16) for x in fields[0].split("-"))
            if start <= address < end:
                return fields[5].strip() if len(fields) > 5 else ""
    raise AssertionError("no mapping holds the array")


def same(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return type(b) is np.ndarray and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _serve(conn) -> None:
    """A worker process: unpickle (payload, fn, args), send back fn(dataset, *args)."""
    while data := conn.recv_bytes():
        payload, fn, args = pickle.loads(data)
        try:
            result = ("ok", fn(pickle.loads(payload), *args))
        except Exception as error:
            result = ("error", repr(error))
        conn.send_bytes(cloudpickle.dumps(result))
    conn.close()


@pytest.fixture(scope="module")
def worker():
    """``worker(payload, fn, *args)`` runs ``fn`` on the unpickled dataset in a new process."""
    ctx = multiprocessing.get_context("forkserver")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child,), daemon=True)
    proc.start()
    child.close()

    def run(payload: bytes, fn, *args):
        parent.send_bytes(cloudpickle.dumps((payload, fn, args)))
        assert parent.poll(TIMEOUT), "the worker did not answer"
        status, value = pickle.loads(parent.recv_bytes())
        assert status == "ok", f"in the worker: {value}"
        return value

    yield run
    parent.send_bytes(b"")
    proc.join(TIMEOUT)
    parent.close()
    assert proc.exitcode == 0
    proc.close()


# -- what workers run -----------------------------------------------------------------


def _records(ds, indices):
    return type(ds._seq).__name__, ds.__getitems__(indices)


def _gather(ds, indices):
    idx = np.asarray(indices, dtype=np.int64)
    array = ds._array
    where = (mapping_of(array), array.flags.writeable, array.dtype.str)
    return where, ds._gather(idx, CTX, None), ds._fetch(idx, CTX)


def _rows(ds, indices):
    idx = np.asarray(indices, dtype=np.int64)
    fields = [
        (mapping_of(a) if a.size else "", a.dtype.str, a.shape, a.flags.c_contiguous)
        for a in ds._arrays
    ]
    return fields, ds.__getitems__(indices), ds._gather(idx, CTX, None)


def _repickled(ds):
    again = pickle.loads(pickle.dumps(ds))
    return type(again._seq).__name__, again.__getitems__([0, 1])


def _points(ds):
    records = ds.__getitems__(range(len(ds)))
    return [r.x for r in records], len({type(r) for r in records})


def _shm_entries() -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
    with open("/proc/self/maps") as maps:
        found.extend(maps.read().splitlines())
    return [entry for entry in found if "/dev/shm/" in entry]


def _shm_entries_of_worker(ds):
    return _shm_entries()


# -- from_sequence ----------------------------------------------------------------------

MIXED = [
    "text",
    {"a": [1, 2], "b": {"c": None}},
    np.arange(6, dtype=np.float32).reshape(2, 3),
    None,
    (1, ("nested", 2.5), [b"bytes"]),
    2**70,
    3.25,
    True,
]


def test_records_come_back_from_a_worker(worker):
    ds = sk.from_sequence(MIXED)
    indices = [7, 0, 3, 3, 1, -1, 2, 4, 5, 6]
    kind, got = worker(for_workers(ds), _records, indices)
    assert kind == "SharedRecords"
    assert len(got) == len(indices)
    for record, i in zip(got, indices, strict=True):
        assert same(MIXED[i], record), (i, record)


@pytest.mark.parametrize(
    ("records", "dtype"),
    [(list(range(-5, 995)), "<i8"), ([0.5 * i for i in range(300)], "<f8"), ([True, False], "|b1")],
)
def test_numeric_records_are_gathered_from_shared_memory_in_a_worker(worker, records, dtype):
    ds = sk.from_sequence(records)
    indices = [1, 0, len(records) - 1, 1]
    (mapping, writeable, got_dtype), batch, fetched = worker(for_workers(ds), _gather, indices)
    assert mapping.startswith(f"/memfd:{PREFIX}array")
    assert not writeable
    assert got_dtype == dtype
    expected = [records[i] for i in indices]
    np.testing.assert_array_equal(batch, np.asarray(expected))
    assert all(same(a, b) for a, b in zip(expected, fetched, strict=True))


def test_a_workers_copy_pickles_as_plain_records(worker):
    ds = sk.from_sequence(["a", {"b": 2}])
    kind, got = worker(for_workers(ds), _repickled)
    assert kind == "list"
    assert got == ["a", {"b": 2}]


def _local_class():
    class Point:
        def __init__(self, x: int) -> None:
            self.x = x

    return Point


def test_records_of_classes_a_worker_cannot_import(worker, monkeypatch):
    local = _local_class()
    main = type("MainPoint", (), {"__module__": "__main__", "__init__": local.__init__})
    monkeypatch.setattr(sys.modules["__main__"], "MainPoint", main, raising=False)
    for cls in (local, main):
        ds = sk.from_sequence([cls(i) for i in range(500)])
        payload = for_workers(ds)
        assert worker(payload, _points) == (list(range(500)), 1)
        assert ds._shared._segment.size < 500 * 100  # the class travels once, not per record


def test_outside_the_context_a_pickle_is_a_plain_copy():
    ds = sk.from_sequence(["x" * 100] * 10)
    before = segments()
    again = pickle.loads(pickle.dumps(ds))
    assert segments() == before
    assert type(again._seq) is list
    assert again[3] == "x" * 100
    for_workers(ds)  # a shared copy now exists; saving the dataset still copies it
    assert type(pickle.loads(cloudpickle.dumps(ds))._seq) is list


# -- from_arrays ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_array_rows_come_back_from_a_worker(worker, tmp_path, kind):
    x = np.arange(24.0).reshape(6, 4)
    view = np.arange(60, dtype=np.int16).reshape(6, 10)[:, ::3]
    memmap = np.lib.format.open_memmap(tmp_path / "m.npy", "w+", np.int32, (6, 2))
    memmap[:] = np.arange(12).reshape(6, 2)
    memmap.flush()
    objects = np.array([{"k": i} for i in range(6)], dtype=object)
    fields = {"x": x, "view": view, "memmap": memmap, "objects": objects}
    ds = sk.from_arrays(**fields) if kind == "dict" else sk.from_arrays(*fields.values())
    indices = [5, 0, 2, 2]
    where, rows, batch = worker(for_workers(ds), _rows, indices)

    shared = f"/memfd:{PREFIX}array"
    assert where[0] == (shared + " (deleted)", "<f8", (6, 4), True)
    assert where[1] == (shared + " (deleted)", "<i2", (6, 4), True)
    assert where[2][0] == str(tmp_path / "m.npy")  # still read from its file
    assert not where[3][0].startswith("/memfd")  # Python objects are copied
    for i, row in zip(indices, rows, strict=True):
        expected = [a[i] for a in fields.values()]
        got = list(row.values()) if kind == "dict" else list(row)
        assert all(same(a, b) for a, b in zip(expected, got, strict=True))
    columns = batch.values() if kind == "dict" else batch
    for array, column in zip(fields.values(), columns, strict=True):
        np.testing.assert_array_equal(column, array[indices])
    del memmap, ds
    gc.collect()


def test_structured_and_empty_arrays():
    rows = np.zeros(4, dtype=[("a", "<i4"), ("b", "<f8", (2,))])
    rows["a"] = [1, 2, 3, 4]
    empty = np.zeros((4, 0))
    ds = sk.from_arrays(rows, empty)
    again = pickle.loads(for_workers(ds))
    assert again._arrays[0].dtype == rows.dtype
    assert again._arrays[0]["a"].tolist() == [1, 2, 3, 4]
    assert again._arrays[1].shape == (4, 0)


# -- size, reuse and lifetime -----------------------------------------------------------


def test_the_pickle_for_workers_is_small():
    records = [f"{i:08d}" * 125 for i in range(10_000)]  # 10 MB of strings
    numbers = list(range(1_250_000))  # 10 MB as int64
    array = np.ones((1_250, 1_000))  # 10 MB
    for ds in (sk.from_sequence(records), sk.from_sequence(numbers), sk.from_arrays(x=array)):
        assert len(cloudpickle.dumps(ds)) > 10_000_000
        assert len(for_workers(ds)) < 2_000
        assert len(cloudpickle.dumps(ds)) > 10_000_000


def test_pickling_again_reuses_the_one_segment():
    before = segments()
    ds = sk.from_sequence([{"i": i} for i in range(100)]).map(lambda r: r["i"])
    first = for_workers(ds)
    after_first = segments()
    assert after_first > before
    assert for_workers(ds) == first
    with sharing_for_workers():
        assert cloudpickle.dumps(ds) == first
    assert segments() == after_first
    arrays = sk.from_arrays(np.zeros(10), np.ones((10, 2)))
    first = for_workers(arrays)
    assert for_workers(arrays) == first


def test_threads_pickling_at_once_make_one_segment():
    ds = sk.from_sequence([str(i) for i in range(20_000)])
    payloads = []
    threads = [threading.Thread(target=lambda: payloads.append(for_workers(ds))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(payloads)) == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: sk.from_sequence(["a", "b"] * 1000),
        lambda: sk.from_sequence([1.5, 2.5] * 1000),
        lambda: sk.from_arrays(x=np.zeros((100, 3)), y=np.arange(100), z=np.ones(100)),
    ],
)
def test_segments_are_released_when_the_dataset_is_collected(worker, make):
    before = segments()
    ds = make()
    payload = for_workers(ds)
    assert segments() > before
    assert worker(payload, len) == len(ds)
    del ds
    gc.collect()
    assert segments() == before


def test_nothing_goes_through_dev_shm(worker):
    before = {name for name in os.listdir("/dev/shm") if "stoker" in name}
    # What this process maps already: multiprocessing's own heap and semaphores, which
    # a multiprocessing.Value or Lock made by an earlier test keeps for its lifetime.
    mapped = set(_shm_entries())
    ds = sk.from_sequence([np.arange(10)] * 10)
    arrays = sk.from_arrays(np.arange(10))
    assert worker(for_workers(ds), _shm_entries_of_worker) == []
    assert worker(for_workers(arrays), _shm_entries_of_worker) == []
    assert set(_shm_entries()) <= mapped
    assert {name for name in os.listdir("/dev/shm") if "stoker" in name} == before


# -- the stores themselves --------------------------------------------------------------


def test_shared_records_read_like_a_sequence():
    records = SharedRecords.from_records([{"i": i} for i in range(5)])
    assert len(records) == 5
    assert records.get(-1) == {"i": 4}
    assert records[1] == {"i": 1}
    assert records[1:4:2] == [{"i": 1}, {"i": 3}]
    assert records.get_many(np.array([4, -5, 2])) == [{"i": 4}, {"i": 0}, {"i": 2}]
    assert records.get_many([]) == []
    assert list(records) == [{"i": i} for i in range(5)]
    assert records.get(0) is not records.get(0)  # a fresh object per read
    for bad in (5, -6):
        with pytest.raises(IndexError, match="out of range"):
            records.get(bad)
        with pytest.raises(IndexError, match="out of range"):
            records.get_many([0, bad])
    records.close()
    records.close()
    assert records.get(2) == {"i": 2}  # this process's mapping outlives close()
    empty = SharedRecords.from_records([])
    assert len(empty) == 0
    assert list(empty) == []


def test_shared_array_copies_what_a_view_shows():
    base = np.arange(100, dtype=np.int64).reshape(10, 10)
    view = base[::2, 1::3]
    shared = SharedArray(view)
    assert shared.array.flags.c_contiguous
    np.testing.assert_array_equal(shared.array, view)
    assert shared.array.nbytes == view.nbytes
    again = pickle.loads(pickle.dumps(shared))
    np.testing.assert_array_equal(again, view)
    assert not again.flags.writeable
    for bad in (np.zeros((0, 3)), np.array([None, 1], dtype=object)):
        with pytest.raises(ValueError, match="cannot share"):
            SharedArray(bad)
