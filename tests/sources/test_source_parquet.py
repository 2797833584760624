import functools
import os
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

import stoker as sk
from stoker.testing import (
    assert_resumes_exactly,
    assert_same_batches,
    assert_same_in_every_mode,
    run_epochs,
)

N = 300


def _table(n=N, start=0):
    rng = np.random.default_rng(start)
    lengths = rng.integers(0, 6, n)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n, dtype=np.int64)),
            "score": pa.array(rng.random(n).astype(np.float32)),
            "flag": pa.array(rng.random(n) < 0.5),
            "name": pa.array([f"row-{start + i}" for i in range(n)]),
            "blob": pa.array([bytes([i % 256]) * 3 for i in range(n)], type=pa.binary()),
            "tokens": pa.array([list(range(int(k))) for k in lengths], type=pa.list_(pa.int32())),
            "vec": pa.array(
                [[i, i + 1, i + 2] for i in range(start, start + n)], type=pa.list_(pa.float64(), 3)
            ),
        }
    )


@pytest.fixture
def root(tmp_path):
    pq.write_table(_table(N, 0), tmp_path / "a.parquet", row_group_size=64)
    pq.write_table(_table(N // 2, N), tmp_path / "b.parquet", row_group_size=32)
    (tmp_path / "_SUCCESS").write_bytes(b"")
    return tmp_path


FIXED = ["id", "score", "flag", "name", "blob", "vec"]


def _expected(root):
    return pa.concat_tables(
        [pq.read_table(root / "a.parquet"), pq.read_table(root / "b.parquet")]
    ).to_pylist()


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def test_len_is_read_from_metadata_and_records_match_pyarrow(root):
    ds = sk.from_parquet(root)
    assert len(ds) == N + N // 2
    assert ds.paths == [str(root / "a.parquet"), str(root / "b.parquet")]
    assert sum(ds.row_group_sizes) == len(ds)
    expected = _expected(root)
    order = [0, 299, 300, 449, 5, 64, 63]
    for i, record in zip(order, ds.__getitems__(order), strict=True):
        assert {k: _plain(v) for k, v in record.items()} == expected[i]
    record = ds[3]
    assert isinstance(record["id"], np.int64)
    assert isinstance(record["score"], np.float32)
    assert isinstance(record["flag"], np.bool_)
    assert isinstance(record["name"], str)
    assert isinstance(record["blob"], bytes)
    assert record["tokens"].dtype == np.int32
    assert record["tokens"].ndim == 1
    assert record["vec"].shape == (3,)


def test_batches_are_column_arrays(root):
    loader = sk.DataLoader(sk.from_parquet(root, columns=FIXED), batch_size=16)
    batch = next(iter(loader))
    assert list(batch) == FIXED
    assert batch["id"].tolist() == list(range(16))
    assert batch["score"].dtype == np.float32
    assert batch["vec"].shape == (16, 3)
    assert batch["name"][:2] == ["row-0", "row-1"]
    assert batch["blob"][1] == b"\x01\x01\x01"


def test_glob_list_and_column_selection(root):
    by_glob = sk.from_parquet(str(root / "*.parquet"), columns=["name", "id"])
    by_list = sk.from_parquet([root / "a.parquet", root / "b.parquet"], columns=["name", "id"])
    assert by_glob.columns == ["name", "id"]
    assert list(by_glob[0]) == ["name", "id"]
    assert_same_batches(
        sk.DataLoader(by_glob, batch_size=50), sk.DataLoader(by_list, batch_size=50)
    )


def test_a_shuffled_epoch_reads_every_row_once(root):
    loader = sk.DataLoader(sk.from_parquet(root, columns=["id"]), batch_size=32, shuffle=True)
    ids = np.concatenate([b["id"] for b in loader])
    assert sorted(ids.tolist()) == list(range(N + N // 2))
    assert ids.tolist() != sorted(ids.tolist())


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_workers_give_the_batches_of_inline(root, mode):
    ds = sk.from_parquet(root, columns=FIXED)
    assert_same_in_every_mode(ds, modes=(mode,), epochs=2, batch_size=20, shuffle=True, seed=3)


def test_variable_length_lists_are_padded_by_pad_collate(root):
    ds = sk.from_parquet(root, columns=["id", "tokens"])
    loader = sk.DataLoader(ds, batch_size=8, collate_fn=sk.pad_collate)
    batch = next(iter(loader))
    rows = pq.read_table(root / "a.parquet", columns=["tokens"]).to_pylist()[:8]
    width = max(len(r["tokens"]) for r in rows)
    assert batch["tokens"].shape == (8, width)
    for got, row in zip(batch["tokens"], rows, strict=True):
        n = len(row["tokens"])
        assert got[:n].tolist() == row["tokens"]
        assert not got[n:].any()


def test_ragged_lists_without_padding_name_pad_collate(root):
    loader = sk.DataLoader(sk.from_parquet(root, columns=["tokens"]), batch_size=64)
    with pytest.raises(sk.CollateError, match="pad_collate"):
        next(iter(loader))


def test_resumes_exactly(root):
    loader = sk.DataLoader(
        sk.from_parquet(root, columns=["id", "name", "vec"]), batch_size=64, shuffle=True, seed=1
    )
    assert_resumes_exactly(loader, epochs=2)


def test_row_group_sampler_reads_few_row_groups_and_every_row(root):
    ds = sk.from_parquet(root, columns=["id"], cache_bytes=0)
    sampler = ds.shuffle_sampler(seed=2)
    assert sampler.chunk_size == 64
    loader = sk.DataLoader(ds, batch_size=16, sampler=sampler)
    ids = np.concatenate([b["id"] for b in loader])
    assert sorted(ids.tolist()) == list(range(len(ds)))
    assert_resumes_exactly(loader, epochs=1)


def test_decoded_row_groups_are_cached_within_the_budget(root):
    ds = sk.from_parquet(root, columns=["id", "score"])
    run_epochs(sk.DataLoader(ds, batch_size=16, shuffle=True, seed=0), epochs=2)
    groups = len(ds.row_group_sizes)
    assert ds.decoded_row_groups == groups  # each once in two epochs
    small = sk.from_parquet(root, columns=["id", "score"], cache_bytes=1, cache_dir=None)
    run_epochs(sk.DataLoader(small, batch_size=16, shuffle=True, seed=0), epochs=1)
    assert small.decoded_row_groups > groups  # nothing kept: decoded again per batch


def test_pickles_as_a_description(root):
    ds = sk.from_parquet(root, columns=["id"])
    ds[0]  # opens a handle and fills the cache
    data = pickle.dumps(ds)
    assert len(data) < 2000
    again = pickle.loads(data)
    assert int(again[5]["id"]) == 5


def test_auto_runs_on_threads(root):
    pad = functools.partial(sk.pad_collate, max_length=8)
    for collate_fn in (None, sk.pad_collate, pad):
        loader = sk.DataLoader(
            sk.from_parquet(root, columns=FIXED), batch_size=4, num_workers=2, collate_fn=collate_fn
        )
        it = iter(loader)
        next(it)
        assert it.stats().worker_mode == "thread"
        loader.close()


def test_arrow_dataset_of_parquet_files_reads_like_from_parquet(root):
    dataset = pads.dataset([str(root / "a.parquet"), str(root / "b.parquet")], format="parquet")
    ds = sk.from_arrow(dataset, columns=["id", "name"])
    assert isinstance(ds, type(sk.from_parquet(root)))
    assert_same_batches(
        sk.DataLoader(ds, batch_size=40, shuffle=True),
        sk.DataLoader(sk.from_parquet(root, columns=["id", "name"]), batch_size=40, shuffle=True),
    )


def test_a_column_that_does_not_exist_names_those_that_do(root):
    with pytest.raises(sk.ConfigError, match=r"no column 'labl'.*'id', 'score'"):
        sk.from_parquet(root, columns=["labl"])


def test_missing_paths_and_empty_globs_name_the_path(tmp_path):
    with pytest.raises(sk.ConfigError, match="no such file"):
        sk.from_parquet(tmp_path / "nope.parquet")
    with pytest.raises(sk.ConfigError, match="matches no file"):
        sk.from_parquet(str(tmp_path / "*.parquet"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(sk.ConfigError, match="holds no data file"):
        sk.from_parquet(tmp_path / "empty")


def test_a_file_that_is_not_parquet_is_named(tmp_path):
    path = tmp_path / "x.parquet"
    path.write_text("id,score\n1,2\n")
    with pytest.raises(sk.ConfigError, match="is not a Parquet file"):
        sk.from_parquet(path)


def test_files_of_different_schemas_are_refused(tmp_path):
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"x": ["a", "b"]}), tmp_path / "b.parquet")
    with pytest.raises(sk.ConfigError, match="column 'x' is string"):
        sk.from_parquet(tmp_path)


def test_unsupported_column_types_are_named(tmp_path):
    table = pa.table(
        {"ok": [1], "nested": pa.array([[[1, 2]]], type=pa.list_(pa.list_(pa.int8())))}
    )
    pq.write_table(table, tmp_path / "a.parquet")
    with pytest.raises(sk.ConfigError, match=r"column 'nested'.*has type list<"):
        sk.from_parquet(tmp_path)
    assert len(sk.from_parquet(tmp_path, columns=["ok"])) == 1


def test_nulls_are_a_clear_error_naming_the_column(tmp_path):
    pq.write_table(pa.table({"x": pa.array([1, None, 3], type=pa.int64())}), tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="column 'x' has 1 null"):
        next(iter(sk.DataLoader(sk.from_parquet(tmp_path), batch_size=3)))


def test_a_file_removed_after_building_is_named(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), path)
    ds = sk.from_parquet(path)
    os.remove(path)
    with pytest.raises(FileNotFoundError, match="was removed"):
        ds[0]


def test_batches_spanning_row_groups_equal_what_pyarrow_reads(root):
    ds = sk.from_parquet(root)
    expected = _expected(root)
    rng = np.random.default_rng(5)
    for size in (1, 7, 64, 200):
        order = rng.integers(0, len(ds), size).tolist()  # repeats and every row group
        got = ds.__getitems__(order)
        assert [{k: _plain(v) for k, v in r.items()} for r in got] == [expected[i] for i in order]
    loader = sk.DataLoader(sk.from_parquet(root, columns=FIXED), batch_size=50, shuffle=True)
    for batch in loader:
        rows = [expected[i] for i in batch["id"].tolist()]
        assert batch["vec"].tolist() == [r["vec"] for r in rows]
        assert batch["name"] == [r["name"] for r in rows]
        assert batch["blob"] == [r["blob"] for r in rows]


def test_the_row_group_sampler_window_fits_the_decode_cache(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(4000, dtype=np.float64)}), path, row_group_size=500)
    roomy = sk.from_parquet(path)
    assert roomy.shuffle_sampler().window == 4 * 500
    tight = sk.from_parquet(path, cache_bytes=16_000)  # room for 3 row groups of ~4.6 kB
    assert tight.shuffle_sampler().window == 500 * 2
    assert sk.from_parquet(path, cache_bytes=10).shuffle_sampler().window == 500
    loader = sk.DataLoader(tight, batch_size=100, sampler=tight.shuffle_sampler(seed=1))
    assert sorted(np.concatenate([b["x"] for b in loader]).tolist()) == list(range(4000))
    assert tight.decoded_row_groups == 8  # each row group once: the window fits the cache


def test_pad_collate_over_a_table_source_equals_padding_its_records(root):
    pad = functools.partial(sk.pad_collate, max_length=4, mask=True, lengths=True, pad_value=-1)
    ds = sk.from_parquet(root, columns=["id", "tokens", "name"])
    loader = sk.DataLoader(ds, batch_size=37, shuffle=True, seed=9, collate_fn=pad)
    for batch in loader:
        records = ds.__getitems__(batch["id"].tolist())
        expected = sk.pad_collate(records, pad_value=-1, max_length=4, mask=True, lengths=True)
        assert list(batch) == list(expected)
        for key in batch:
            if isinstance(batch[key], np.ndarray):
                assert batch[key].dtype == expected[key].dtype
                np.testing.assert_array_equal(batch[key], expected[key])
            else:
                assert batch[key] == expected[key]


NUMERIC = ["id", "score", "flag", "tokens", "vec"]  # no strings: every row group is written


def test_cache_dir_gives_the_same_batches_and_later_reads_need_no_decode(root, tmp_path_factory):
    cache = tmp_path_factory.mktemp("decoded")
    pad = functools.partial(sk.pad_collate, max_length=4)
    plain = sk.from_parquet(root, columns=NUMERIC)
    cached = sk.from_parquet(root, columns=NUMERIC, cache_dir=cache, cache_bytes=1)
    assert len(cached.cache_folders) == 2
    for collate_fn in (None, pad):
        kwargs = {"batch_size": 20, "shuffle": True, "seed": 4, "collate_fn": collate_fn}
        if collate_fn is None:
            plain_ds = sk.from_parquet(root, columns=["id", "score", "flag", "vec"])
            cached_ds = sk.from_parquet(
                root, columns=["id", "score", "flag", "vec"], cache_dir=cache
            )
        else:
            plain_ds, cached_ds = plain, cached
        assert_same_batches(
            sk.DataLoader(plain_ds, **kwargs), sk.DataLoader(cached_ds, **kwargs), epochs=2
        )
    groups = len(cached.row_group_sizes)
    written = sorted(p.name for f in cached.cache_folders for p in Path(f).glob("rg-*.bin"))
    assert len(written) == groups
    # A new dataset over the same files reads the decoded copy: it needs no Parquet file.
    again = sk.from_parquet(root, columns=NUMERIC, cache_dir=cache)
    expected = [{k: _plain(v) for k, v in r.items()} for r in plain.__getitems__(range(len(plain)))]
    os.rename(root / "a.parquet", root / "a.moved")
    got = again.__getitems__(range(len(again)))
    assert [{k: _plain(v) for k, v in r.items()} for r in got] == expected


def test_write_cache_writes_every_row_group_once_and_leaves_strings_out(root, tmp_path_factory):
    cache = tmp_path_factory.mktemp("decoded")
    ds = sk.from_parquet(root, columns=NUMERIC, cache_dir=cache)
    assert ds.write_cache() == len(ds.row_group_sizes)
    assert ds.write_cache() == 0
    with_strings = sk.from_parquet(root, columns=["id", "name"], cache_dir=cache)
    assert with_strings.write_cache() == 0  # strings have no flat form: kept in memory only
    assert with_strings[7]["name"] == "row-7"
    with pytest.raises(sk.ConfigError, match="cache_dir"):
        sk.from_parquet(root).write_cache()


def test_a_changed_file_gets_a_new_cache_folder_and_the_old_one_goes(tmp_path):
    path = tmp_path / "a.parquet"
    pq.write_table(pa.table({"x": np.arange(10), "y": np.ones(10)}), path, row_group_size=4)
    first = sk.from_parquet(path, cache_dir=tmp_path / "c")
    first.write_cache()
    only_x = sk.from_parquet(path, columns=["x"], cache_dir=tmp_path / "c")
    assert only_x.cache_folders != first.cache_folders  # one copy per column selection
    pq.write_table(pa.table({"x": np.arange(100, 112), "y": np.ones(12)}), path, row_group_size=4)
    second = sk.from_parquet(path, cache_dir=tmp_path / "c")
    assert second.cache_folders != first.cache_folders
    assert not Path(first.cache_folders[0]).exists()  # the stale copy is removed
    assert Path(only_x.cache_folders[0]).exists()  # another selection: left alone
    batch = next(iter(sk.DataLoader(second, batch_size=12)))
    assert batch["x"].tolist() == list(range(100, 112))


def test_cache_dir_is_shared_by_process_workers_and_resumes(root, tmp_path_factory):
    cache = tmp_path_factory.mktemp("decoded")
    ds = sk.from_parquet(root, columns=NUMERIC, cache_dir=cache, cache_bytes=1)
    assert len(pickle.dumps(ds)) < 3000
    assert_same_in_every_mode(
        ds,
        epochs=2,
        batch_size=16,
        shuffle=True,
        seed=2,
        collate_fn=functools.partial(sk.pad_collate, max_length=6),
    )
    loader = sk.DataLoader(
        ds, batch_size=32, sampler=ds.shuffle_sampler(seed=1), collate_fn=sk.pad_collate
    )
    assert_resumes_exactly(loader, epochs=1)
    files = list(Path(ds.cache_folders[0]).iterdir())
    assert not [f for f in files if f.suffix == ".tmp"]  # only whole files, renamed into place


def test_a_cache_dir_that_cannot_be_made_is_a_config_error(root, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(sk.ConfigError, match="cache_dir"):
        sk.from_parquet(root, cache_dir=blocker / "sub")


def test_cache_dir_keeps_every_numeric_type(tmp_path):
    n = 50
    table = pa.table(
        {
            "when": pa.array(np.arange(n).astype("datetime64[ms]")),
            "day": pa.array(np.arange(n).astype("datetime64[D]")),
            "small": pa.array(np.arange(n, dtype=np.uint8)),
            "half": pa.array(np.linspace(0, 1, n).astype(np.float16)),
            "empty": pa.array([[] for _ in range(n)], type=pa.list_(pa.float64())),
            "pairs": pa.array(
                [[[i, -i]] * (i % 3) for i in range(n)], type=pa.list_(pa.list_(pa.int16(), 2))
            ),
        }
    )
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=16)
    plain = sk.from_parquet(tmp_path / "t.parquet")
    cached = sk.from_parquet(tmp_path / "t.parquet", cache_dir=tmp_path / "c")
    assert cached.write_cache() == 4
    order = np.random.default_rng(0).permutation(n).tolist()
    for want, got in zip(plain.__getitems__(order), cached.__getitems__(order), strict=True):
        assert list(got) == list(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
            assert np.asarray(got[key]).dtype == np.asarray(want[key]).dtype
