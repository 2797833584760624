import csv
import json
import pickle

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches

N = 40


def write_jsonl(path, n=N, start=0):
    with open(path, "w") as f:
        for i in range(start, start + n):
            record = {"id": i, "score": i / 8, "text": f"line {i}", "tokens": [i, i + 1, i + 2]}
            f.write(json.dumps(record) + "\n")
            if i % 7 == 0:
                f.write("\n")  # blank lines are not records
    return str(path)


def write_csv(path, n=N):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "score", "text"])
        for i in range(n):
            text = f'he said "hi"\nto {i}' if i % 5 == 0 else f"t,{i}"  # quoted newlines
            writer.writerow([i, "" if i == 3 else i / 4, text])
    return str(path)


@pytest.fixture
def jsonl(tmp_path):
    return [write_jsonl(tmp_path / "a.jsonl"), write_jsonl(tmp_path / "b.jsonl", 10, start=N)]


@pytest.fixture
def csv_path(tmp_path):
    return write_csv(tmp_path / "t.csv")


def json_records(paths):
    records = []
    for path in sorted(paths):
        with open(path) as f:
            records.extend(json.loads(line) for line in f if line.strip())
    return records


def test_jsonl_records_equal_json(jsonl):
    ds = sk.from_jsonl(jsonl)
    expected = json_records(jsonl)
    assert len(ds) == len(expected) == N + 10
    assert ds.kinds == {"id": "int", "score": "float", "text": "str", "tokens": "list[int]"}
    indices = [45, 0, 13, 45, 7]
    for i, record in zip(indices, ds.__getitems__(indices), strict=True):
        want = expected[i]
        assert isinstance(record["id"], np.int64)
        assert record["id"] == want["id"]
        assert record["score"] == want["score"]
        assert record["text"] == want["text"]
        assert record["tokens"].dtype == np.int64
        assert record["tokens"].tolist() == want["tokens"]


def test_jsonl_batches_and_shuffled_epoch(jsonl):
    loader = sk.DataLoader(sk.from_jsonl(jsonl), batch_size=8, shuffle=True, seed=2)
    ids = []
    for batch in loader:
        assert batch["tokens"].shape == (len(batch["id"]), 3)
        np.testing.assert_array_equal(batch["tokens"][:, 0], batch["id"])
        ids.extend(batch["id"].tolist())
    assert sorted(ids) == list(range(N + 10))


def test_csv_records_equal_dictreader(csv_path):
    ds = sk.from_csv(csv_path)
    with open(csv_path, newline="") as f:
        expected = list(csv.DictReader(f))
    assert len(ds) == len(expected) == N
    assert ds.kinds == {"id": "int", "score": "float", "text": "str"}
    for i, record in zip([10, 0, 3, 39], ds.__getitems__([10, 0, 3, 39]), strict=True):
        want = expected[i]
        assert record["id"] == int(want["id"])
        assert record["text"] == want["text"]
        if want["score"]:
            assert record["score"] == float(want["score"])
        else:
            assert np.isnan(record["score"])


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_worker_modes_give_identical_batches_and_resume(jsonl, csv_path, kind):
    ds = sk.from_jsonl(jsonl) if kind == "jsonl" else sk.from_csv(csv_path)
    base = sk.DataLoader(ds, batch_size=8, shuffle=True, seed=1)
    for mode in ("thread", "process"):
        other = sk.DataLoader(
            ds, batch_size=8, shuffle=True, seed=1, num_workers=2, worker_mode=mode
        )
        assert_same_batches(base, other)
    assert_resumes_exactly(base, epochs=2, max_stops=4)
    assert pickle.loads(pickle.dumps(ds))[5] is not None


def test_index_is_cached_beside_the_file_and_rebuilt_when_stale(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", 5)
    index = tmp_path / ".c.jsonl.stoker-index.npy"
    assert len(sk.from_jsonl(path)) == 5
    assert index.exists()
    before = index.stat().st_mtime_ns
    assert len(sk.from_jsonl(path)) == 5  # read from the cache
    assert index.stat().st_mtime_ns == before
    with open(path, "a") as f:
        f.write(json.dumps({"id": 5, "score": 0.0, "text": "x", "tokens": [1]}) + "\n")
    ds = sk.from_jsonl(path)
    assert len(ds) == 6
    assert ds[5]["id"] == 5
    assert index.stat().st_mtime_ns != before


def test_index_goes_to_the_cache_directory_when_it_cannot_be_written_beside(tmp_path, monkeypatch):
    path = write_jsonl(tmp_path / "d.jsonl", 4)
    (tmp_path / ".d.jsonl.stoker-index.npy").mkdir()  # nothing can be written there
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert len(sk.from_jsonl(path)) == 4
    (cached,) = (tmp_path / "cache" / "stoker" / "index").glob("*.npy")
    before = cached.stat().st_mtime_ns
    assert sk.from_jsonl(path)[3]["id"] == 3
    assert cached.stat().st_mtime_ns == before


def test_file_changed_after_build_is_named(tmp_path):
    path = write_jsonl(tmp_path / "e.jsonl", 5)
    ds = sk.from_jsonl(path)
    with open(path, "a") as f:
        f.write("{}\n")
    with pytest.raises(RuntimeError, match="changed after the dataset was built"):
        ds[0]


def test_bad_input(tmp_path):
    with pytest.raises(sk.ConfigError, match=r"no such file.*nope\.jsonl"):
        sk.from_jsonl(tmp_path / "nope.jsonl")
    with pytest.raises(sk.ConfigError, match="matches no file"):
        sk.from_csv(str(tmp_path / "*.csv"))
    missing = tmp_path / "m.jsonl"
    missing.write_text('{"a": 1, "b": 2}\n{"a": 3}\n')
    with pytest.raises(ValueError, match=r"line 2.*no key 'b'"):
        sk.from_jsonl(missing)[1]
    bad = tmp_path / "b.csv"
    bad.write_text("a,b\n1,2\nx,3\n")
    ds = sk.from_csv(bad)
    assert ds.kinds == {"a": "str", "b": "int"}
    with pytest.raises(ValueError, match=r"'a'.*not int"):
        sk.from_csv(bad, dtypes={"a": "int"})[1]
    with pytest.raises(sk.ConfigError, match="not a column"):
        sk.from_csv(bad, dtypes={"zz": "int"})
    with pytest.raises(sk.NotSupportedError, match="escapechar"):
        sk.from_csv(bad, escapechar="\\")
    with pytest.raises(sk.ConfigError, match=r"csv\.reader"):
        sk.from_csv(bad, delimiter="toolong")


def test_csv_options_and_crlf(tmp_path):
    path = tmp_path / "semi.csv"
    path.write_bytes(b"a;b\r\n1;'x;y'\r\n2;z\r\n")
    ds = sk.from_csv(path, delimiter=";", quotechar="'")
    assert [(int(r["a"]), r["b"]) for r in ds.__getitems__([1, 0])] == [(2, "z"), (1, "x;y")]
