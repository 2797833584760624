"""Remote reads against a real HTTP server on 127.0.0.1 that throttles and fails.

The server (tests/http_helpers.py) answers some requests with 429 (with and without
Retry-After), 503, a delay, a stall longer than the client's timeout, a reset
connection or a body cut short, decided from a seeded hash of the request and its
try, and always answers in full from the fourth try of a request on. Every record
must arrive exactly once, in the batches of a clean run, and resume exactly.
"""

import io
import pickle
import tarfile

import numpy as np
import pytest

import stoker as sk
from http_helpers import Faults, serve
from stoker.testing import assert_resumes_exactly, run_epochs

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

STORM = {
    "throttle": 0.12,
    "throttle_after": 0.06,
    "unavailable": 0.1,
    "delay": 0.05,
    "stall": 0.02,
    "reset": 0.05,
    "truncate": 0.1,
}
# Fast back-off for tests; a stalled request (0.8 s) outlasts the 0.5 s timeout.
FAST = sk.RetryPolicy(attempts=8, backoff=0.002, max_backoff=0.02, total_seconds=60.0, timeout=0.5)
N_FILES = 24


def _blob(i):
    return np.random.default_rng(i).integers(0, 256, 2000 + 300 * i, dtype=np.uint8).tobytes()


def _tar(path, shard, n):
    with tarfile.open(path, "w") as tar:
        for k in range(n):
            for ext, value in (("bin", _blob(100 * shard + k)), ("cls", str(k).encode())):
                info = tarfile.TarInfo(f"s{shard}/{k:03d}.{ext}")
                info.size = len(value)
                tar.addfile(info, io.BytesIO(value))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Files, tar shards and a Parquet file behind one server; its faults are set per test."""
    root = tmp_path_factory.mktemp("store")
    for i in range(N_FILES):
        (root / f"{i:02d}.bin").write_bytes(_blob(i))
    for s in range(4):
        _tar(root / f"shard-{s}.tar", s, 5)
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    n = 80_000
    table = pa.table(
        {
            "id": np.arange(n, dtype=np.int64),
            "x": np.random.default_rng(0).random(n),
            "tokens": pa.array([list(range(i % 7)) for i in range(n)], type=pa.list_(pa.int32())),
        }
    )
    pq.write_table(table, root / "t.parquet", row_group_size=10_000)
    faults = Faults(seed=7, stall_seconds=0.8)
    with serve(root, faults=faults) as url:
        yield url, root, faults


def _storm(faults, seed=7):
    faults.reset(rates=dict(STORM), seed=seed, always=frozenset(), retry_after="0.01")


def _clean(faults):
    faults.reset(rates={}, always=frozenset())


def _bytes_batches(loader):
    return [list(b["bytes"]) for b in run_epochs(loader, 1)]


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("thread", 2), ("process", 2)])
def test_files_every_record_once_in_the_batches_of_a_clean_run(store, mode, workers):
    url, _, faults = store
    ds = sk.from_files([f"{url}/{i:02d}.bin" for i in range(N_FILES)], retry=FAST)
    kwargs = {"batch_size": 5, "shuffle": True, "seed": 3}
    _clean(faults)
    clean = _bytes_batches(sk.DataLoader(ds, **kwargs))
    assert sorted(b for batch in clean for b in batch) == sorted(_blob(i) for i in range(N_FILES))
    _storm(faults)
    loader = sk.DataLoader(ds, num_workers=workers, worker_mode=mode, **kwargs)
    it = iter(loader)
    stormy = [list(b["bytes"]) for b in it]
    assert stormy == clean
    stats = it.stats()
    answered = sum(faults.count(f) for f in ("throttle", "throttle_after", "unavailable"))
    failed = answered + faults.count("truncate")
    assert failed > 0  # the storm hit some requests
    # Each one answered with an error or cut short was tried again (a reset may be
    # retried by the HTTP client itself, a stall when it outlasted the timeout).
    assert stats.remote_retries >= failed
    assert stats.remote_requests == N_FILES + stats.remote_retries
    assert stats.remote_truncated == faults.count("truncate")
    assert stats.remote_bytes == sum(len(_blob(i)) for i in range(N_FILES))
    assert "remote" in str(stats)


def test_files_resume_exactly_under_the_storm(store):
    url, _, faults = store
    ds = sk.from_files([f"{url}/{i:02d}.bin" for i in range(N_FILES)], retry=FAST)
    _storm(faults, seed=11)
    loader = sk.DataLoader(ds, batch_size=4, shuffle=True, seed=1, collate_fn=list)
    assert_resumes_exactly(loader, epochs=2, max_stops=4)


def _keys(batches):
    return [(s["__key__"], s["bin"]) for batch in batches for s in batch]


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("thread", 2), ("process", 2)])
def test_tar_shards_every_sample_once_and_resume(store, mode, workers):
    url, _, faults = store
    shards = [f"{url}/shard-{s}.tar" for s in range(4)]
    ds = sk.from_tar_shards(shards, retry=FAST)
    kwargs = {"batch_size": 3, "collate_fn": list, "num_workers": workers, "worker_mode": mode}
    _clean(faults)
    clean = run_epochs(sk.DataLoader(ds, **kwargs), 1)
    expected = sorted((f"s{s}/{k:03d}", _blob(100 * s + k)) for s in range(4) for k in range(5))
    assert sorted(_keys(clean)) == expected
    _storm(faults, seed=3)
    it = iter(sk.DataLoader(ds, **kwargs))
    assert _keys(list(it)) == _keys(clean)
    assert faults.count("truncate") + faults.count("reset") > 0
    assert it.stats().remote_retries >= faults.count("truncate")
    if mode != "process":
        _storm(faults, seed=4)
        assert_resumes_exactly(sk.DataLoader(ds, **kwargs), epochs=1, max_stops=3)


@pytest.mark.parametrize("prefetch", [None, 2])
@pytest.mark.parametrize("shuffled", [False, True])
def test_a_stream_read_without_workers_reports_its_remote_reads(store, prefetch, shuffled):
    """num_workers=0, on the caller's thread or one reading ahead: the stream's reads
    are counted in it.stats() as with workers (requests, 429s retried, bytes)."""
    url, _, faults = store
    ds = sk.from_tar_shards([f"{url}/shard-{s}.tar" for s in range(4)], retry=FAST)
    if shuffled:
        ds = ds.shuffle(8, seed=0)
    faults.reset(rates={"throttle": 0.3, "throttle_after": 0.1}, seed=2, always=frozenset())
    it = iter(sk.DataLoader(ds, batch_size=3, collate_fn=list, prefetch=prefetch))
    assert len(_keys(list(it))) == 20
    stats = it.stats()
    ranged = [(path, fault) for m, path, r, fault in faults.log if m == "GET" and r]
    throttled = sum(1 for _, fault in ranged if fault is not None)
    assert throttled > 0  # the store answered 429 to some reads of the shards
    assert stats.num_workers == 0
    assert stats.remote_requests >= len(ranged)
    assert stats.remote_retries >= throttled
    assert stats.remote_bytes >= sum((store[1] / f"shard-{s}.tar").stat().st_size for s in range(4))
    assert "remote" in str(stats)


def test_parquet_under_the_storm_reads_the_local_rows(store):
    url, root, faults = store
    columns = ["id", "x", "tokens"]
    local = sk.from_parquet(root / "t.parquet", columns=columns, cache_dir=None)
    _storm(faults, seed=5)
    remote = sk.from_parquet(f"{url}/t.parquet", columns=columns, retry=FAST)
    kwargs = {"batch_size": 4000, "shuffle": True, "seed": 2, "collate_fn": list}
    expected = run_epochs(sk.DataLoader(local, **kwargs), 1)
    got = run_epochs(sk.DataLoader(remote, num_workers=2, worker_mode="thread", **kwargs), 1)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert [int(r["id"]) for r in a] == [int(r["id"]) for r in b]
        assert [r["tokens"].tolist() for r in a] == [r["tokens"].tolist() for r in b]
    assert sum(f is not None for *_, f in faults.log) > 0  # the storm hit some requests


def _ranges(faults, path):
    """(start, end) of every logged GET of ``path``; (0, None) for a whole-file GET."""
    out = []
    for method, p, ranged, _ in faults.log:
        if method == "GET" and p == path:
            if ranged is None:
                out.append((0, None))
            else:
                lo, _, hi = ranged[6:].partition("-")
                out.append((int(lo), int(hi) + 1))
    return out


def test_parquet_reads_footer_and_row_groups_by_range(store):
    url, root, faults = store
    size = (root / "t.parquet").stat().st_size
    _clean(faults)
    ds = sk.from_parquet(f"{url}/t.parquet", columns=["id"], cache_dir=None)
    built = _ranges(faults, "/t.parquet")
    assert built
    assert all(end is not None and end - start <= 64 << 10 for start, end in built)
    assert max(end for _, end in built) == size  # the footer, from the end
    faults.reset()
    assert int(ds[12_345]["id"]) == 12_345
    read = _ranges(faults, "/t.parquet")
    assert read  # the row group was fetched ...
    assert all(end is not None for _, end in read)  # ... by range, never whole
    assert sum(end - start for start, end in read) < size / 4
    assert faults.count(method="HEAD") == 0  # the size came with the dataset


def test_budget_exhausted_names_the_url_the_tries_and_the_fix(store):
    url, _, faults = store
    faults.reset(rates={}, always=frozenset({"/03.bin"}))
    policy = sk.RetryPolicy(attempts=3, backoff=0.001, max_backoff=0.002)
    ds = sk.from_files([f"{url}/{i:02d}.bin" for i in range(6)], retry=policy)
    with pytest.raises(sk.RemoteReadError) as info:
        ds[3]
    exc = info.value
    assert exc.url == f"{url}/03.bin"
    assert exc.attempts == 3
    assert exc.last_error.startswith("HTTP 503")
    assert faults.count("unavailable") == 3
    for words in (f"{url}/03.bin", "3 times", "HTTP 503", "RetryPolicy(attempts=", "concurrency="):
        assert words in str(exc)
    copy = pickle.loads(pickle.dumps(exc))  # crosses from a process worker as itself
    assert (type(copy), copy.url, copy.attempts, str(copy)) == (type(exc), exc.url, 3, str(exc))
    for workers, mode in ((0, "inline"), (1, "process")):
        loader = sk.DataLoader(ds, batch_size=3, num_workers=workers, worker_mode=mode)
        with pytest.raises(sk.RemoteReadError, match=r"03\.bin") as info:
            list(loader)
        assert info.value.sample_index == 3


def test_retry_after_is_waited_for(store):
    url, _, faults = store
    faults.reset(rates={"throttle_after": 1.0}, faulty_tries=1, retry_after="0.3", seed=1)
    try:
        ds = sk.from_files([f"{url}/00.bin", f"{url}/01.bin"], retry=FAST)
        it = iter(sk.DataLoader(ds, batch_size=2))
        assert list(next(it)["bytes"]) == [_blob(0), _blob(1)]
        stats = it.stats()
    finally:
        faults.reset(faulty_tries=3)
    assert stats.remote_retries == 2
    assert stats.remote_backoff_seconds >= 0.6 - 1e-9  # two waits of at least Retry-After each


def test_a_listing_is_made_once_and_handed_to_workers_and_hosts(tmp_path):
    from PIL import Image

    for c, cls in enumerate(("a", "b", "c")):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        for k in range(4):
            Image.new("RGB", (4, 3), (c, k, 0)).save(tmp_path / "imgs" / cls / f"{k}.png")
    faults = Faults()
    with serve(tmp_path, faults=faults) as url:
        ds = sk.from_image_folder(f"{url}/imgs/")
        listings = [p for m, p, _, _ in faults.log if p.endswith("/")]
        assert sorted(listings) == ["/imgs/", "/imgs/a/", "/imgs/b/", "/imgs/c/"]
        faults.reset()
        for host in range(2):
            loader = sk.DataLoader(
                ds, batch_size=2, num_workers=2, worker_mode="process", shard=sk.Shard(host, 2)
            )
            assert sum(len(b["label"]) for b in loader) == 6
        assert [p for _, p, _, _ in faults.log if p.endswith("/")] == []  # no listing again
        assert faults.count(method="GET") == 12


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("process", 2)])
def test_remote_tar_decode_error_names_the_url_and_sample(tmp_path, mode, workers):
    corrupt = b"\xff\xd8\xff\xe0" + b"not a jpeg" * 8
    with tarfile.open(tmp_path / "0.tar", "w") as tar:
        for k in range(4):
            info = tarfile.TarInfo(f"{k}.jpg")
            value = corrupt if k == 2 else _jpeg()
            info.size = len(value)
            tar.addfile(info, io.BytesIO(value))
    with serve(tmp_path, faults=Faults()) as url:
        ds = sk.from_tar_shards([f"{url}/0.tar"]).map(sk.vision.Decode(key="jpg"))
        loader = sk.DataLoader(ds, batch_size=2, num_workers=workers, worker_mode=mode)
        with pytest.raises(sk.vision.DecodeError) as info:
            list(loader)
    text = "\n".join([str(info.value), *getattr(info.value, "__notes__", [])])
    assert f"{url}/0.tar" in text
    assert "'2.jpg'" in text
    assert "stream" in text  # where in the stream: the record of its batch


def _jpeg():
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (6, 5), (9, 8, 7)).save(buf, format="JPEG")
    return buf.getvalue()


def test_verdict_names_throttling_when_retries_are_frequent():
    def stats(retries):
        return sk.LoaderStats(
            batches=100,
            samples=3200,
            wait_seconds=9.0,
            produce_seconds=9.0,
            fetch_seconds=9.0,
            collate_seconds=0.1,
            elapsed_seconds=10.0,
            worker_mode="thread",
            prefetch="-",
            num_workers=4,
            worker_utilisation=0.9,
            remote_requests=1000,
            remote_retries=retries,
            remote_backoff_seconds=4.0,
        )

    throttled = stats(120).verdict
    assert throttled.stage == "read"
    assert "throttles" in throttled.reason
    assert "12%" in throttled.reason
    assert "concurrency=" in throttled.advice[0]
    assert "throttles" not in stats(10).verdict.reason  # 1 % retried: not the limit
    assert "retried 120 (12%" in str(stats(120))
