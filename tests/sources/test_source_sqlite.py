import pickle
import sqlite3

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches, run_epochs

N = 50


def make_db(path, rows=N):
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE t (id INTEGER, x REAL, name TEXT, data BLOB)")
        conn.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?)",
            [(i * 3, i / 4, f"row{i}", bytes([i % 256]) * (i % 5)) for i in range(rows)],
        )
        conn.execute("DELETE FROM t WHERE id = 9")  # a gap in the rowids
    conn.close()
    return str(path)


@pytest.fixture
def db(tmp_path):
    return make_db(tmp_path / "t.db")


def sqlite_rows(path, sql, params=()):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def test_table_records_equal_sqlite(db):
    ds = sk.from_sqlite(db, "t")
    expected = sqlite_rows(db, "SELECT id, x, name, data FROM t ORDER BY rowid")
    assert len(ds) == len(expected) == N - 1
    assert ds.columns == ["id", "x", "name", "data"]
    assert ds.kinds == {"id": "int", "x": "float", "name": "str", "data": "bytes"}
    indices = [7, 0, 48, 7, 3]
    for i, record in zip(indices, ds.__getitems__(indices), strict=True):
        assert isinstance(record["id"], np.int64)
        assert isinstance(record["x"], np.float64)
        assert (int(record["id"]), float(record["x"]), record["name"], record["data"]) == expected[
            i
        ]


def test_batch_contents_equal_sqlite(db):
    ds = sk.from_sqlite(db, "t")
    expected = sqlite_rows(db, "SELECT id, x, name, data FROM t ORDER BY rowid")
    loader = sk.DataLoader(ds, batch_size=8, shuffle=True, seed=3)
    seen = []
    for batch in loader:
        assert batch["id"].dtype == np.int64
        assert batch["x"].dtype == np.float64
        seen.extend(
            zip(
                batch["id"].tolist(), batch["x"].tolist(), batch["name"], batch["data"], strict=True
            )
        )
    assert sorted(seen) == sorted(expected)  # a shuffled epoch reads every row once


def test_query_with_params_in_order_asked(db):
    sql = "SELECT name, id * 2 AS double FROM t WHERE id > ? ORDER BY id DESC"
    ds = sk.from_sqlite(db, sql, (10,))
    expected = sqlite_rows(db, sql, (10,))
    assert len(ds) == len(expected)
    got = ds.__getitems__([5, 1, 2, 3, 4, 0])  # contiguous runs and a reorder
    assert [(r["name"], int(r["double"])) for r in got] == [expected[i] for i in [5, 1, 2, 3, 4, 0]]


@pytest.mark.parametrize("source", ["t", "SELECT * FROM t ORDER BY id"])
def test_worker_modes_give_identical_batches_and_resume(db, source):
    ds = sk.from_sqlite(db, source)
    base = sk.DataLoader(ds, batch_size=8, shuffle=True, seed=1)
    for mode in ("thread", "process"):
        other = sk.DataLoader(
            ds, batch_size=8, shuffle=True, seed=1, num_workers=2, worker_mode=mode
        )
        assert_same_batches(base, other)
    assert_resumes_exactly(base, epochs=2, max_stops=4)


def test_auto_picks_threads(db):
    loader = sk.DataLoader(sk.from_sqlite(db, "t"), batch_size=16, num_workers=2)
    it = iter(loader)
    next(it)
    assert it.stats().worker_mode == "thread"
    it.close()


def test_pickles_as_a_description(db):
    ds = sk.from_sqlite(db, "t")
    ds[0]  # opens a connection in this thread
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._handles is None
    assert copy[3]["name"] == ds[3]["name"]


def test_read_only(db):
    ds = sk.from_sqlite(db, "t")
    ds[0]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        ds._connection().execute("INSERT INTO t VALUES (1, 1.0, 'x', NULL)")


def test_null_is_nan_in_real_columns_and_an_error_elsewhere(tmp_path):
    path = str(tmp_path / "n.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE n (x REAL, k INTEGER)")
        conn.executemany("INSERT INTO n VALUES (?, ?)", [(1.5, 1), (None, 2), (2.5, None)])
    conn.close()
    ds = sk.from_sqlite(path, "n")
    batch = sk.default_collate(ds.__getitems__([0, 1]))
    assert np.isnan(batch["x"][1])
    with pytest.raises(ValueError, match=r"'k'.*record 2"):
        ds[2]


def test_mixed_types_are_refused_at_build(tmp_path):
    path = str(tmp_path / "m.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE m (v)")  # no declared type
        conn.executemany("INSERT INTO m VALUES (?)", [(1,), ("a",)])
    conn.close()
    with pytest.raises(sk.ConfigError, match=r"'v'.*CAST"):
        sk.from_sqlite(path, "m")
    ds = sk.from_sqlite(path, "SELECT CAST(v AS TEXT) AS v FROM m ORDER BY rowid")
    assert [r["v"] for r in ds.__getitems__([0, 1])] == ["1", "a"]


def test_without_rowid_table(tmp_path):
    path = str(tmp_path / "w.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE w (k TEXT PRIMARY KEY, v INTEGER) WITHOUT ROWID")
        conn.executemany("INSERT INTO w VALUES (?, ?)", [("b", 2), ("a", 1), ("c", 3)])
    conn.close()
    ds = sk.from_sqlite(path, "w")
    assert [r["k"] for r in ds.__getitems__([2, 0, 1])] == ["c", "a", "b"]


@pytest.mark.parametrize(
    "keys",
    [[5, 6, 7, 8], [7, 5, 100, 6], [-3, -2, -1, 0], []],
    ids=["a-range", "a-gap", "negative", "empty"],
)
def test_records_follow_the_rowids_with_or_without_gaps(tmp_path, keys):
    path = str(tmp_path / "k.db")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("CREATE TABLE k (id INTEGER PRIMARY KEY, v INTEGER)")
        conn.executemany("INSERT INTO k VALUES (?, ?)", [(key, 10 * key) for key in keys])
    conn.close()
    ds = sk.from_sqlite(path, "k")
    assert len(ds) == len(keys)
    got = [(int(r["id"]), int(r["v"])) for r in ds.__getitems__(list(range(len(keys))))]
    assert got == [(key, 10 * key) for key in sorted(keys)]


def test_bad_input(tmp_path, db):
    with pytest.raises(sk.ConfigError, match=r"missing\.db"):
        sk.from_sqlite(tmp_path / "missing.db", "t")
    with pytest.raises(sk.ConfigError, match=r"no table or view 'nope'.*'t'"):
        sk.from_sqlite(db, "nope")
    with pytest.raises(sk.ConfigError, match="no such column: zzz"):
        sk.from_sqlite(db, "SELECT zzz FROM t")
    with pytest.raises(sk.ConfigError, match="params"):
        sk.from_sqlite(db, "SELECT * FROM t WHERE id > ?", (object(),))
    assert len(set(sk.from_sqlite(db, "SELECT id, id FROM t ORDER BY id").columns)) == 2
    text = tmp_path / "not.db"
    text.write_text("hello, I am not a database" * 10)
    with pytest.raises(sk.ConfigError, match="not an SQLite database"):
        sk.from_sqlite(text, "t")


def test_rows_deleted_after_build_are_named(tmp_path):
    path = make_db(tmp_path / "d.db", rows=10)
    ds = sk.from_sqlite(path, "t")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM t")
    conn.close()
    with pytest.raises(RuntimeError, match="changed after the dataset was built"):
        run_epochs(sk.DataLoader(ds, batch_size=4))


@pytest.fixture
def big(tmp_path):
    return make_db(tmp_path / "big.db", rows=2000)


@pytest.mark.parametrize("source", ["t", "SELECT * FROM t ORDER BY id"])
def test_block_shuffle_reads_every_row_once_by_range_queries(big, source):
    ds = sk.from_sqlite(big, source, block_rows=64)
    sampler = ds.shuffle_sampler(seed=3, window=128)
    assert (sampler.chunk_size, sampler.window) == (64, 128)
    expected = sqlite_rows(big, f"SELECT id, x, name, data FROM ({source})")
    seen = []
    for batch in sk.DataLoader(ds, batch_size=64, sampler=sampler):
        seen.extend(
            zip(
                batch["id"].tolist(), batch["x"].tolist(), batch["name"], batch["data"], strict=True
            )
        )
    assert sorted(seen) == sorted(expected)
    assert [r[0] for r in seen] != sorted(r[0] for r in seen)  # shuffled
    assert ds.blocks_read == -(-len(ds) // 64)  # every block read once, by one range query


def test_block_reads_equal_row_lookups(big):
    blocks = sk.from_sqlite(big, "t", block_rows=32)
    rows = sk.from_sqlite(big, "t", block_rows=1)  # never 16 rows a block: row lookups
    sampler = blocks.shuffle_sampler(seed=0)
    assert_same_batches(
        sk.DataLoader(blocks, batch_size=64, sampler=sampler),
        sk.DataLoader(rows, batch_size=64, sampler=sampler),
    )
    assert blocks.blocks_read > 0
    assert rows.blocks_read == 0
    plain = sk.DataLoader(blocks, batch_size=64, shuffle=True, seed=2)
    again = sk.DataLoader(rows, batch_size=64, shuffle=True, seed=2)
    assert_same_batches(plain, again)  # the plain shuffle reads by rowid


def test_block_shuffle_same_in_every_mode_and_resumes(big):
    ds = sk.from_sqlite(big, "t", block_rows=64)
    base = sk.DataLoader(ds, batch_size=64, sampler=ds.shuffle_sampler(seed=1))
    for mode in ("thread", "process"):
        other = sk.DataLoader(
            ds, batch_size=64, sampler=ds.shuffle_sampler(seed=1), num_workers=2, worker_mode=mode
        )
        assert_same_batches(base, other, epochs=2)
    assert_resumes_exactly(base, epochs=2, max_stops=4)
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.blocks_read == 0
    assert copy.block_rows == 64


def test_bad_block_options(db):
    for bad in (0, -1, 2.5, True):
        with pytest.raises(sk.ConfigError, match="block_rows"):
            sk.from_sqlite(db, "t", block_rows=bad)
    with pytest.raises(sk.ConfigError, match="cache_bytes"):
        sk.from_sqlite(db, "t", cache_bytes=-1)
