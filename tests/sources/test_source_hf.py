import pickle

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")

import stoker as sk  # noqa: E402
from stoker.testing import (  # noqa: E402
    assert_resumes_exactly,
    assert_same_batches,
    assert_same_in_every_mode,
    run_epochs,
)

N = 120

FEATURES = datasets.Features(
    {
        "id": datasets.Value("int64"),
        "score": datasets.Value("float32"),
        "name": datasets.Value("string"),
        "tokens": datasets.Sequence(datasets.Value("int32")),
        "vec": datasets.Sequence(datasets.Value("float64"), length=4),
    }
)
FIXED = ["id", "score", "name", "vec"]


@pytest.fixture(autouse=True)
def _quiet_progress_bars():
    datasets.disable_progress_bars()
    yield
    datasets.enable_progress_bars()


def _dict(n=N):
    rng = np.random.default_rng(0)
    return {
        "id": list(range(n)),
        "score": rng.random(n).astype(np.float32).tolist(),
        "name": [f"row-{i}" for i in range(n)],
        "tokens": [list(range(i % 7)) for i in range(n)],
        "vec": [[i, i + 0.5, i + 1, i + 1.5] for i in range(n)],
    }


@pytest.fixture
def in_memory():
    return datasets.Dataset.from_dict(_dict(), features=FEATURES)


@pytest.fixture
def on_disk(tmp_path, in_memory):
    in_memory.save_to_disk(str(tmp_path / "saved"))
    return datasets.load_from_disk(str(tmp_path / "saved"))


def _views(hf):
    """The dataset as it is, and after the operations that leave an indices mapping."""
    shuffled = hf.shuffle(seed=1)
    return {
        "plain": hf,
        "shuffled": shuffled,
        "selected": shuffled.select(range(10, 90)),
        "filtered": hf.filter(lambda r: r["id"] % 3 != 0),
        "split": hf.train_test_split(test_size=0.25, seed=0)["test"],
    }


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _same_record(record, expected):
    assert list(record) == list(expected)
    for key, value in expected.items():
        got = _plain(record[key])
        if isinstance(value, float):
            assert got == pytest.approx(value), key
        else:
            assert got == value, key


@pytest.mark.parametrize("backing", ["in_memory", "on_disk"])
def test_records_equal_what_datasets_reads(backing, request):
    hf = request.getfixturevalue(backing)
    for name, view in _views(hf).items():
        ds = sk.from_hf(view)
        assert len(ds) == len(view), name
        order = [0, len(view) - 1, 3, 3, len(view) // 2]
        for i, record in zip(order, ds.__getitems__(order), strict=True):
            _same_record(record, view[i])
    record = sk.from_hf(hf)[5]
    assert isinstance(record["id"], np.int64)
    assert isinstance(record["score"], np.float32)
    assert isinstance(record["name"], str)
    assert record["tokens"].dtype == np.int32
    assert record["tokens"].ndim == 1
    assert record["vec"].shape == (4,)


def test_format_does_not_change_the_records(in_memory):
    plain = sk.from_hf(in_memory)
    formatted = sk.from_hf(in_memory.with_format("numpy", columns=["id"]))
    for a, b in zip(plain.__getitems__([4, 1]), formatted.__getitems__([4, 1]), strict=True):
        assert _plain(a["tokens"]) == _plain(b["tokens"])
        assert a["name"] == b["name"]


def test_batches_are_column_arrays(in_memory):
    view = in_memory.shuffle(seed=2)
    loader = sk.DataLoader(sk.from_hf(view, columns=FIXED), batch_size=16)
    batch = next(iter(loader))
    assert list(batch) == FIXED
    expected = view[:16]
    assert batch["id"].tolist() == expected["id"]
    assert batch["score"].dtype == np.float32
    assert batch["vec"].shape == (16, 4)
    assert batch["vec"].tolist() == expected["vec"]
    assert batch["name"] == expected["name"]


def test_variable_length_lists_are_padded_by_pad_collate(in_memory):
    ds = sk.from_hf(in_memory, columns=["id", "tokens"])
    batch = next(iter(sk.DataLoader(ds, batch_size=8, collate_fn=sk.pad_collate)))
    assert batch["tokens"].shape == (8, 6)
    assert batch["tokens"][6].tolist() == [0, 1, 2, 3, 4, 5]
    assert batch["tokens"][2].tolist() == [0, 1, 0, 0, 0, 0]


@pytest.mark.parametrize("backing", ["in_memory", "on_disk"])
def test_a_shuffled_epoch_reads_every_row_once(backing, request):
    view = request.getfixturevalue(backing).filter(lambda r: r["id"] % 2 == 0)
    loader = sk.DataLoader(sk.from_hf(view, columns=["id"]), batch_size=16, shuffle=True)
    ids = np.concatenate([b["id"] for b in loader]).tolist()
    assert sorted(ids) == list(range(0, N, 2))
    assert ids != sorted(ids)


@pytest.mark.parametrize("mode", ["thread", "process"])
@pytest.mark.parametrize("backing", ["in_memory", "on_disk"])
def test_workers_give_the_batches_of_inline(backing, mode, request):
    view = request.getfixturevalue(backing).shuffle(seed=4).select(range(100))
    ds = sk.from_hf(view, columns=FIXED)
    assert_same_in_every_mode(ds, modes=(mode,), epochs=2, batch_size=20, shuffle=True, seed=3)


def test_resumes_exactly(in_memory):
    ds = sk.from_hf(in_memory.filter(lambda r: r["id"] % 5 != 0), columns=FIXED)
    assert_resumes_exactly(sk.DataLoader(ds, batch_size=24, shuffle=True, seed=1), epochs=2)


def test_a_dataset_on_disk_pickles_as_its_files(on_disk):
    view = on_disk.shuffle(seed=0)
    ds = sk.from_hf(view, columns=FIXED)
    data = pickle.dumps(ds)
    assert len(data) < 20_000
    copy = pickle.loads(data)
    assert_same_batches(sk.DataLoader(ds, batch_size=32), sk.DataLoader(copy, batch_size=32))


def test_an_in_memory_dataset_pickles_with_its_data(in_memory):
    ds = sk.from_hf(in_memory.select([5, 1, 7]))
    copy = pickle.loads(pickle.dumps(ds))
    assert [int(r["id"]) for r in copy.__getitems__([0, 1, 2])] == [5, 1, 7]


def test_missing_column_names_the_existing_ones(in_memory):
    with pytest.raises(sk.ConfigError, match=r"no column 'label'.*'id', 'score', 'name'"):
        sk.from_hf(in_memory, columns=["id", "label"])


def test_unsupported_feature_is_named(in_memory):
    nested = in_memory.add_column("nested", [[[1], [2, 3]]] * N)
    with pytest.raises(sk.ConfigError, match=r"column 'nested'.*list<item: list.*feature"):
        sk.from_hf(nested)
    image = datasets.Dataset.from_dict(
        {"img": [{"bytes": b"\x89PNG", "path": None}], "y": [1]},
        features=datasets.Features({"img": datasets.Image(), "y": datasets.Value("int8")}),
    )
    with pytest.raises(sk.ConfigError, match=r"column 'img'.*struct.*Image feature"):
        sk.from_hf(image)
    assert int(sk.from_hf(image, columns=["y"])[0]["y"]) == 1


def test_a_transform_that_cannot_be_applied_is_refused(in_memory):
    with pytest.raises(sk.ConfigError, match="with_transform"):
        sk.from_hf(in_memory.with_transform(lambda batch: batch))


def test_a_dataset_dict_asks_for_a_split(in_memory):
    with pytest.raises(sk.ConfigError, match=r"dataset\['train'\]"):
        sk.from_hf(datasets.DatasetDict({"train": in_memory}))
    with pytest.raises(sk.ConfigError, match=r"datasets\.Dataset"):
        sk.from_hf([{"id": 1}])


# -- IterableDataset ----------------------------------------------------------------


def _stream(in_memory, shards=4):
    return in_memory.to_iterable_dataset(num_shards=shards)


def test_stream_records_equal_what_datasets_reads(in_memory):
    hf = _stream(in_memory)
    records = list(sk.from_hf(hf))
    expected = list(hf)
    assert len(records) == N
    for record, row in zip(records, expected, strict=True):
        _same_record(record, row)
    assert isinstance(records[0]["id"], np.int64)
    assert records[3]["tokens"].dtype == np.int32
    assert records[0]["vec"].shape == (4,)


def test_stream_columns_are_checked(in_memory):
    assert list(next(iter(sk.from_hf(_stream(in_memory), columns=["name", "id"])))) == [
        "name",
        "id",
    ]
    with pytest.raises(sk.ConfigError, match="no column 'nope'"):
        sk.from_hf(_stream(in_memory), columns=["nope"])


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("shards", [4, 3])
def test_stream_resumes_exactly(in_memory, workers, shards):
    ds = sk.from_hf(_stream(in_memory, shards), columns=FIXED)
    loader = sk.DataLoader(
        ds, batch_size=16, num_workers=workers, worker_mode="thread" if workers else "inline"
    )
    assert_resumes_exactly(loader, epochs=2, max_stops=6)
    ids = sorted(int(i) for b in run_epochs(loader) for i in b["id"])
    assert ids == list(range(N))  # the workers split the stream: no row read twice


def test_stream_with_a_shuffle_buffer_resumes_exactly(in_memory):
    hf = _stream(in_memory).shuffle(seed=5, buffer_size=16)
    loader = sk.DataLoader(sk.from_hf(hf, columns=["id"]), batch_size=10)
    assert_resumes_exactly(loader, epochs=2, max_stops=5)
    first, second = run_epochs(loader, 2)[:12], run_epochs(loader, 2)[12:]
    assert sorted(int(i) for b in first for i in b["id"]) == list(range(N))
    assert [b["id"].tolist() for b in first] != [b["id"].tolist() for b in second]


def test_stream_in_process_workers_gives_the_batches_of_threads(in_memory):
    ds = sk.from_hf(_stream(in_memory), columns=FIXED)
    threads = sk.DataLoader(ds, batch_size=16, num_workers=2, worker_mode="thread")
    processes = sk.DataLoader(ds, batch_size=16, num_workers=2, worker_mode="process")
    with processes:
        assert_same_batches(threads, processes)
