"""from_parquet over fsspec URLs: memory:// and a real HTTP server on 127.0.0.1."""

import functools
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stoker as sk
from http_helpers import serve
from stoker.testing import assert_resumes_exactly, assert_same_batches

fsspec = pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

N = 200


def _table(n, start):
    rng = np.random.default_rng(start)
    lengths = rng.integers(0, 6, n)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "score": pa.array(rng.random(n).astype(np.float32)),
            "name": pa.array([f"row-{start + i}" for i in range(n)]),
            "tokens": pa.array([list(range(int(k))) for k in lengths], type=pa.list_(pa.int32())),
        }
    )


@pytest.fixture
def local(tmp_path):
    pq.write_table(_table(N, 0), tmp_path / "a.parquet", row_group_size=32)
    pq.write_table(_table(N // 2, N), tmp_path / "b.parquet", row_group_size=16)
    return tmp_path


@pytest.fixture
def server(local):
    """A real HTTP server on 127.0.0.1 serving the local files; ended by the fixture."""
    with serve(local) as url:
        yield url


@pytest.fixture
def memory(local):
    fs = fsspec.filesystem("memory")
    base = f"/stoker-{uuid.uuid4().hex}"  # memory:// paths are rooted at /
    for name in ("a.parquet", "b.parquet"):
        fs.pipe(f"{base}/data/{name}", (local / name).read_bytes())
    fs.pipe(f"{base}/data/_SUCCESS", b"")
    yield f"memory:/{base}"  # memory://stoker-...
    fs.rm(base, recursive=True)


def _loader(ds, **kwargs):
    pad = functools.partial(sk.pad_collate, max_length=4)
    return sk.DataLoader(ds, batch_size=24, shuffle=True, seed=5, collate_fn=pad, **kwargs)


def test_memory_glob_and_folder_read_the_batches_of_the_local_files(local, memory):
    by_glob = sk.from_parquet(f"{memory}/data/*.parquet")
    by_folder = sk.from_parquet(f"{memory}/data")
    assert by_glob.paths == [f"{memory}/data/a.parquet", f"{memory}/data/b.parquet"]
    assert by_folder.paths == by_glob.paths  # marker files left out
    assert len(by_glob) == N + N // 2
    base = _loader(sk.from_parquet(local))
    assert_same_batches(base, _loader(by_glob), epochs=2)
    assert_same_batches(base, _loader(by_folder))
    assert_resumes_exactly(_loader(by_glob), epochs=1, max_stops=3)


def test_http_urls_in_every_worker_mode(local, server):
    urls = [f"{server}/a.parquet", f"{server}/b.parquet"]
    ds = sk.from_parquet(urls, columns=["id", "tokens", "name"])
    assert ds.row_group_sizes == sk.from_parquet(local).row_group_sizes
    base = _loader(sk.from_parquet(local, columns=["id", "tokens", "name"]))
    assert_same_batches(base, _loader(ds))
    for mode in ("thread", "process"):
        assert_same_batches(base, _loader(ds, num_workers=2, worker_mode=mode))


def test_http_with_a_cache_dir_reads_the_decoded_copy(local, server, tmp_path_factory):
    cache = tmp_path_factory.mktemp("decoded")
    url = f"{server}/a.parquet"
    ds = sk.from_parquet(url, columns=["id", "score", "tokens"], cache_dir=cache)
    assert ds.write_cache() == len(ds.row_group_sizes)
    expected = sk.from_parquet(local / "a.parquet", columns=["id", "score", "tokens"])
    assert_same_batches(_loader(expected), _loader(ds))


def test_bad_urls_are_config_errors(memory, server):
    with pytest.raises(sk.ConfigError, match="matches no file"):
        sk.from_parquet(f"{memory}/data/*.nothing")
    with pytest.raises(sk.ConfigError, match=r"missing\.parquet"):
        sk.from_parquet(f"{server}/missing.parquet")
    with pytest.raises(sk.ConfigError, match="cannot glob over HTTP"):
        sk.from_parquet(f"{server}/*.parquet")
    with pytest.raises(sk.ConfigError, match="storage_options"):
        sk.from_parquet(f"{memory}/data", storage_options="anon")
