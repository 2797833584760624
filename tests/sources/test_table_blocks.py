"""Every table source on the one block protocol: the same rows whichever way a batch is
read (from blocks, row by row, chunk by chunk), a block-aligned shuffle, and what was
read and decoded counted in ``it.stats()``."""

import json
import sqlite3

import datasets
import lance
import numpy as np
import pyarrow as pa
import pyarrow.dataset as pds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import stoker as sk
from stoker.errors import RecordValueError
from stoker.testing import assert_same_batches

N = 3000


def _table():
    ids = np.arange(N)
    lengths = (ids % 7) + 1
    offsets = np.zeros(N + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.arange(offsets[-1], dtype=np.int32))
    tokens = pa.ListArray.from_arrays(pa.array(offsets), values)
    return pa.table({"id": ids, "x": ids / 4, "tokens": tokens, "s": [f"r{i}" for i in ids]})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("blocks")
    table = _table()
    pq.write_table(table, root / "t.parquet", row_group_size=500)
    (root / "ipc").mkdir()
    for k in range(2):  # two fragments, in chunks of 256 rows
        part = table.slice(k * N // 2, N // 2)
        feather.write_feather(part, root / "ipc" / f"p{k}.arrow", chunksize=256)
    lance.write_dataset(table, root / "t.lance", max_rows_per_file=1200)
    with sqlite3.connect(root / "t.db") as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, x REAL, s TEXT)")
        rows = zip(range(N), (i / 4 for i in range(N)), (f"r{i}" for i in range(N)), strict=True)
        conn.executemany("INSERT INTO t VALUES (?, ?, ?)", rows)
    conn.close()
    with open(root / "t.jsonl", "w") as f:
        for i in range(N):
            f.write(json.dumps({"id": i, "x": i / 4, "s": f"r{i}"}) + "\n")
    return root


SOURCES = ["parquet", "ipc", "lance", "sqlite", "jsonl", "arrow", "hf"]


def _source(root, kind):
    columns = ["id", "x", "s"]
    if kind == "parquet":
        return sk.from_parquet(root / "t.parquet", columns, cache_dir=None)
    if kind == "ipc":
        return sk.from_arrow(pds.dataset(root / "ipc", format="ipc"), columns)
    if kind == "lance":
        return sk.from_lance(root / "t.lance", columns)
    if kind == "sqlite":
        return sk.from_sqlite(root / "t.db", "t", block_rows=256)
    if kind == "jsonl":
        return sk.from_jsonl(root / "t.jsonl")
    chunked = pa.Table.from_batches(_table().select(columns).to_batches(max_chunksize=128))
    if kind == "arrow":
        return sk.from_arrow(chunked)
    return sk.from_hf(datasets.Dataset(chunked).shuffle(seed=1).select(range(0, N, 2)))


@pytest.mark.parametrize("kind", SOURCES)
def test_rows_are_the_same_from_blocks_rows_and_chunks(root, kind):
    ds = _source(root, kind)
    expected = (lambda i: i) if kind != "hf" else None
    shuffled = np.random.default_rng(0).permutation(len(ds))
    order = np.arange(len(ds))
    by_rows = ds.__getitems__(shuffled[:64].tolist())  # spread: row by row or chunk by chunk
    in_order = ds.__getitems__(order[:512].tolist())  # dense: whole blocks
    again = ds.__getitems__(shuffled[:64].tolist())  # now partly from the held blocks
    ids = [int(r["id"]) for r in by_rows]
    assert ids == [int(r["id"]) for r in again]
    for record in [*by_rows, *in_order]:
        i = int(record["id"])
        assert (float(record["x"]), record["s"]) == (i / 4, f"r{i}")
    if expected is not None:
        assert ids == shuffled[:64].tolist()
        assert [int(r["id"]) for r in in_order] == list(range(512))


@pytest.mark.parametrize("kind", SOURCES)
def test_block_shuffle_reads_every_record_once_and_stats_count_it(root, kind):
    ds = _source(root, kind)
    sampler = ds.shuffle_sampler(seed=3)
    it = iter(sk.DataLoader(ds, batch_size=100, sampler=sampler))
    ids = np.concatenate([b["id"] for b in it])
    assert sorted(ids.tolist()) == sorted(int(r["id"]) for r in ds.__getitems__(range(len(ds))))
    stats = it.stats()
    assert ds.blocks_decoded == len(ds.block_sizes)  # each block decoded once
    # (a batch across two windows may touch too many blocks: it is read row by row)
    assert stats.cache_misses >= len(ds.block_sizes)
    assert stats.cache_hits > 0
    assert stats.decoded_bytes > 0
    assert stats.redecoded_bytes == 0
    assert "cache      hits" in str(stats)


@pytest.mark.parametrize("kind", ["jsonl", "ipc"])
def test_threads_and_processes_give_the_same_batches(root, kind):
    ds = _source(root, kind)
    base = sk.DataLoader(ds, batch_size=128, shuffle=True, seed=2)
    other = sk.DataLoader(ds, batch_size=128, shuffle=True, seed=2, num_workers=2)
    assert_same_batches(base, other, epochs=1)


def test_a_bad_line_fails_only_the_batch_that_reads_it(tmp_path):
    path = tmp_path / "a.jsonl"
    lines = [json.dumps({"id": i}) for i in range(1200)]  # the first 1000 say "int"
    lines[1100] = '{"id": "eleven hundred"}'
    path.write_text("\n".join(lines) + "\n")
    ds = sk.from_jsonl(path)
    assert len(ds.block_sizes) == 1  # its one block holds the bad line
    assert [int(r["id"]) for r in ds.__getitems__(list(range(100)))] == list(range(100))
    with pytest.raises(RecordValueError, match="record 1100"):
        ds.__getitems__(list(range(1000, 1200)))
    assert int(ds.__getitems__(list(range(1101, 1200)))[-1]["id"]) == 1199  # row by row
