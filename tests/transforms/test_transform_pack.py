"""``sk.pack``: variable-length records packed into fixed-length rows, exactly resumable."""

from __future__ import annotations

import json

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches

N = 40
LENGTH = 16


def _record(i: int) -> dict[str, list[int]]:
    n = (i * 7) % 19 + 1  # 1..19 tokens: some longer than LENGTH
    return {"tokens": [i * 100 + j for j in range(n)]}


def _records() -> sk.Dataset:
    return sk.from_sequence([_record(i) for i in range(N)])


def _segments(batch: dict[str, np.ndarray]) -> list[list[int]]:
    """The records in a batch, row by row, segment by segment (padding left out)."""
    out = []
    for tokens, seg, pos in zip(
        batch["tokens"], batch["segment_ids"], batch["positions"], strict=True
    ):
        for s in range(1, int(seg.max()) + 1):
            where = seg == s
            assert pos[where].tolist() == list(range(int(where.sum())))
            out.append(tokens[where].tolist())
        assert (tokens[seg == 0] == 0).all()
        assert (pos[seg == 0] == 0).all()
    return out


def _reference(order: list[int], batch_size: int) -> list[list[list[int]]]:
    """First fit into ``batch_size`` rows; a record that fits nowhere starts a batch."""
    batches: list[list[list[int]]] = []
    rows: list[list[list[int]]] = []
    for i in order:
        tokens = _record(i)["tokens"][:LENGTH]
        room = [r for r in rows if sum(map(len, r)) + len(tokens) <= LENGTH]
        if room:
            room[0].append(tokens)
        elif len(rows) < batch_size:
            rows.append([tokens])
        else:
            batches.append([seg for r in rows for seg in r])
            rows = [[tokens]]
    batches.append([seg for r in rows for seg in r])
    return batches


def _order(seed: int, epoch: int = 0) -> list[int]:
    loader = sk.DataLoader(sk.range(N), batch_size=N, shuffle=True, seed=seed)
    return next(iter(loader.iter(epoch=epoch))).tolist()


def test_rows_are_first_fit_in_sampler_order_with_segments_and_positions() -> None:
    loader = sk.DataLoader(sk.pack(_records(), LENGTH), batch_size=4, shuffle=True, seed=3)
    batches = list(loader)
    assert [_segments(b) for b in batches] == _reference(_order(3), 4)
    for b in batches[:-1]:
        assert b["tokens"].shape == (4, LENGTH)
        assert b["segment_ids"].dtype == np.int32
        assert b["positions"].dtype == np.int32
    seen = sorted(seg[0] // 100 for b in batches for seg in _segments(b))
    assert seen == list(range(N))  # every record once


def test_long_records_are_truncated_by_default() -> None:
    ds = sk.from_sequence([{"tokens": np.arange(40)}])
    (batch,) = sk.DataLoader(ds.pack(16), batch_size=2)
    assert batch["tokens"].tolist() == [list(range(16))]


def test_split_cuts_long_records_into_pieces_in_one_batch() -> None:
    ds = sk.from_sequence([{"tokens": np.arange(1, 36)}, {"tokens": np.array([99, 98])}])
    batches = list(sk.DataLoader(ds.pack(16, overflow="split"), batch_size=3))
    assert len(batches) == 1
    (batch,) = batches
    assert batch["tokens"][0].tolist() == list(range(1, 17))
    assert batch["tokens"][1].tolist() == list(range(17, 33))
    assert batch["tokens"][2].tolist() == [33, 34, 35, 99, 98] + [0] * 11
    assert batch["segment_ids"][2].tolist()[:6] == [1, 1, 1, 2, 2, 0]
    assert batch["positions"][2].tolist()[:6] == [0, 1, 2, 0, 1, 0]
    # A record's pieces never straddle two batches.
    three = sk.from_sequence([{"tokens": np.arange(20)}, {"tokens": [1, 2]}] * 2)
    two = list(sk.DataLoader(three.pack(16, overflow="split"), batch_size=2))
    assert [b["segment_ids"].max(1).tolist() for b in two] == [[1, 2], [1, 2]]
    too_long = sk.from_sequence([{"tokens": np.arange(50)}])
    with pytest.raises(sk.CollateError, match="4 rows of 16"):
        list(sk.DataLoader(too_long.pack(16, overflow="split"), batch_size=3))


def test_several_fields_and_pad_values() -> None:
    ds = sk.from_sequence(
        [{"ids": [1, 2, 3], "labels": [4, 5, 6]}, {"ids": np.array([7]), "labels": [8]}]
    )
    packed = ds.pack(6, fields=("ids", "labels"), pad_value={"labels": -100})
    (batch,) = sk.DataLoader(packed, batch_size=2)
    assert batch["ids"].tolist() == [[1, 2, 3, 7, 0, 0]]
    assert batch["labels"].tolist() == [[4, 5, 6, 8, -100, -100]]
    assert sorted(batch) == ["ids", "labels", "positions", "segment_ids"]


def test_without_batch_size_it_yields_rows() -> None:
    rows = list(sk.DataLoader(sk.pack(_records(), LENGTH), batch_size=None))
    assert all(r["tokens"].shape == (LENGTH,) for r in rows)
    assert sum(int(r["segment_ids"].max()) for r in rows) == N


def test_collate_fn_gets_the_rows() -> None:
    loader = sk.DataLoader(sk.pack(_records(), LENGTH), batch_size=4, collate_fn=len)
    assert set(list(loader)[:-1]) == {4}


def test_filter_and_map_before_pack() -> None:
    ds = sk.range(N).filter(lambda i: i % 3 != 0).map(_record).pack(LENGTH)
    batches = list(sk.DataLoader(ds, batch_size=4))
    seen = sorted(seg[0] // 100 for b in batches for seg in _segments(b))
    assert seen == [i for i in range(N) if i % 3]


@pytest.mark.parametrize("last_batch", ["keep", "drop", "rollover"])
def test_resumes_exactly(last_batch: str) -> None:
    loader = sk.DataLoader(
        sk.pack(_records(), LENGTH), batch_size=4, shuffle=True, seed=2, last_batch=last_batch
    )
    assert_resumes_exactly(loader, epochs=3)


def test_rollover_carries_the_last_records_into_the_next_epoch() -> None:
    def loader(last_batch: str) -> sk.DataLoader:
        ds = sk.pack(_records(), LENGTH)
        return sk.DataLoader(ds, batch_size=4, shuffle=True, seed=2, last_batch=last_batch)

    keep = list(loader("keep"))
    assert keep[-1]["tokens"].shape[0] < 4
    rolling = loader("rollover")
    first, second = list(rolling), list(rolling)
    assert len(first) == len(keep) - 1
    carried = _segments(keep[-1])
    assert _segments(second[0])[: len(carried)] == carried
    assert all(b["tokens"].shape[0] == 4 for b in first + second)
    counts = np.bincount([s[0] // 100 for b in first + second for s in _segments(b)])
    assert set(counts.tolist()) <= {1, 2}  # each record once per epoch, carried or not


def test_drop_leaves_out_the_short_last_batch() -> None:
    keep = list(sk.DataLoader(sk.pack(_records(), LENGTH), batch_size=4))
    drop = list(sk.DataLoader(sk.pack(_records(), LENGTH), batch_size=4, last_batch="drop"))
    assert keep[-1]["tokens"].shape[0] < 4
    assert len(drop) == len(keep) - 1


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_workers_give_the_inline_batches(mode: str) -> None:
    def loader(**kw: object) -> sk.DataLoader:
        ds = sk.range(N).map(_record).pack(LENGTH)
        return sk.DataLoader(ds, batch_size=4, shuffle=True, seed=2, last_batch="rollover", **kw)

    workers = loader(num_workers=2, worker_mode=mode)
    assert_same_batches(loader(), workers, epochs=3)
    assert_resumes_exactly(workers, epochs=2, max_stops=4, fresh=loader())


def test_state_is_small_json() -> None:
    it = iter(sk.DataLoader(sk.pack(_records(), LENGTH), batch_size=3, shuffle=True))
    next(it)
    assert len(json.dumps(it.state_dict())) < 1000


def test_length_of_a_packed_loader_is_not_known() -> None:
    ds = sk.pack(_records(), LENGTH)
    assert len(ds) == N  # an upper bound on the rows, as for a filter
    with pytest.raises(TypeError, match="not known before reading"):
        len(sk.DataLoader(ds, batch_size=4))


def test_refusals() -> None:
    ds = sk.pack(_records(), LENGTH)
    with pytest.raises(sk.NotSupportedError, match="no record i"):
        ds[0]
    with pytest.raises(sk.NotSupportedError, match="last stage"):
        ds.map(lambda r: r)
    with pytest.raises(sk.NotSupportedError, match="last stage"):
        ds.filter(lambda r: True)
    with pytest.raises(sk.NotSupportedError, match="shard="):
        sk.DataLoader(ds, batch_size=2, shard=sk.Shard(0, 2))
    with pytest.raises(sk.NotSupportedError, match="map-style"):
        sk.pack(sk.from_iterable(lambda: iter([_record(0)])), LENGTH)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length": 0}, "length that is an int >= 1"),
        ({"length": 8, "fields": ()}, "needs fields"),
        ({"length": 8, "fields": ("segment_ids",)}, "rename"),
        ({"length": 8, "overflow": "wrap"}, "overflow must be one of"),
        ({"length": 8, "pad_value": {"labels": -1}}, r"\['labels'\]"),
    ],
)
def test_bad_arguments_are_config_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(sk.ConfigError, match=match):
        sk.pack(_records(), **kwargs)


@pytest.mark.parametrize(
    ("record", "match"),
    [
        ({"tokens": [1], "id": 3}, r"exactly the fields \['tokens'\], got \['id', 'tokens'\]"),
        ([1, 2], "got list"),
        ({"tokens": [[1, 2]]}, "1-D sequence"),
    ],
)
def test_records_that_cannot_be_packed(record: object, match: str) -> None:
    ds = sk.from_sequence([record, record]).pack(8)
    with pytest.raises(sk.CollateError, match=match):
        list(sk.DataLoader(ds, batch_size=2))


def test_fields_of_a_record_must_be_equally_long() -> None:
    ds = sk.from_sequence([{"a": [1, 2], "b": [1]}]).pack(8, fields=("a", "b"))
    with pytest.raises(sk.CollateError, match="equally long"):
        list(sk.DataLoader(ds, batch_size=2))


@pytest.mark.parametrize("combine", ["concat", "mix", "zip"])
def test_combining_packed_datasets_is_refused_with_the_order_to_use(combine):
    packed = sk.pack(sk.from_sequence([{"tokens": np.arange(3)}] * 4), length=8)
    build = {"concat": sk.concat, "mix": sk.mix, "zip": lambda parts: sk.zip(*parts)}[combine]
    with pytest.raises(sk.ConfigError, match=rf"pack last: sk\.pack\(sk\.{combine}"):
        build([packed, packed])


# -- a table source's list columns: packed from the columns, the rows of the record path


def _lengths(n: int) -> list[int]:
    return [(i * 11) % 37 for i in range(n)]  # 0..36 tokens: empty ones, and longer than LENGTH


def _token_table(n: int, fields: tuple[str, ...]) -> list[dict[str, np.ndarray]]:
    """Records of int32 token lists, field k of record i holding i * 1000 + k * 100 + j."""
    return [
        {f: np.arange(m, dtype=np.int32) + i * 1000 + k * 100 for k, f in enumerate(fields)}
        for i, m in enumerate(_lengths(n))
    ]


def _parquet(tmp_path, records: list[dict[str, np.ndarray]], name: str = "t.parquet") -> str:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    names = list(records[0])
    table = pa.table(
        {f: pa.array([r[f] for r in records], type=pa.list_(pa.int32())) for f in names}
    )
    path = tmp_path / name
    pq.write_table(table, path, row_group_size=7)  # chunks read across row groups
    return str(path)


def _both(tmp_path, fields: tuple[str, ...], n: int = 120) -> tuple[sk.Dataset, sk.Dataset]:
    """The same records from a Parquet file (list columns) and from a list of dicts."""
    records = _token_table(n, fields)
    return sk.from_parquet(_parquet(tmp_path, records)), sk.from_sequence(records)


@pytest.mark.parametrize("overflow", ["truncate", "split"])
@pytest.mark.parametrize("fields", [("tokens",), ("tokens", "labels")])
def test_list_columns_give_the_rows_of_the_record_path(tmp_path, overflow, fields) -> None:
    columns, records = _both(tmp_path, fields)
    pad = {f: -1 if f == "labels" else 0 for f in fields}

    def loader(ds: sk.Dataset, **kw: object) -> sk.DataLoader:
        packed = ds.pack(LENGTH, fields=fields, pad_value=pad, overflow=overflow)
        return sk.DataLoader(packed, batch_size=3, shuffle=True, seed=5, **kw)

    assert_same_batches(loader(records), loader(columns), epochs=2)
    batches = list(loader(columns))
    assert all(b[f].dtype == np.int32 for b in batches for f in fields)
    placed = sorted(int(seg[0]) // 1000 for b in batches for seg in _segments(b) if seg)
    expected = [i for i, m in enumerate(_lengths(120)) if m]
    if overflow == "truncate":
        assert placed == expected  # every non-empty record once, its first LENGTH tokens
    else:
        assert sorted(set(placed)) == expected  # long records in several pieces
    assert_resumes_exactly(loader(columns, last_batch="rollover"), epochs=2, max_stops=6)


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_list_columns_with_workers_give_the_inline_batches(tmp_path, mode) -> None:
    columns, records = _both(tmp_path, ("tokens", "labels"))

    def loader(ds: sk.Dataset, **kw: object) -> sk.DataLoader:
        packed = ds.pack(LENGTH, fields=("tokens", "labels"), overflow="split")
        return sk.DataLoader(packed, batch_size=4, shuffle=True, seed=2, **kw)

    workers = loader(columns, num_workers=2, worker_mode=mode)
    assert_same_batches(loader(records), workers, epochs=2)
    # Stopped in the middle of an epoch, it resumes with the rows of the record path.
    assert_resumes_exactly(workers, epochs=1, max_stops=4, fresh=loader(records))


def test_list_columns_are_read_as_columns(tmp_path) -> None:
    from stoker._context import Context
    from stoker._transforms.packer import PackChunk

    columns, _ = _both(tmp_path, ("tokens",), n=10)
    chunk = sk.pack(columns, LENGTH)._fetch(np.arange(10), Context(0, 0))
    assert isinstance(chunk, PackChunk)  # the column path, not records one by one
    assert chunk.lengths == [min(m, LENGTH) for m in _lengths(10)]
    assert [r["tokens"].tolist() for r in chunk] == [
        list(range(i * 1000, i * 1000 + min(m, LENGTH))) for i, m in enumerate(_lengths(10))
    ]


def test_list_columns_that_cannot_be_packed_say_why(tmp_path) -> None:
    uneven = [{"a": np.arange(3, dtype=np.int32), "b": np.arange(2, dtype=np.int32)}] * 2
    ds = sk.from_parquet(_parquet(tmp_path, uneven, "uneven.parquet"))
    with pytest.raises(sk.CollateError, match="equally long"):
        list(sk.DataLoader(ds.pack(8, fields=("a", "b")), batch_size=2))
    with pytest.raises(sk.CollateError, match=r"exactly the fields \['a'\], got \['a', 'b'\]"):
        list(sk.DataLoader(ds.pack(8, fields="a"), batch_size=2))
    long = [{"tokens": np.arange(50, dtype=np.int32)}]
    ds = sk.from_parquet(_parquet(tmp_path, long, "long.parquet"))
    with pytest.raises(sk.CollateError, match="4 rows of 16"):
        list(sk.DataLoader(ds.pack(16, overflow="split"), batch_size=3))


def test_records_of_mixed_dtypes_and_byte_orders_are_cast_into_one_batch() -> None:
    records = [
        {"tokens": np.array([1, 2], dtype=np.int16)},
        {"tokens": np.array([3, 4, 5], dtype=">i4")},
        {"tokens": np.array([6], dtype=np.int32)},
    ]
    (batch,) = sk.DataLoader(sk.from_sequence(records).pack(4), batch_size=2)
    assert batch["tokens"].dtype == np.int32
    assert batch["tokens"].tolist() == [[1, 2, 6, 0], [3, 4, 5, 0]]


def test_rows_of_many_segments() -> None:
    ones = sk.from_sequence([{"tokens": [i]} for i in range(1, 101)])
    (batch,) = sk.DataLoader(ones.pack(100), batch_size=1)
    assert batch["segment_ids"].tolist() == [list(range(1, 101))]
    assert batch["positions"].tolist() == [[0] * 100]
    assert batch["tokens"].tolist() == [list(range(1, 101))]
