"""from_sqlite's block path: blocks read by range queries, kept in the decode cache, gathered."""

import math
import sqlite3

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches

ROWS = 300


def write(path, create, rows):
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(create)
        width = len(rows[0])
        conn.executemany(f"INSERT INTO t VALUES ({', '.join('?' * width)})", rows)
    conn.close()
    return str(path)


def sqlite_rows(path, sql):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def as_tuples(records, columns):
    out = []
    for record in records:
        row = []
        for name in columns:
            value = record[name]
            row.append(value.item() if isinstance(value, np.generic) else value)
        out.append(tuple(row))
    return out


def same(got, expected):
    """Rows equal value for value, NaN for NULL in REAL columns, types included."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        for a, b in zip(g, e, strict=True):
            if b is None:
                assert isinstance(a, float)
                assert math.isnan(a)
            else:
                assert type(a) is type(b)
                assert a == b


@pytest.fixture
def table(tmp_path):
    """An INTEGER PRIMARY KEY (the rowid) with gaps, NULLs in REAL, text and BLOBs."""
    rows = [
        (
            i * 7 + (i % 3),
            None if i % 11 == 0 else i / 8,
            -i * 1_000_000_007,
            f"row {i} ' \" \\ \n \x00 é😀" * (i % 4),
            bytes([i % 256, 0, 255]) * (i % 3),
        )
        for i in range(ROWS)
    ]
    path = write(
        tmp_path / "t.db",
        "CREATE TABLE t (id INTEGER PRIMARY KEY, x REAL, n INTEGER, s TEXT, b BLOB)",
        rows,
    )
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM t WHERE id % 5 = 0")  # more gaps
    conn.close()
    return path


COLUMNS = ["id", "x", "n", "s", "b"]


@pytest.mark.parametrize("source", ["t", "SELECT * FROM t ORDER BY id", "v"])
def test_block_records_equal_sqlite(table, source):
    conn = sqlite3.connect(table)
    with conn:
        conn.execute("CREATE VIEW v AS SELECT * FROM t")
    conn.close()
    expected = sqlite_rows(table, "SELECT id, x, n, s, b FROM t ORDER BY id")
    ds = sk.from_sqlite(table, source, block_rows=16)
    order = np.arange(len(ds))
    got = as_tuples(ds.__getitems__(order.tolist()), COLUMNS)  # every block, in order
    same(got, expected)
    assert ds.blocks_read == -(-len(ds) // 16)
    shuffled = ds.shuffle_sampler(seed=5).cursor(0).take(len(ds))
    got = as_tuples(ds.__getitems__(shuffled.tolist()), COLUMNS)  # now from the held blocks
    same(got, [expected[i] for i in shuffled.tolist()])
    assert ds.blocks_read == -(-len(ds) // 16)


def test_integer_primary_key_is_read_from_the_rowids(table):
    ds = sk.from_sqlite(table, "t", block_rows=32)
    assert ds._alias == "id"
    batch = next(iter(sk.DataLoader(ds, batch_size=64)))
    expected = sqlite_rows(table, "SELECT id FROM t ORDER BY rowid LIMIT 64")
    assert batch["id"].dtype == np.int64
    assert batch["id"].tolist() == [r[0] for r in expected]


@pytest.mark.parametrize(
    "create",
    [
        "CREATE TABLE t (id INTEGER PRIMARY KEY DESC, x REAL)",  # an index, not the rowid
        "CREATE TABLE t (id INT PRIMARY KEY, x REAL)",
        "CREATE TABLE t (id INTEGER, x REAL, PRIMARY KEY (id, x))",
        "CREATE TABLE t (id INTEGER, x REAL)",
    ],
)
def test_other_keys_are_read_from_the_table(tmp_path, create):
    path = write(tmp_path / "k.db", create, [(100 - i, i / 2) for i in range(64)])
    ds = sk.from_sqlite(path, "t", block_rows=16)
    assert ds._alias is None
    got = as_tuples(ds.__getitems__(list(range(64))), ["id", "x"])
    assert got == sqlite_rows(path, "SELECT id, x FROM t ORDER BY rowid")
    assert ds.blocks_read == 4


def test_without_rowid_table_by_blocks(tmp_path):
    rows = [(f"k{63 - i:03d}", i, i * 0.25) for i in range(64)]
    path = write(
        tmp_path / "w.db",
        "CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER, f REAL) WITHOUT ROWID",
        rows,
    )
    ds = sk.from_sqlite(path, "t", block_rows=16)
    got = as_tuples(ds.__getitems__(list(range(64))), ["k", "v", "f"])
    assert got == sqlite_rows(path, "SELECT k, v, f FROM t ORDER BY k")
    assert ds.blocks_read == 4


def test_a_bad_value_is_reported_by_the_block_that_holds_it(tmp_path):
    rows = [(i, i) for i in range(1100)]
    rows[1037] = (1037, "thirty-seven")  # no declared type: the first 1000 rows say int
    rows[1050] = (1050, None)
    path = write(tmp_path / "m.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, v)", rows)
    ds = sk.from_sqlite(path, "t", block_rows=16)
    assert ds.kinds["v"] == "int"
    with pytest.raises(ValueError, match=r"'v'.*'thirty-seven'.*record 1037 \(rowid 1037\)"):
        ds.__getitems__(list(range(1024, 1040)))
    with pytest.raises(ValueError, match=r"'v'.*missing value.*record 1050"):
        ds.__getitems__(list(range(1040, 1056)))
    assert [int(r["v"]) for r in ds.__getitems__(list(range(1056, 1072)))] == list(
        range(1056, 1072)
    )
    rows_path = sk.from_sqlite(path, "t", block_rows=1)
    with pytest.raises(ValueError, match=r"'v'.*'thirty-seven'.*record 1037"):
        rows_path.__getitems__([1037, 5])


@pytest.mark.parametrize("budget", [0, 3000, 1 << 30])
def test_budget_keeps_results_and_bounds_what_is_held(table, budget):
    expected = sqlite_rows(table, "SELECT id, x, n, s, b FROM t ORDER BY id")
    ds = sk.from_sqlite(table, "t", block_rows=16, cache_bytes=budget)
    sampler = ds.shuffle_sampler(seed=2)  # a batch of 64 is one window of 4 blocks
    loader = sk.DataLoader(ds, batch_size=64, sampler=sampler)
    for epoch in range(2):
        got = []
        for batch in loader:
            for row in zip(*(batch[c] for c in COLUMNS), strict=True):
                got.append(tuple(v.item() if isinstance(v, np.generic) else v for v in row))
        order = sampler.cursor(epoch).take(len(ds)).tolist()
        same(got, [expected[i] for i in order])
    blocks = -(-len(ds) // 16)
    assert ds.blocks_read == (blocks if budget >= 1 << 30 else 2 * blocks)
    assert ds._held_bytes() <= budget


def test_every_mode_same_batches_and_resume_on_blocks(table):
    ds = sk.from_sqlite(table, "t", block_rows=16, cache_bytes=6000)  # evicts as it goes
    base = sk.DataLoader(ds, batch_size=32, sampler=ds.shuffle_sampler(seed=1))
    for mode in ("thread", "process"):
        other = sk.DataLoader(
            ds, batch_size=32, sampler=ds.shuffle_sampler(seed=1), num_workers=2, worker_mode=mode
        )
        assert_same_batches(base, other, epochs=2)
    assert_resumes_exactly(base, epochs=2, max_stops=5)


def test_stats_count_the_blocks_read_and_read_again(tmp_path):
    rows = [(i, i) for i in range(512)]
    path = write(tmp_path / "s.db", "CREATE TABLE t (id INTEGER PRIMARY KEY, x REAL)", rows)
    order = [*range(64), *range(64, 128), *range(64)]  # blocks 0-3, 4-7, then 0-3 again
    roomy = sk.from_sqlite(path, "t", block_rows=16)
    it = iter(sk.DataLoader(roomy, batch_size=64, sampler=order))
    assert sum(len(b["id"]) for b in it) == 192
    stats = it.stats()
    assert (stats.cache_misses, stats.cache_hits, stats.redecoded_bytes) == (8, 4, 0)
    tight = sk.from_sqlite(path, "t", block_rows=16, cache_bytes=1)  # none kept between batches
    it = iter(sk.DataLoader(tight, batch_size=64, sampler=order))
    assert sum(len(b["id"]) for b in it) == 192
    stats = it.stats()
    assert (stats.cache_misses, stats.cache_hits) == (12, 0)
    assert stats.redecoded_bytes == stats.decoded_bytes // 3
