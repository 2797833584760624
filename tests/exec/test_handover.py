"""The first batch split across thread workers is exactly the batch one build gives."""

import pytest

import stoker as sk
from stoker._stats import available_cores
from stoker.testing import assert_same_batches


def _int_then_float(x):
    return x if x % 16 < 8 else float(x)  # halves of a batch alone collate to other dtypes


def _text(x):
    return {"id": x, "name": "x" * (x % 5)}


@pytest.mark.parametrize("fn", [_int_then_float, _text])
def test_a_split_first_batch_is_collated_as_one_build(fn, no_leaks):
    kw = {"batch_size": 16, "shuffle": False, "collate_fn": None}
    ds = sk.range(0, 64).map(sk.releases_gil(fn))
    with (
        sk.DataLoader(ds, num_workers=2, **kw) as auto,
        sk.DataLoader(ds, num_workers=0, **kw) as fixed,
    ):
        assert_same_batches(auto, fixed, epochs=2)


class _Events:
    """Records when each record starts and ends; record 0 is slow."""

    def __init__(self):
        import threading

        self.lock = threading.Lock()
        self.log = []

    def __call__(self, x):
        import time

        with self.lock:
            self.log.append(("start", int(x)))
        if x == 0:
            time.sleep(0.2)  # one half of the first batch is slow
        with self.lock:
            self.log.append(("end", int(x)))
        return x


@pytest.mark.skipif(available_cores() < 2, reason="held only while threads <= cores")
def test_no_thread_leaves_a_split_first_batch_for_the_next_one(no_leaks):
    events = _Events()
    ds = sk.range(0, 64).map(sk.releases_gil(events))
    with sk.DataLoader(ds, batch_size=8, num_workers=2, worker_mode="auto") as loader:
        it = iter(loader)
        assert next(it).tolist() == list(range(8))
        rest = [b.tolist() for b in it]
    assert rest == [list(range(s, s + 8)) for s in range(8, 64, 8)]
    first_done = max(i for i, e in enumerate(events.log) if e[0] == "end" and e[1] < 8)
    later = [i for i, e in enumerate(events.log) if e[0] == "start" and e[1] >= 8]
    assert min(later) > first_done, events.log[: first_done + 2]
