import pickle

import numpy as np
import pytest

import stoker as sk
from stoker._context import Context

CTX = Context(seed=0, epoch=0)
INDICES = np.array([3, 0, 3, 1], dtype=np.int64)


def assert_tree_equal(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_tree_equal(a[key], b[key])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_tree_equal(x, y)
    else:
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.fixture
def xy():
    x = np.arange(24, dtype=np.float32).reshape(6, 2, 2)
    y = np.arange(6, dtype=np.int32) * 10
    return x, y


def test_named_arrays_give_dict_records(xy):
    x, y = xy
    ds = sk.from_arrays(image=x, label=y)
    assert len(ds) == 6
    record = ds[2]
    assert set(record) == {"image", "label"}
    np.testing.assert_array_equal(record["image"], x[2])
    assert isinstance(record["label"], np.int32)
    assert record["label"] == 20


def test_one_positional_array_gives_rows(xy):
    x, y = xy
    np.testing.assert_array_equal(sk.from_arrays(x)[5], x[5])
    row = sk.from_arrays(y)[1]
    assert isinstance(row, np.int32)
    assert row == 10


def test_several_positional_arrays_give_tuples(xy):
    x, y = xy
    image, label = sk.from_arrays(x, y)[4]
    np.testing.assert_array_equal(image, x[4])
    assert label == 40


@pytest.mark.parametrize("kind", ["named", "one", "tuple"])
def test_gather_equals_collate_of_fetch_and_fills_out(xy, kind):
    x, y = xy
    ds = {
        "named": sk.from_arrays(image=x, label=y),
        "one": sk.from_arrays(x),
        "tuple": sk.from_arrays(x, y),
    }[kind]
    expected = sk.default_collate(ds._fetch(INDICES, CTX))
    assert_tree_equal(ds._gather(INDICES, CTX, None), expected)
    out = {
        "named": {"image": np.empty((4, 2, 2), np.float32), "label": np.empty(4, np.int32)},
        "one": np.empty((4, 2, 2), np.float32),
        "tuple": (np.empty((4, 2, 2), np.float32), np.empty(4, np.int32)),
    }[kind]
    batch = ds._gather(INDICES, CTX, out)
    assert_tree_equal(batch, expected)
    if kind == "named":
        assert batch["image"] is out["image"]
        assert batch["label"] is out["label"]
    elif kind == "one":
        assert batch is out
    else:
        assert batch[0] is out[0]
        assert batch[1] is out[1]


def test_memmap_is_read_in_place_and_reopened_after_pickling(tmp_path):
    path = tmp_path / "x.npy"
    data = np.arange(4000, dtype=np.float32).reshape(1000, 4)
    np.save(path, data)
    mapped = np.load(path, mmap_mode="r")
    for array, rows in ((mapped, data), (mapped[100:300], data[100:300])):
        ds = sk.from_arrays(x=array)
        batch = ds._gather(INDICES, CTX, None)
        assert type(batch["x"]) is np.ndarray
        np.testing.assert_array_equal(batch["x"], rows[INDICES])
        blob = pickle.dumps(ds)
        assert len(blob) < 2000  # the file is reopened, its bytes are not in the pickle
        again = pickle.loads(blob)
        np.testing.assert_array_equal(again._gather(INDICES, CTX, None)["x"], rows[INDICES])
        np.testing.assert_array_equal(again[7]["x"], rows[7])


def test_in_memory_arrays_pickle_by_value(xy):
    x, y = xy
    again = pickle.loads(pickle.dumps(sk.from_arrays(x, y)))
    assert_tree_equal(again._gather(INDICES, CTX, None), (x[INDICES], y[INDICES]))


def test_unequal_lengths_name_the_fields():
    with pytest.raises(sk.ConfigError, match=r"image: 5, label: 4"):
        sk.from_arrays(image=np.zeros((5, 2)), label=np.zeros(4))
    with pytest.raises(sk.ConfigError, match=r"array 0: 3, array 1: 2"):
        sk.from_arrays(np.zeros(3), np.zeros(2))


def test_other_bad_arguments():
    with pytest.raises(sk.ConfigError, match="0-dimensional"):
        sk.from_arrays(x=np.array(1.0))
    with pytest.raises(sk.ConfigError, match="not both"):
        sk.from_arrays(np.zeros(2), y=np.zeros(2))
    with pytest.raises(sk.ConfigError, match="at least one"):
        sk.from_arrays()
    with pytest.raises(sk.ConfigError, match=r"np\.asarray"):
        sk.from_arrays(x=[1, 2, 3])
