"""The table sources' one decode cache: one budget per process, shared by every source."""

import gc
import sqlite3
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import stoker as sk
from stoker._sources.decode_cache import DecodeCache, process_cache


def test_threads_decode_each_block_once_and_get_the_same_blocks():
    cache = DecodeCache()
    cache.register("t", 1 << 20)
    decoded = []
    lock = threading.Lock()

    def decode(block):
        with lock:
            decoded.append(block)
        return np.arange(block * 10, block * 10 + 10)

    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for block in rng.integers(0, 20, 300).tolist():
                got = cache.get(("t", block), lambda b=block: decode(b), lambda a: a.nbytes)
                assert got.tolist() == list(range(block * 10, block * 10 + 10))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(decoded) == list(range(20))  # each once: everything fits
    assert cache._pending == {}


def test_a_decode_error_reaches_its_decoder_and_a_waiter_decodes_again():
    cache = DecodeCache()
    started, release = threading.Event(), threading.Event()
    calls, outcome = [], {}

    def decode():
        calls.append(threading.current_thread().name)
        if threading.current_thread().name == "first":
            started.set()
            release.wait(timeout=10)
            raise OSError("disk went away")
        return b"block"

    def run(name):
        try:
            outcome[name] = cache.get(("t", 2), decode, len)
        except OSError as exc:
            outcome[name] = exc

    first = threading.Thread(target=run, args=("first",), name="first")
    first.start()
    assert started.wait(timeout=10)
    second = threading.Thread(target=run, args=("second",), name="second")
    second.start()
    release.set()
    first.join(timeout=10)
    second.join(timeout=10)
    assert str(outcome["first"]) == "disk went away"
    assert outcome["second"] == b"block"
    assert calls == ["first", "second"]  # the second decoded it again itself


def test_one_budget_for_the_process_and_each_source_within_its_own(tmp_path):
    cache = DecodeCache()
    cache.register("a", 300)
    cache.register("b", 200)
    assert cache.budget == 300
    for block in range(3):
        cache.get(("a", block), lambda: b"x" * 100, len)
    assert cache.held_bytes("a") == 300
    cache.get(("a", 3), lambda: b"x" * 100, len)  # over a's own budget: a's oldest goes
    assert [k for k in cache.held_keys() if k[0] == "a"] == [("a", 1), ("a", 2), ("a", 3)]
    cache.get(("b", 0), lambda: b"y" * 150, len)  # over the process's: the oldest goes
    assert cache.held_keys() == [("a", 3), ("b", 0)]
    assert cache.get(("b", 1), lambda: b"z" * 250, len) == b"z" * 250  # larger than b's
    assert ("b", 1) not in cache.held_keys()
    cache.release("a")
    assert cache.held_keys() == [("b", 0)]
    assert cache.budget == 200


def test_table_sources_share_the_process_cache_and_let_go_when_collected(tmp_path):
    path = tmp_path / "t.parquet"
    table = pa.table({"x": np.arange(4000), "y": np.arange(4000.0)})
    pq.write_table(table, path, row_group_size=1000)
    db = tmp_path / "t.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v REAL)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", [(i, i / 2) for i in range(500)])
    conn.close()
    parquet = sk.from_parquet(path, cache_dir=None)
    rows = sk.from_sqlite(db, "t", block_rows=100)
    assert sum(len(b["x"]) for b in sk.DataLoader(parquet, batch_size=500)) == 4000
    assert sum(len(b["id"]) for b in sk.DataLoader(rows, batch_size=100)) == 500
    owners = {key[0] for key in process_cache().held_keys()}
    assert {parquet._key, rows._key} <= owners
    assert parquet._held_bytes() == 4 * 1000 * 16
    assert parquet.decoded_row_groups == 4
    assert rows.blocks_read == 5
    key = parquet._key
    del parquet
    gc.collect()
    assert key not in {k[0] for k in process_cache().held_keys()}
