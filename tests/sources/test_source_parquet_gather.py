"""The gather paths of ``from_parquet``: numeric batches written straight into their
columns, and token lists padded from the row groups they lie in."""

import functools

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stoker as sk
from stoker._batching.pool import BufferPool
from stoker._rng import epoch_rng
from stoker._sources.block_gather import gather_batch, join_blocks, split_blocks, take_columns
from stoker._sources.columns import Ragged
from stoker._sources.row_layout import stack_columns
from stoker.testing import assert_resumes_exactly, assert_same_in_every_mode, run_epochs

N = 230  # row groups of 50: four full ones and a short last one
COLUMNS = ["a", "b", "c", "d", "label", "x64", "flag", "vec"]


def _numeric(n=N):
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 9, n)
    return pa.table(
        {
            "a": pa.array(rng.standard_normal(n).astype(np.float32)),
            "b": pa.array(rng.standard_normal(n).astype(np.float32)),
            "label": pa.array(np.arange(n, dtype=np.int64) * 7),
            "c": pa.array(rng.standard_normal(n).astype(np.float32)),
            "x64": pa.array(rng.standard_normal(n)),
            "d": pa.array(rng.standard_normal(n).astype(np.float32)),
            "flag": pa.array(rng.random(n) < 0.5),
            "vec": pa.array([[i, -i] for i in range(n)], type=pa.list_(pa.int16(), 2)),
            "tokens": pa.array(
                [list(range(i, i + int(k))) for i, k in enumerate(lengths)],
                type=pa.list_(pa.int32()),
            ),
        }
    )


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    target = tmp_path_factory.mktemp("numeric") / "n.parquet"
    pq.write_table(_numeric(), target, row_group_size=50)
    return target


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("decoded")


def _datasets(path, cache, columns=COLUMNS):
    yield sk.from_parquet(path, columns=columns)
    cached = sk.from_parquet(path, columns=columns, cache_dir=cache)
    cached.write_cache()
    yield cached


def _reference(path, columns, indices):
    table = pq.read_table(path, columns=columns).take(pa.array(indices))
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in columns}


def test_shuffled_numeric_batches_equal_the_rows_pyarrow_reads(path, cache):
    for ds in _datasets(path, cache):
        sampler = ds.shuffle_sampler(seed=1, window=100)
        loader = sk.DataLoader(ds, batch_size=32, sampler=sampler)
        order = sampler.cursor(epoch=0).take(len(ds))
        for k, batch in enumerate(loader):
            expected = _reference(path, COLUMNS, order[32 * k : 32 * (k + 1)])
            assert list(batch) == COLUMNS
            for name in COLUMNS:
                got = batch[name]
                want = np.stack(expected[name]) if name == "vec" else expected[name]
                assert got.dtype == want.dtype, name
                assert got.flags.c_contiguous, name
                np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_numeric_batches_are_the_same_in_every_mode(path, cache, mode):
    for ds in _datasets(path, cache):
        assert_same_in_every_mode(
            ds, modes=(mode,), epochs=2, batch_size=24, sampler=ds.shuffle_sampler(seed=3)
        )


def test_numeric_batches_resume_exactly(path, cache):
    for ds in _datasets(path, cache):
        loader = sk.DataLoader(ds, batch_size=40, sampler=ds.shuffle_sampler(seed=2))
        assert_resumes_exactly(loader, epochs=2)


def test_a_batch_held_is_not_overwritten_by_later_batches(path, cache):
    *_, ds = _datasets(path, cache)
    loader = sk.DataLoader(ds, batch_size=16, shuffle=True, seed=0)
    it = iter(loader)
    first = next(it)
    view = first["a"][:4]
    copies = {k: v.copy() for k, v in first.items()}
    rest = list(it)
    assert len(rest) == len(loader) - 1
    for name, value in copies.items():
        np.testing.assert_array_equal(first[name], value)
    np.testing.assert_array_equal(view, copies["a"][:4])


def test_token_lists_padded_from_their_row_groups_equal_padding_the_records(path, cache):
    pad = functools.partial(sk.pad_collate, max_length=5, mask=True, lengths=True, pad_value=-1)
    for ds in _datasets(path, cache, columns=["label", "tokens"]):
        sampler = ds.shuffle_sampler(seed=4, window=100)
        loader = sk.DataLoader(ds, batch_size=12, sampler=sampler, collate_fn=pad)
        seen = 0
        for batch in loader:
            indices = (batch["label"] // 7).tolist()
            expected = pad(ds.__getitems__(indices))
            assert list(batch) == list(expected)
            for key in batch:
                assert batch[key].dtype == expected[key].dtype
                np.testing.assert_array_equal(batch[key], expected[key])
            seen += len(indices)
        assert seen == len(ds)
        for mode in ("thread", "process"):
            assert_same_in_every_mode(
                ds, modes=(mode,), batch_size=12, sampler=sampler, collate_fn=pad
            )
        assert_resumes_exactly(loader, epochs=1, max_stops=6)


def test_records_of_list_columns_gathered_from_several_row_groups_are_their_own(path, cache):
    *_, ds = _datasets(path, cache, columns=["tokens"])
    records = ds.__getitems__([3, 120, 61, 229])
    expected = pq.read_table(path, columns=["tokens"]).take(pa.array([3, 120, 61, 229]))
    assert [r["tokens"].tolist() for r in records] == expected.column(0).to_pylist()
    for r in records:
        r["tokens"][:] = 0  # writable copies, not views of the mapped row groups
    assert ds.__getitems__([3])[0]["tokens"].tolist() == expected.column(0).to_pylist()[0]


def test_split_blocks_keeps_batch_order_within_each_block():
    unique, grouping = split_blocks(np.array([4, 2, 4, 4, 9, 2]))
    assert unique == [2, 4, 9]
    assert grouping is not None
    assert [w.tolist() for w in grouping.wheres()] == [[1, 5], [0, 2, 3], [4]]
    assert split_blocks(np.array([6, 6, 6])) == ([6], None)
    assert split_blocks(np.array([6, 6, 6]), count=10) == ([6], None)
    unique, counted = split_blocks(np.array([4, 2, 4, 4, 9, 2]), count=10)
    assert unique == [2, 4, 9]
    assert counted is not None
    assert [w.tolist() for w in counted.wheres()] == [[1, 5], [0, 2, 3], [4]]
    assert split_blocks(np.array([], dtype=np.int64)) == ([], None)


def _blocks():
    rng = np.random.default_rng(0)
    blocks = []
    for rows in (7, 5, 9):
        columns = {
            "p": rng.standard_normal(rows).astype(np.float32),
            "q": rng.standard_normal(rows).astype(np.float32),
            "id": rng.integers(0, 100, rows),
            "r": rng.standard_normal(rows).astype(np.float32),
            "pair": rng.integers(0, 9, (rows, 2)).astype(np.int8),
        }
        blocks.append(stack_columns(columns))
    return blocks


def _general(blocks, block_of, rows):
    columns = take_columns(blocks, block_of, rows)
    return {k: np.ascontiguousarray(v) for k, v in columns.items()}


@pytest.mark.parametrize("layout", ["none", "side_by_side", "separate", "wrong_shape"])
def test_gather_batch_equals_take_columns_into_any_planned_buffers(layout):
    blocks = _blocks()
    block_of = np.array([2, 0, 1, 2, 0, 0, 1, 2])
    rows = np.array([8, 6, 4, 0, 0, 3, 1, 5])
    expected = _general(blocks, block_of, rows)
    out = None
    if layout == "side_by_side":
        floats = np.zeros((3, 8), np.float32)
        out = {"p": floats[0], "q": floats[1], "r": floats[2]}
        out |= {"id": np.zeros(8, np.int64), "pair": np.zeros((8, 2), np.int8)}
    elif layout == "separate":
        out = {k: np.zeros_like(v) for k, v in expected.items()}
    elif layout == "wrong_shape":
        out = {k: np.zeros((3, *v.shape[1:]), v.dtype) for k, v in expected.items()}
    _, grouping = split_blocks(block_of)
    batch = gather_batch(blocks, grouping, rows, out)
    assert list(batch) == list(expected)
    for name, value in expected.items():
        assert batch[name].dtype == value.dtype
        assert batch[name].flags.c_contiguous
        np.testing.assert_array_equal(batch[name], value)
        if layout in ("side_by_side", "separate"):
            assert batch[name] is out[name]
    one = gather_batch([blocks[2]], None, rows)
    for name, value in _general([blocks[2]], np.zeros(8, np.int64), rows).items():
        np.testing.assert_array_equal(one[name], value)


def test_gather_batch_gives_strings_as_lists_from_one_block_several_and_their_join():
    blocks = [
        stack_columns({"x": np.arange(3.0), "n": np.arange(3), "s": ["a", "b", "c"]}),
        stack_columns({"x": np.arange(3.0, 5.0), "n": np.arange(3, 5), "s": ["d", "e"]}),
    ]
    assert blocks[0].plan is not None
    assert blocks[0].plan is blocks[1].plan
    _, grouping = split_blocks(np.array([1, 0, 1]))
    batch = gather_batch(blocks, grouping, np.array([1, 2, 0]))
    assert batch["x"].tolist() == [4.0, 2.0, 3.0]
    assert batch["n"].tolist() == [4, 2, 3]
    assert batch["s"] == ["e", "c", "d"]
    one = gather_batch(blocks[:1], None, np.array([2, 0]))
    assert one["s"] == ["c", "a"]
    assert one["x"].tolist() == [2.0, 0.0]
    joined = join_blocks(blocks)
    assert joined is not None
    assert joined.plan is blocks[0].plan
    assert list(joined) == ["x", "n", "s"]
    both = gather_batch([joined], None, np.array([4, 2, 3]))
    assert both["s"] == ["e", "c", "d"]
    assert both["n"].tolist() == [4, 2, 3]
    assert both["x"].tolist() == [4.0, 2.0, 3.0]


def test_gather_batch_takes_the_general_path_for_lists():
    blocks = [
        stack_columns({"x": np.arange(2.0), "t": Ragged(np.arange(3), np.array([0, 1, 3]))}),
        stack_columns({"x": np.arange(2.0, 3.0), "t": Ragged(np.arange(2), np.array([0, 2]))}),
    ]
    assert blocks[0].plan is None
    _, grouping = split_blocks(np.array([1, 0]))
    batch = gather_batch(blocks, grouping, np.array([0, 1]))
    assert batch["x"].tolist() == [2.0, 1.0]
    assert batch["t"].tolist() == [[0, 1], [1, 2]]
    ragged = gather_batch(blocks, grouping, np.array([0, 0]))
    assert ragged is NotImplemented  # rows of different lengths: the record path pads them
    columns = take_columns(blocks, np.array([1, 0]), np.array([0, 0]))
    assert columns["x"].tolist() == [2.0, 0.0]
    assert [r.tolist() for r in columns["t"].rows()] == [[0, 1], [0]]


def test_ragged_of_pieces_joins_its_rows_only_when_values_are_read():
    pieces = [np.array([1, 2], np.int32), np.array([], np.int32), np.array([3], np.int32)]
    column = Ragged.of_pieces(pieces)
    assert column.dtype == np.int32
    assert column.lengths().tolist() == [2, 0, 1]
    assert column.pieces() is pieces
    assert column.values.tolist() == [1, 2, 3]
    assert [r.tolist() for r in column.rows()] == [[1, 2], [], [3]]
    padded = sk.pad_collate([np.array([1, 2]), np.array([], np.int64), np.array([3])])
    from stoker._batching.pad import pad_columns

    lazy = pad_columns({"t": Ragged.of_pieces([p.astype(np.int64) for p in pieces])})
    np.testing.assert_array_equal(lazy["t"], padded)


def _former_window(sampler, epoch, number):
    """ChunkedShuffleSampler's window as first written: a search per position."""
    layout = sampler._layout(epoch)
    lo = number * sampler.window
    hi = min(lo + sampler.window, len(sampler))
    positions = np.arange(lo, hi, dtype=np.int64)
    slot = np.searchsorted(layout.ends, positions, side="right")
    values = layout.order[slot] * sampler.chunk_size + (positions - layout.starts[slot])
    return values[epoch_rng(sampler.seed, epoch, 1, number).permutation(hi - lo)]


@pytest.mark.parametrize(
    ("n", "chunk", "window"), [(100, 7, 20), (99, 10, 10), (64, 64, 5), (9, 1, 4)]
)
def test_chunked_shuffle_order_is_unchanged(n, chunk, window):
    sampler = sk.ChunkedShuffleSampler(n, chunk_size=chunk, window=window, seed=11)
    for epoch in (0, 3):
        windows = -(-n // window)
        expected = np.concatenate([_former_window(sampler, epoch, w) for w in range(windows)])
        np.testing.assert_array_equal(sampler.cursor(epoch).take(n), expected)


def test_a_pool_offered_views_keeps_giving_fresh_memory():
    pool = BufferPool(batch_size=4, max_slots=2)
    columns = np.zeros((2, 4))
    pool.adopt({"a": columns[0], "b": columns[1]})
    pool.adopt({"a": np.zeros(4), "b": np.zeros(4)})
    assert pool.acquire(4) is None
    assert pool.slots == 0


def test_epochs_of_a_uniform_and_a_mixed_layout_read_every_row_once(path, tmp_path):
    pq.write_table(_numeric(40), tmp_path / "small.parquet", row_group_size=16)
    mixed = sk.from_parquet([path, tmp_path / "small.parquet"], columns=["label"])
    batches = run_epochs(sk.DataLoader(mixed, batch_size=33, shuffle=True, seed=0), epochs=1)
    labels = np.concatenate([b["label"] for b in batches]) // 7
    assert sorted(labels.tolist()) == sorted(list(range(N)) + list(range(40)))


def test_stacked_rows_keep_every_dtype_aligned_and_equal_to_the_columns():
    rng = np.random.default_rng(3)
    blocks, originals = [], []
    for rows in (6, 1, 11):
        columns = {
            "flag": rng.integers(0, 2, rows).astype(bool),
            "small": rng.integers(0, 200, rows).astype(np.uint8),
            "wide": rng.standard_normal(rows),
            "half": rng.integers(-9, 9, rows).astype(np.int16),
            "count": rng.integers(0, 1 << 40, rows),
            "score": rng.standard_normal(rows).astype(np.float32),
            "rank": rng.integers(0, 99, rows).astype(np.int32),
        }
        originals.append(columns)
        stacked = stack_columns(columns)
        block, _ = stacked.stacks["wide"]
        assert block.shape[1] % 8 == 0  # rows padded to the widest type
        for name, column in columns.items():
            _, offset = stacked.stacks[name]
            assert offset % column.dtype.itemsize == 0
            np.testing.assert_array_equal(stacked[name], column)
        blocks.append(stacked)
    block_of = np.array([2, 0, 1, 2, 2, 0, 2, 0])
    rows = np.array([10, 5, 0, 3, 0, 0, 7, 2])
    _, grouping = split_blocks(block_of)
    batch = gather_batch(blocks, grouping, rows)
    for name in originals[0]:
        expected = [originals[b][name][r] for b, r in zip(block_of, rows, strict=True)]
        np.testing.assert_array_equal(batch[name], expected)
        assert batch[name].dtype == originals[0][name].dtype
        assert batch[name].flags.c_contiguous


def test_a_spill_folder_of_an_older_layout_is_replaced(tmp_path):
    import json

    from stoker._sources.spill import SpillFolder

    source = {"path": "/data/a.parquet", "size": 10, "mtime": 1.0, "columns": ["x", "y"]}
    older = tmp_path / "0123456789abcdef0123456789abcdef"
    older.mkdir()
    (older / "source.json").write_text(json.dumps(source))  # no layout: the first one
    (older / "rg-000000.bin").write_bytes(b"STKRG001" + bytes(8))
    folder = SpillFolder(tmp_path, source)
    folder.prepare()
    assert not older.exists()
    columns = stack_columns({"x": np.arange(4.0), "y": np.arange(4, dtype=np.int32)})
    assert folder.save(0, columns)
    back = folder.load(0)
    assert back is not None
    assert back["x"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert back["y"].tolist() == [0, 1, 2, 3]
    assert back.plan is columns.plan  # one layout, one plan


FLAT = ["a", "b", "c", "d", "label", "x64", "flag"]  # 1-D numeric columns only


@pytest.fixture(scope="module")
def two_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("two")
    table = _numeric().select(FLAT)
    pq.write_table(table.slice(0, 130), root / "a.parquet", row_group_size=50)
    pq.write_table(table.slice(130), root / "b.parquet", row_group_size=30)
    return root


def test_whole_files_of_rows_give_the_rows_pyarrow_reads(two_files, tmp_path):
    ds = sk.from_parquet(two_files, cache_dir=tmp_path)
    ds.write_cache()
    assert all((tmp_path / folder).is_dir() for folder in ds.cache_folders)
    assert [len(f[FLAT[0]]) for f in ds._whole_files()] == [130, N - 130]
    table = pa.concat_tables(
        [pq.read_table(two_files / "a.parquet"), pq.read_table(two_files / "b.parquet")]
    )
    for sampler in (ds.shuffle_sampler(seed=5), sk.RandomSampler(len(ds), seed=6)):
        order = sampler.cursor(epoch=0).take(len(ds))
        loader = sk.DataLoader(ds, batch_size=32, sampler=sampler)
        for k, batch in enumerate(loader):
            expected = table.take(pa.array(order[32 * k : 32 * (k + 1)]))
            assert list(batch) == FLAT
            for name in FLAT:
                want = expected.column(name).to_numpy(zero_copy_only=False)
                assert batch[name].dtype == want.dtype, name
                assert batch[name].flags.c_contiguous, name
                np.testing.assert_array_equal(batch[name], want)
    for mode in ("thread", "process"):
        assert_same_in_every_mode(
            ds, modes=(mode,), epochs=2, batch_size=24, sampler=ds.shuffle_sampler(seed=3)
        )
    assert_resumes_exactly(sk.DataLoader(ds, batch_size=40, shuffle=True, seed=2), epochs=1)


def test_whole_files_of_list_and_2d_columns_give_the_rows_pyarrow_reads(path, tmp_path):
    columns = ["a", "vec", "tokens"]
    ds = sk.from_parquet(path, columns=columns, cache_dir=tmp_path)
    ds.write_cache()
    assert [len(f["a"]) for f in ds._whole_files()] == [N]
    assert all((tmp_path / f / "rows.bin").exists() for f in ds.cache_folders)
    table = pq.read_table(path, columns=columns)
    order = sk.RandomSampler(N, seed=4).cursor(epoch=0).take(N)
    for k in range(0, N, 16):
        expected = table.take(pa.array(order[k : k + 16])).to_pylist()
        records = ds.__getitems__(order[k : k + 16].tolist())
        assert [float(r["a"]) for r in records] == [r["a"] for r in expected]
        assert [r["vec"].tolist() for r in records] == [r["vec"] for r in expected]
        assert [r["tokens"].tolist() for r in records] == [r["tokens"] for r in expected]
    batch = next(iter(sk.DataLoader(ds, batch_size=4, collate_fn=sk.pad_collate)))
    assert batch["vec"].tolist() == [[0, 0], [1, -1], [2, -2], [3, -3]]


def test_one_column_of_each_dtype_lands_in_recycled_buffers(tmp_path):
    # Each column its own array (not a view of a shared one): the buffer pool plans
    # from the first batch and recycles every later one.
    path = tmp_path / "xy.parquet"
    n = 4_000
    table = pa.table({"x": np.arange(n, dtype=np.float64), "y": np.arange(n, dtype=np.int64)})
    pq.write_table(table, path, row_group_size=1_000)
    loader = sk.DataLoader(sk.from_parquet(str(path)), batch_size=100)
    with loader, loader.iter() as it:
        seen = [int(b["y"][0]) for b in it]
        stats = it.stats()
    assert seen == list(range(0, n, 100))
    assert stats.recycled_batches >= len(seen) - 4
