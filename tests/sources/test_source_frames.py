"""from_arrow, from_polars, from_pandas, and DataFrames passed straight to the loader."""

import pickle

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches, assert_same_in_every_mode

N = 200


def _data():
    rng = np.random.default_rng(0)
    return {
        "id": np.arange(N, dtype=np.int64),
        "x": rng.random(N).astype(np.float32),
        "name": [f"n{i}" for i in range(N)],
    }


def _builders():
    data = _data()
    return {
        "arrow": lambda: sk.from_arrow(pa.table(data)),
        "record_batch": lambda: sk.from_arrow(pa.record_batch(data)),
        "polars": lambda: sk.from_polars(pl.DataFrame(data)),
        "pandas": lambda: sk.from_pandas(pd.DataFrame(data)),
    }


@pytest.mark.parametrize("kind", list(_builders()))
def test_records_match_the_library(kind):
    ds = _builders()[kind]()
    data = _data()
    assert len(ds) == N
    record = ds[7]
    assert list(record) == ["id", "x", "name"]
    assert record["id"] == 7
    assert isinstance(record["id"], np.int64)
    assert record["x"] == data["x"][7]
    assert isinstance(record["x"], np.float32)
    assert record["name"] == "n7"


@pytest.mark.parametrize("kind", list(_builders()))
def test_batches_and_worker_modes(kind):
    ds = _builders()[kind]()
    inline = sk.DataLoader(ds, batch_size=32, shuffle=True, seed=4)
    batch = next(iter(inline))
    assert batch["id"].dtype == np.int64
    assert batch["x"].dtype == np.float32
    assert batch["name"] == [f"n{i}" for i in batch["id"].tolist()]
    ids = np.concatenate([b["id"] for b in inline])
    assert sorted(ids.tolist()) == list(range(N))
    assert_same_in_every_mode(ds, batch_size=32, shuffle=True, seed=4)


@pytest.mark.parametrize("kind", ["arrow", "polars"])
def test_resumes_exactly(kind):
    loader = sk.DataLoader(_builders()[kind](), batch_size=48, shuffle=True, seed=2)
    assert_resumes_exactly(loader, epochs=2)


def test_dataframes_passed_to_the_loader_give_rows_not_frames():
    data = _data()
    for frame, source in (
        (pl.DataFrame(data), sk.from_polars),
        (pd.DataFrame(data), sk.from_pandas),
    ):
        direct = sk.DataLoader(frame, batch_size=50, shuffle=True)
        assert_same_batches(direct, sk.DataLoader(source(frame), batch_size=50, shuffle=True))
        batch = next(iter(direct))
        assert isinstance(batch, dict)
        assert batch["id"].shape == (50,)


def test_column_selection_and_order():
    ds = sk.from_polars(pl.DataFrame(_data()), columns=["name", "id"])
    assert ds.columns == ["name", "id"]
    assert list(ds[0]) == ["name", "id"]
    ds = sk.from_pandas(pd.DataFrame(_data()), columns=["x"])
    assert list(ds[0]) == ["x"]


def test_list_columns_become_arrays():
    frame = pl.DataFrame({"tokens": [[1, 2, 3], [4], []], "pair": [[1, 2], [3, 4], [5, 6]]})
    frame = frame.with_columns(pl.col("pair").cast(pl.Array(pl.Int64, 2)))
    ds = sk.from_polars(frame)
    assert ds[0]["tokens"].tolist() == [1, 2, 3]
    assert ds[2]["tokens"].tolist() == []
    batch = next(iter(sk.DataLoader(ds, batch_size=3, collate_fn=sk.pad_collate)))
    assert batch["tokens"].tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]
    assert batch["pair"].shape == (3, 2)


def test_process_workers_share_one_copy_of_the_table():
    from stoker._shm import sharing_for_workers

    ds = sk.from_arrow(pa.table({"x": np.arange(100_000, dtype=np.int64)}))
    plain = pickle.dumps(ds)
    with sharing_for_workers():
        shared = pickle.dumps(ds)
    assert len(plain) > 800_000
    assert len(shared) < 2_000
    again = pickle.loads(shared)
    assert int(again[99_999]["x"]) == 99_999


def test_bad_input_is_named():
    with pytest.raises(sk.ConfigError, match="from_polars"):
        sk.from_arrow(pl.DataFrame({"x": [1]}))
    with pytest.raises(sk.ConfigError, match=r"collect\(\)"):
        sk.from_polars(pl.DataFrame({"x": [1]}).lazy())
    with pytest.raises(sk.ConfigError, match=r"no column 'y'.*\['x'\]"):
        sk.from_pandas(pd.DataFrame({"x": [1]}), columns=["y"])
    with pytest.raises(sk.ConfigError, match=r"pandas\.DataFrame"):
        sk.from_pandas({"x": [1]})
    with pytest.raises(sk.ConfigError, match="the string 'x'"):
        sk.from_arrow(pa.table({"x": [1]}), columns="x")
    with pytest.raises(sk.ConfigError, match=r"column 'm'.*struct"):
        sk.from_arrow(pa.table({"m": [{"a": 1}]}))
