import sqlite3
import threading

import pytest

import stoker as sk


class SQLiteRows(sk.Dataset):
    """A user's dataset that opens its connection in __init__ (the usual mistake)."""

    def __init__(self):
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute("CREATE TABLE t (x INTEGER)")
        self._conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(8)])

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return self._conn.execute("SELECT x FROM t WHERE rowid = ?", (i + 1,)).fetchone()[0]


def test_open_connection_is_named_for_process_workers():
    ds = SQLiteRows()
    try:
        loader = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="process")
        with pytest.raises(TypeError) as info:
            list(loader)
        message = str(info.value)
        assert isinstance(info.value, sk.ConfigError)
        assert "SQLiteRows._conn: sqlite3.Connection cannot be sent to process workers" in message
        assert 'worker_mode="thread"' in message
        assert "sk.from_sqlite" in message
        # the same dataset works on threads
        threaded = sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="thread")
        assert [b.tolist() for b in threaded] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    finally:
        ds._conn.close()


def test_lock_nested_in_a_map_closure_is_named():
    lock = threading.Lock()

    def add(x):
        with lock:
            return x + 1

    loader = sk.DataLoader(
        sk.range(0, 4).map(add), batch_size=2, num_workers=2, worker_mode="process"
    )
    with pytest.raises(TypeError, match=r"<closure lock>: _thread\.lock cannot be sent"):
        list(loader)
