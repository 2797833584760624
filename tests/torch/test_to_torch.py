"""``stoker.torch.to_torch`` on the CPU: tensors without a copy, an exact state, errors late.

The CUDA path (side stream, ``wait_stream``, ``record_stream``) needs a GPU; here the
host path and its bookkeeping are checked.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import stoker as sk
from stoker.torch import as_tensors, to_torch


def _loader(n: int = 20, batch_size: int = 3, **kwargs: Any) -> sk.DataLoader[Any]:
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    return sk.DataLoader(sk.from_arrays(x=x, y=np.arange(n)), batch_size=batch_size, **kwargs)


def _labels(batches: Any) -> list[list[int]]:
    return [b["y"].tolist() for b in batches]


def test_tensors_share_the_loaders_buffers() -> None:
    seen: list[dict[str, np.ndarray]] = []

    def tap(it: Iterator[Any]) -> Iterator[Any]:
        for batch in it:
            seen.append(batch)
            yield batch

    got = list(to_torch(tap(iter(_loader(shuffle=True))), prefetch=2))
    assert len(got) == len(seen) == 7
    for batch, arrays in zip(got, seen, strict=True):
        assert isinstance(batch["x"], torch.Tensor)
        assert batch["x"].dtype == torch.float32
        assert batch["y"].dtype == torch.int64
        assert batch["x"].data_ptr() == arrays["x"].ctypes.data
        assert batch["y"].data_ptr() == arrays["y"].ctypes.data


def test_dropped_tensors_give_their_buffers_back() -> None:
    loader = _loader(60, prefetch=0)
    it = iter(loader)
    for batch in to_torch(it, prefetch=1):
        del batch
    stats = it.stats()
    assert stats.recycled_batches >= stats.batches - 4
    assert stats.allocated_batches <= 4


@pytest.mark.parametrize("prefetch", [0, 1, 2, 5])
def test_state_is_that_of_the_last_batch_yielded(prefetch: int) -> None:
    loader = _loader(shuffle=True, seed=4)
    expected = _labels(_loader(shuffle=True, seed=4).iter(epoch=0))
    placed = to_torch(loader, prefetch=prefetch)
    it = iter(placed)
    for k in range(len(expected)):
        assert next(it)["y"].tolist() == expected[k]
        state = json.loads(json.dumps(it.state_dict()))
        assert state["batches"] == k + 1
        rest = _labels(to_torch(_loader(shuffle=True, seed=4).iter(state=state), prefetch=2))
        assert rest == expected[k + 1 :]


def test_the_wrapped_loader_resumes_from_the_wrappers_state() -> None:
    placed = to_torch(_loader(), prefetch=3)
    it = iter(placed)
    next(it)
    next(it)
    state = placed.state_dict()
    assert state == it.state_dict()
    assert state["batches"] == 2
    fresh = to_torch(_loader(), prefetch=3)
    fresh.load_state_dict(state)
    assert _labels(fresh)[0] == list(range(6, 9))
    assert len(fresh) == 7


def test_after_the_last_batch_the_state_starts_the_next_epoch() -> None:
    placed = to_torch(_loader(), prefetch=2)
    assert len(list(placed)) == 7
    state = placed.state_dict()
    assert state["epoch"] == 1
    assert state["batches"] == 0


class _Failing:
    """Batches 0, 1, 2, then an error: a source whose state is known."""

    def __init__(self) -> None:
        self.position = 0

    def __iter__(self) -> _Failing:
        return self

    def __next__(self) -> np.ndarray:
        if self.position == 3:
            raise KeyError("record 9")
        self.position += 1
        return np.full(2, self.position - 1)

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}


def test_an_error_comes_after_the_batches_held_ahead() -> None:
    it = to_torch(_Failing(), prefetch=5)
    assert [next(it).tolist() for _ in range(3)] == [[0, 0], [1, 1], [2, 2]]
    assert it.state_dict() == {"position": 3}
    with pytest.raises(KeyError, match="record 9"):
        next(it)
    assert it.state_dict() == {"position": 3}


def test_a_loader_error_keeps_the_state_of_the_last_good_batch() -> None:
    def fail_at_7(x: int) -> int:
        if x == 7:
            raise ValueError("bad record")
        return x

    loader = sk.DataLoader(sk.range(0, 12).map(fail_at_7), batch_size=2)
    it = iter(to_torch(loader, prefetch=4))
    assert [next(it).tolist() for _ in range(3)] == [[0, 1], [2, 3], [4, 5]]
    with pytest.raises(ValueError, match="bad record"):
        next(it)
    assert it.state_dict()["batches"] == 3


def test_device_cpu_keeps_the_memory() -> None:
    array = np.arange(6.0)
    (tensor,) = list(to_torch([array], device="cpu"))
    assert tensor.device.type == "cpu"
    assert tensor.data_ptr() == array.ctypes.data
    (same,) = list(to_torch([array], device=torch.device("cpu")))
    assert same.data_ptr() == array.ctypes.data


def test_a_list_of_batches_can_be_read_again() -> None:
    placed = to_torch([np.zeros(1), np.ones(1)])
    assert [b.tolist() for b in placed] == [[0.0], [1.0]]
    assert [b.tolist() for b in placed] == [[0.0], [1.0]]
    with pytest.raises(TypeError, match="no state_dict"):
        placed.state_dict()


def test_bad_arguments() -> None:
    with pytest.raises(sk.ConfigError, match="prefetch"):
        to_torch([], prefetch=-1)
    with pytest.raises(sk.ConfigError, match="device"):
        to_torch([], device="nonsense")
    with pytest.raises(sk.ConfigError, match="device"):
        to_torch([], device=1.5)  # type: ignore[call-overload]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_is_refused_when_built() -> None:
    with pytest.raises(sk.ConfigError, match=r"torch.cuda.is_available\(\) is False"):
        to_torch([], device="cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_pin_memory_without_cuda_warns_once_and_does_not_pin() -> None:
    with pytest.warns(UserWarning, match="no CUDA device is available") as caught:
        placed = to_torch(_loader(), pin_memory=True)
    assert len(caught) == 1
    batches = list(placed)
    assert not any(b["x"].is_pinned() for b in batches)


def test_as_tensors_keeps_structure_and_leaves_other_values() -> None:
    batch = {
        "x": np.zeros((2, 3), np.float16),
        "pair": (np.arange(2), ["a", "b"]),
        "raw": b"bytes",
        "tensor": torch.ones(1),
        "strings": np.array(["a", "b"]),
    }
    out = as_tensors(batch)
    assert out["x"].dtype == torch.float16
    assert isinstance(out["pair"], tuple)
    assert out["pair"][1] == ["a", "b"]
    assert out["raw"] == b"bytes"
    assert out["tensor"] is batch["tensor"]
    assert isinstance(out["strings"], np.ndarray)


def test_a_read_only_array_is_copied_once_without_a_warning(tmp_path: Any) -> None:
    path = tmp_path / "data.npy"
    np.save(path, np.arange(12, dtype=np.int32))
    mapped = np.load(path, mmap_mode="r")
    tensor = as_tensors(mapped[2:6])  # the test settings turn any warning into an error
    assert tensor.tolist() == [2, 3, 4, 5]
    tensor += 1  # writable, and the mapping is left alone
    assert mapped[2] == 2


def test_reversed_and_byte_swapped_arrays_convert() -> None:
    assert as_tensors(np.arange(4)[::-1]).tolist() == [3, 2, 1, 0]
    assert as_tensors(np.arange(3, dtype=">i4")).tolist() == [0, 1, 2]


@dataclasses.dataclass
class _Batch:
    image: Any
    meta: Any
    step: int = 0


def test_namedtuples_and_dataclasses_convert_leaf_by_leaf() -> None:
    Pair = collections.namedtuple("Pair", "left right")
    batch = _Batch(image=np.ones((2, 2), np.uint8), meta=Pair(np.arange(2), "tag"), step=3)
    out = as_tensors(batch)
    assert isinstance(out, _Batch)
    assert out.image.dtype == torch.uint8
    assert isinstance(out.meta, Pair)
    assert out.meta.left.tolist() == [0, 1]
    assert out.meta.right == "tag"
    assert out.step == 3
