import pickle

import numpy as np
import pyarrow as pa
import pytest

lance = pytest.importorskip("lance")

import stoker as sk  # noqa: E402
from stoker.testing import (  # noqa: E402
    assert_resumes_exactly,
    assert_same_in_every_mode,
)

N = 200
FIXED = ["id", "score", "name", "vec"]


def _table(n=N, start=0):
    rng = np.random.default_rng(start)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "score": pa.array(rng.random(n).astype(np.float32)),
            "name": pa.array([f"row-{start + i}" for i in range(n)]),
            "tokens": pa.array([list(range(i % 6)) for i in range(n)], type=pa.list_(pa.int32())),
            "vec": pa.array(
                [[i, i + 1, i + 2, i + 3] for i in range(start, start + n)],
                type=pa.list_(pa.float32(), 4),
            ),
        }
    )


@pytest.fixture
def uri(tmp_path):
    path = tmp_path / "x.lance"
    lance.write_dataset(_table(), path, max_rows_per_file=64)  # several fragments
    return str(path)


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def test_records_equal_what_lance_reads(uri):
    ds = sk.from_lance(uri)
    assert len(ds) == N
    assert ds.columns == ["id", "score", "name", "tokens", "vec"]
    order = np.random.default_rng(0).integers(0, N, 40).tolist()
    expected = lance.dataset(uri).take(order).to_pylist()
    for record, row in zip(ds.__getitems__(order), expected, strict=True):
        assert {k: _plain(v) for k, v in record.items()} == row
    record = ds[7]
    assert isinstance(record["id"], np.int64)
    assert isinstance(record["score"], np.float32)
    assert isinstance(record["name"], str)
    assert record["tokens"].dtype == np.int32
    assert record["tokens"].ndim == 1
    assert record["vec"].shape == (4,)


def test_take_keeps_the_order_asked_for_across_fragments(uri):
    ds = sk.from_lance(uri, columns=["id"])
    order = np.random.default_rng(1).permutation(N)
    order = np.concatenate([order, order[:10]])  # repeats too
    assert [int(r["id"]) for r in ds.__getitems__(order.tolist())] == order.tolist()


def test_batches_are_column_arrays(uri):
    loader = sk.DataLoader(sk.from_lance(uri, columns=FIXED), batch_size=16, shuffle=True)
    batch = next(iter(loader))
    assert list(batch) == FIXED
    expected = lance.dataset(uri).take(batch["id"].tolist()).to_pydict()
    assert batch["score"].dtype == np.float32
    assert batch["score"].tolist() == pytest.approx(expected["score"])
    assert batch["vec"].shape == (16, 4)
    assert batch["vec"].tolist() == expected["vec"]
    assert batch["name"] == expected["name"]


def test_variable_length_lists_are_padded_by_pad_collate(uri):
    ds = sk.from_lance(uri, columns=["id", "tokens"])
    batch = next(iter(sk.DataLoader(ds, batch_size=8, collate_fn=sk.pad_collate)))
    assert batch["tokens"].shape == (8, 5)
    assert batch["tokens"][5].tolist() == [0, 1, 2, 3, 4]


def test_a_shuffled_epoch_reads_every_row_once(uri):
    loader = sk.DataLoader(sk.from_lance(uri, columns=["id"]), batch_size=32, shuffle=True)
    ids = np.concatenate([b["id"] for b in loader]).tolist()
    assert sorted(ids) == list(range(N))
    assert ids != sorted(ids)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_workers_give_the_batches_of_inline(uri, mode):
    ds = sk.from_lance(uri, columns=FIXED)
    assert_same_in_every_mode(ds, modes=(mode,), epochs=2, batch_size=25, shuffle=True, seed=3)


def test_resumes_exactly(uri):
    loader = sk.DataLoader(sk.from_lance(uri, columns=FIXED), batch_size=30, shuffle=True, seed=1)
    assert_resumes_exactly(loader, epochs=2)


def test_pickles_as_a_description_of_one_version(uri):
    ds = sk.from_lance(uri, columns=["id"])
    data = pickle.dumps(ds)
    assert len(data) < 2_000
    lance.write_dataset(_table(50, N), uri, mode="append")  # rows written later
    copy = pickle.loads(data)
    assert len(copy) == N
    assert copy.version == ds.version
    assert [int(r["id"]) for r in copy.__getitems__([0, N - 1])] == [0, N - 1]
    latest = sk.from_lance(uri, columns=["id"])
    assert len(latest) == N + 50
    assert latest.version > ds.version
    assert len(sk.from_lance(uri, version=ds.version)) == N
    assert len(sk.from_lance(lance.dataset(uri, version=ds.version))) == N


def test_deleted_rows_are_left_out(uri):
    handle = lance.dataset(uri)
    handle.delete("id % 4 = 0")
    ds = sk.from_lance(uri, columns=["id"])
    assert len(ds) == N - N // 4
    ids = [int(r["id"]) for r in ds.__getitems__(list(range(len(ds))))]
    assert ids == [i for i in range(N) if i % 4]


def test_missing_uri_is_named(tmp_path):
    missing = str(tmp_path / "nope.lance")
    with pytest.raises(sk.ConfigError, match=r"nope\.lance"):
        sk.from_lance(missing)
    (tmp_path / "empty.lance").mkdir()
    with pytest.raises(sk.ConfigError, match=r"empty\.lance"):
        sk.from_lance(tmp_path / "empty.lance")


def test_missing_version_is_an_error(uri):
    with pytest.raises(sk.ConfigError, match="version 99"):
        sk.from_lance(uri, version=99)


def test_missing_column_names_the_existing_ones(uri):
    with pytest.raises(sk.ConfigError, match=r"no column 'label'.*'id', 'score', 'name'"):
        sk.from_lance(uri, columns=["label"])


def test_unsupported_type_is_named(tmp_path):
    table = pa.table({"x": [1, 2], "s": pa.array([{"a": 1}, {"a": 2}])})
    path = tmp_path / "s.lance"
    lance.write_dataset(table, path)
    with pytest.raises(sk.ConfigError, match=r"column 's'.*struct"):
        sk.from_lance(path)
    assert int(sk.from_lance(path, columns=["x"])[1]["x"]) == 2
