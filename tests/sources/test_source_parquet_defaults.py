"""Parquet files as pyarrow writes them by default (one row group) and with many small
row groups, read with ``shuffle=True`` and nothing tuned: the decoded copy that
``from_parquet`` makes by itself, and what the stats and the verdict say."""

import functools
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_in_every_mode, run_epochs

N = 3000
PAD = 48


def _table(n=N, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 64, n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = rng.integers(0, 50_000, int(offsets[-1]), dtype=np.int32)
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64) + seed * n),
            "tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
            "score": pa.array(rng.random(n).astype(np.float32)),
        }
    )


@pytest.fixture(params=["defaults", "many_groups"])
def path(request, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    target = tmp_path / "t.parquet"
    if request.param == "defaults":
        pq.write_table(_table(), target)  # pyarrow's defaults: one row group
    else:
        pq.write_table(_table(), target, row_group_size=100)
    return target


def _loader(ds, **kwargs):
    pad = functools.partial(sk.pad_collate, max_length=PAD)
    return sk.DataLoader(ds, batch_size=32, shuffle=True, seed=3, collate_fn=pad, **kwargs)


def _padded_reference(path, order):
    table = pq.read_table(path).take(pa.array(order))
    out = np.zeros((len(order), PAD), dtype=np.int32)
    for i, row in enumerate(table.column("tokens").to_pylist()):
        out[i, : min(PAD, len(row))] = row[:PAD]
    return table.column("id").to_numpy(), out, table.column("score").to_numpy()


def _copy_files(root):
    return sorted(p.name for p in Path(root).rglob("*.bin"))


def test_the_default_read_makes_one_decoded_copy_and_gives_pyarrows_records(path):
    # A small decode cache stands in for a file larger than the default 256 MiB.
    ds = sk.from_parquet(path, cache_bytes=64_000)
    assert len(ds.cache_folders) == 1  # the copy is planned: the data exceed the cache
    batches = run_epochs(_loader(ds), epochs=2)
    assert _copy_files(ds.cache_folders[0]) == ["rows.bin"]  # written once, whole
    order = sk.RandomSampler(N, seed=3)
    for epoch in range(2):
        ids, tokens, scores = _padded_reference(path, order.cursor(epoch=epoch).take(N))
        got = batches[epoch * 94 : (epoch + 1) * 94]
        assert len(batches) == 2 * 94  # ceil(3000 / 32) a epoch
        np.testing.assert_array_equal(np.concatenate([b["id"] for b in got]), ids)
        np.testing.assert_array_equal(np.concatenate([b["tokens"] for b in got]), tokens)
        np.testing.assert_array_equal(np.concatenate([b["score"] for b in got]), scores)
        assert sorted(ids.tolist()) == list(range(N))  # every record once per epoch
    groups = len(ds.row_group_sizes)
    assert ds.decoded_row_groups == groups  # each row group decoded once, for the copy
    again = sk.from_parquet(path, cache_bytes=64_000)  # a later run reuses the copy
    second = run_epochs(_loader(again), epochs=1)
    assert again.decoded_row_groups == 0
    for a, b in zip(batches, second, strict=False):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])


def test_the_default_read_is_deterministic_resumes_exactly_and_same_in_every_mode(path):
    ds = sk.from_parquet(path, cache_bytes=64_000)
    first = run_epochs(_loader(ds), epochs=1)
    second = run_epochs(_loader(sk.from_parquet(path, cache_bytes=64_000)), epochs=1)
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
    assert_resumes_exactly(_loader(ds), epochs=2, max_stops=12)
    pad = functools.partial(sk.pad_collate, max_length=PAD)
    assert_same_in_every_mode(ds, batch_size=32, shuffle=True, seed=3, collate_fn=pad)


def test_process_workers_build_the_copy_once_between_them(path):
    ds = sk.from_parquet(path, cache_bytes=64_000)
    with _loader(ds, num_workers=2, worker_mode="process") as loader:
        workers = run_epochs(loader, epochs=1)
    assert _copy_files(ds.cache_folders[0]) == ["rows.bin"]
    inline = run_epochs(_loader(sk.from_parquet(path, cache_bytes=64_000)), epochs=1)
    for a, b in zip(workers, inline, strict=True):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
        np.testing.assert_array_equal(a["id"], b["id"])


def test_a_changed_file_gets_a_new_copy(path):
    ds = sk.from_parquet(path, cache_bytes=64_000)
    run_epochs(_loader(ds), epochs=1)
    pq.write_table(_table(seed=1), path)
    os.utime(path, ns=(0, os.stat(path).st_mtime_ns + 1_000_000_000))
    changed = sk.from_parquet(path, cache_bytes=64_000)
    assert changed.cache_folders != ds.cache_folders
    ids = np.concatenate([b["id"] for b in run_epochs(_loader(changed), epochs=1)])
    assert sorted(ids.tolist()) == list(range(N, 2 * N))


def test_no_copy_when_the_data_fit_the_cache_or_hold_strings_or_when_turned_off(tmp_path, path):
    assert sk.from_parquet(path).cache_folders == []  # fits the default 256 MiB
    assert sk.from_parquet(path, cache_bytes=64_000, cache_dir=None).cache_folders == []
    named = tmp_path / "named.parquet"
    pq.write_table(_table().append_column("name", pa.array([f"r{i}" for i in range(N)])), named)
    with_strings = sk.from_parquet(named, cache_bytes=64_000)
    assert with_strings.cache_folders == []
    ids = np.concatenate([b["id"] for b in run_epochs(_loader(with_strings), epochs=1)])
    assert sorted(ids.tolist()) == list(range(N))


def test_stats_count_cache_hits_and_bytes_decoded(path):
    ds = sk.from_parquet(path, cache_bytes=64_000)
    it = iter(_loader(ds))
    batches = sum(1 for _ in it)
    stats = it.stats()
    # The copy decoded the data once, in pieces of 1,024 rows (a quarter of the decode
    # cache at most, and at least 1,024 rows), whatever the row groups.
    assert stats.cache_misses == 3
    assert stats.cache_hits == batches  # then every batch read the copy
    assert stats.decoded_bytes > 0
    assert stats.redecoded_bytes == 0
    assert "cache      hits" in str(stats)
    assert "thrash" not in stats.verdict.reason
    with _loader(ds, num_workers=2, worker_mode="process") as loader:
        it = iter(loader)
        sum(1 for _ in it)
        assert it.stats().cache_hits == batches  # counted in the workers, summed here


def test_the_verdict_names_a_thrashing_decode_cache(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(_table(), path)
    ds = sk.from_parquet(path, cache_bytes=1, cache_dir=None)  # nothing kept, no copy
    it = iter(_loader(ds))
    for _, _batch in zip(range(12), it, strict=False):
        pass
    stats = it.stats()
    assert stats.cache_misses == 12
    assert stats.redecoded_bytes == 11 * stats.decoded_bytes // 12
    verdict = stats.verdict
    assert verdict.kind == "input-bound"
    assert verdict.stage == "read"
    assert "thrashes" in verdict.reason
    # The one row group (decoded larger than cache_bytes=1) named, and its fixes.
    assert "from_parquet('t.parquet'): its cache_bytes (1 B) holds 0 of its 1 row groups" in (
        verdict.reason
    )
    assert verdict.advice[0].startswith("from_parquet('t.parquet'): cache_bytes=")
    assert any("cache_dir=" in a for a in verdict.advice)
    assert not any("more workers" in a for a in verdict.advice)
    it.close()


def test_the_thrash_rule_on_made_up_counters():
    common = {
        "batches": 100,
        "samples": 3200,
        "wait_seconds": 1.9,
        "produce_seconds": 1.9,
        "fetch_seconds": 1.8,
        "collate_seconds": 0.1,
        "elapsed_seconds": 2.0,
        "worker_mode": "process",
        "prefetch": "2 process workers",
        "num_workers": 2,
        "worker_utilisation": 1.0,
    }
    thrash = sk.LoaderStats(
        **common, cache_misses=100, decoded_bytes=100_000, redecoded_bytes=98_000
    )
    assert "thrashes" in thrash.verdict.reason
    assert "cache_dir" in thrash.bottleneck
    healthy = sk.LoaderStats(**common, cache_misses=10, decoded_bytes=10_000)
    assert "thrashes" not in healthy.verdict.reason
