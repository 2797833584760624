"""``sk.pad_collate``: arrays and lists padded, truncated, masked; and its errors."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import stoker as sk


def _hand_pad(rows: list[np.ndarray], width: int, fill: int = 0) -> np.ndarray:
    lengths = np.array([min(len(r), width) for r in rows])
    out = np.full((len(rows), width), fill, dtype=np.result_type(*rows))
    out[np.arange(width) < lengths[:, None]] = np.concatenate([r[:width] for r in rows])
    return out


@pytest.mark.parametrize("as_list", [False, True])
def test_pads_like_a_hand_written_pad(as_list: bool) -> None:
    rng = np.random.default_rng(0)
    rows = [rng.integers(0, 100, size=n, dtype=np.int32) for n in rng.integers(0, 40, size=16)]
    records = [{"tokens": r.tolist() if as_list else r} for r in rows]
    batch = sk.pad_collate(records)
    expected = _hand_pad(rows, max(len(r) for r in rows))
    np.testing.assert_array_equal(batch["tokens"], expected)
    assert batch["tokens"].dtype == (np.int64 if as_list else np.int32)


def test_lists_and_arrays_mix_in_one_field() -> None:
    batch = sk.pad_collate([{"t": [1, 2, 3]}, {"t": np.array([4])}, {"t": []}])
    assert batch["t"].tolist() == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]


def test_bare_records_of_lists_and_arrays() -> None:
    assert sk.pad_collate([[1, 2, 3], [4]]).tolist() == [[1, 2, 3], [4, 0, 0]]
    assert sk.pad_collate([np.array([1.5]), np.array([2.5, 3.5])], -1).tolist() == [
        [1.5, -1],
        [2.5, 3.5],
    ]


def test_max_length_truncates_and_pads_to_a_fixed_width() -> None:
    records = [{"t": np.arange(5)}, {"t": np.arange(2)}]
    batch = sk.pad_collate(records, max_length=3, lengths=True, mask=True)
    assert batch["t"].tolist() == [[0, 1, 2], [0, 1, 0]]
    assert batch["t_lengths"].tolist() == [3, 2]
    assert batch["t_mask"].tolist() == [[True, True, True], [True, True, False]]
    wide = sk.pad_collate(records, max_length=8)
    assert wide["t"].shape == (2, 8)


def test_multiple_of_rounds_every_axis_up() -> None:
    batch = sk.pad_collate([np.ones((3, 2)), np.ones((5, 1))], multiple_of=4)
    assert batch.shape == (2, 8, 4)
    assert batch[1, :5, :1].all()
    assert batch[1, 5:].sum() == 0
    assert batch[1, :, 1:].sum() == 0


def test_per_field_pad_values_and_other_fields_collated() -> None:
    records = [
        {"ids": [1, 2], "labels": [7, 8], "score": 0.5, "name": "a"},
        {"ids": [3], "labels": [9], "score": 1.5, "name": "b"},
    ]
    batch = sk.pad_collate(records, pad_value={"labels": -100}, lengths=["ids"])
    assert batch["ids"].tolist() == [[1, 2], [3, 0]]
    assert batch["labels"].tolist() == [[7, 8], [9, -100]]
    assert batch["score"].tolist() == [0.5, 1.5]
    assert batch["name"] == ["a", "b"]
    assert sorted(batch) == ["ids", "ids_lengths", "labels", "name", "score"]


def test_lengths_and_mask_cover_every_sequence_field() -> None:
    records = [
        {"a": [1], "b": np.zeros((2, 3)), "y": 1},
        {"a": [1, 2], "b": np.zeros((1, 3)), "y": 0},
    ]
    batch = sk.pad_collate(records, lengths=True, mask=True)
    assert batch["a_lengths"].tolist() == [1, 2]
    assert batch["b_lengths"].tolist() == [2, 1]
    assert batch["b_mask"].shape == (2, 2)
    assert batch["b_mask"].dtype == np.bool_
    assert "y_lengths" not in batch


def test_nested_containers_are_padded_too() -> None:
    records = [({"x": [1, 2]}, 3), ({"x": [4]}, 5)]
    inner, label = sk.pad_collate(records)
    assert inner["x"].tolist() == [[1, 2], [4, 0]]
    assert label.tolist() == [3, 5]
    image_label = sk.pad_collate([[np.zeros(2), 1], [np.ones(3), 2]])
    assert image_label[0].shape == (2, 3)
    assert image_label[1].tolist() == [1, 2]


def test_nested_lists_are_padded_as_2d() -> None:
    batch = sk.pad_collate([{"t": [[1, 2], [3, 4]]}, {"t": [[5, 6]]}], lengths=True)
    assert batch["t"].tolist() == [[[1, 2], [3, 4]], [[5, 6], [0, 0]]]
    assert batch["t_lengths"].tolist() == [2, 1]


def test_torch_tensors_are_padded() -> None:
    torch = pytest.importorskip("torch")
    batch = sk.pad_collate([torch.tensor([1, 2]), torch.tensor([3])])
    assert batch.tolist() == [[1, 2], [3, 0]]


def test_as_a_loader_collate_fn_with_partial() -> None:
    ds = sk.from_sequence([{"tokens": list(range(i % 5 + 1))} for i in range(12)])
    collate = functools.partial(sk.pad_collate, max_length=4, mask=True)
    loader = sk.DataLoader(ds, batch_size=4, collate_fn=collate, shuffle=True, seed=1)
    batches = list(loader)
    assert [b["tokens"].shape for b in batches] == [(4, 4)] * 3
    for b in batches:
        assert (b["tokens_mask"].sum(1) == np.minimum((b["tokens"] != 0).sum(1) + 1, 4)).all()


@pytest.mark.parametrize(
    ("kwargs", "records", "match"),
    [
        ({"mask": True}, [[1], [2, 3]], "need dict records"),
        ({"pad_value": {"t": 1}}, [[1], [2, 3]], "need dict records"),
        ({"pad_value": {"typo": 1}}, [{"t": [1]}], r"fields \['typo'\].*they have \['t'\]"),
        ({"lengths": ["y"]}, [{"t": [1], "y": 2}], r"'y'.*sequence fields are \['t'\]"),
        ({"lengths": True}, [{"t": [1], "t_lengths": 2}], "already have a field"),
        ({"max_length": 10, "multiple_of": 8}, [{"t": [1]}], "not a multiple"),
        ({"max_length": 0}, [{"t": [1]}], "max_length must be an integer >= 1"),
        ({"multiple_of": 0}, [{"t": [1]}], "multiple_of must be an integer >= 1"),
        ({}, [], "empty"),
        ({}, [np.zeros(2), np.zeros((2, 2))], "1 and 2 dimensions"),
        ({}, [{"t": [1]}, {"u": [1]}], r"keys \['t'\] vs \['u'\]"),
        ({"pad_value": -1}, [np.zeros(2, np.uint8), np.zeros(1, np.uint8)], "uint8 can hold"),
        ({}, [{"t": ["a", "b"]}, {"t": ["c"]}], "cannot"),
    ],
)
def test_bad_input_is_a_collate_error(kwargs, records, match) -> None:
    with pytest.raises(sk.CollateError, match=match):
        sk.pad_collate(records, **kwargs)


def test_ragged_lists_in_default_collate_point_at_pad_collate_and_pack() -> None:
    ds = sk.from_sequence([{"tokens": list(range(i + 1))} for i in range(4)])
    with pytest.raises(sk.CollateError, match=r"\['tokens'\].*pad_collate.*sk\.pack"):
        list(sk.DataLoader(ds, batch_size=2))
    arrays = sk.from_sequence([{"tokens": np.zeros(i + 1)} for i in range(4)])
    with pytest.raises(sk.CollateError, match=r"\['tokens'\].*pad_collate.*sk\.pack"):
        list(sk.DataLoader(arrays, batch_size=2))


def test_equal_lists_still_collate_field_by_field() -> None:
    batch = sk.default_collate([[1, 2], [3, 4]])
    assert [c.tolist() for c in batch] == [[1, 3], [2, 4]]
