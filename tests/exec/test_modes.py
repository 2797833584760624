"""Every worker mode yields the same batches and resumes exactly (map-style pipelines).

Guarantees 1-3 of DESIGN.md across ``worker_mode`` and ``num_workers``: bit-identical
batches, exact resume from a state saved under another mode, a batch the caller holds
is never overwritten. Every test ends with the leak check (``no_leaks``).
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter

import numpy as np
import pytest
from gates import held_back

import stoker as sk
from stoker.testing import assert_batches_equal, assert_resumes_exactly, run_epochs

pytestmark = pytest.mark.usefixtures("no_leaks")

MODES = {
    "inline": ("inline", 0),
    "thread-1": ("thread", 1),
    "thread-2": ("thread", 2),
    "thread-3": ("thread", 3),
    "process-1": ("process", 1),
    "process-2": ("process", 2),
    "process-3": ("process", 3),
    "process-4": ("process", 4),
}
WORKER_MODES = [m for m in MODES if m not in ("inline", "process-4")]


def _fail_at(bad):
    def fn(x):
        if x in bad:
            raise ValueError(f"bad record {x}")
        return x

    return fn


def pipeline(kind):
    """A dataset and the loader arguments that exercise ``kind``."""
    if kind == "range":
        return sk.range(0, 37), {"batch_size": 5, "shuffle": True, "seed": 3}
    if kind == "dicts":
        records = [{"x": np.full(3, i, np.float32), "y": i, "name": f"r{i}"} for i in range(29)]
        return sk.from_sequence(records), {"batch_size": 4, "shuffle": True}
    if kind == "arrays":
        rng = np.random.default_rng(0)
        image = rng.integers(0, 255, size=(40, 4, 4), dtype=np.uint8)
        ds = sk.from_arrays(image=image, label=np.arange(40, dtype=np.int16))
        return ds, {"batch_size": 6, "shuffle": True, "last_batch": "drop"}
    if kind == "seeded":

        def draw(x, rng):
            return {"x": x, "noise": rng.normal(size=3), "draw": rng.integers(1 << 30)}

        ds = sk.range(0, 33).map(draw, seeded=True)
        return ds, {"batch_size": 4, "shuffle": True, "seed": 11}
    if kind == "filter":
        ds = sk.range(0, 50).filter(lambda x: x % 3 != 1).map(lambda x: x * 10)
        return ds, {"batch_size": 4, "shuffle": True}
    if kind == "keep":
        return sk.range(0, 23).map(lambda x: -x), {"batch_size": 5, "last_batch": "keep"}
    if kind == "rollover":
        return sk.range(0, 23), {"batch_size": 5, "shuffle": True, "last_batch": "rollover"}
    if kind == "batch_sampler":
        sampler = sk.BatchSampler(sk.RandomSampler(30, seed=1), 4)
        return sk.range(0, 30).map(lambda x: x * x), {"batch_sampler": sampler}
    if kind == "skip":
        ds = sk.range(0, 31).map(_fail_at({3, 17, 18}))
        return ds, {"batch_size": 4, "shuffle": True, "on_error": "skip", "max_errors": 5}
    raise AssertionError(kind)


KINDS = [
    "range",
    "dicts",
    "arrays",
    "seeded",
    "filter",
    "keep",
    "rollover",
    "batch_sampler",
    "skip",
]


def make_loader(kind, mode, **extra):
    ds, kwargs = pipeline(kind)
    worker_mode, num_workers = MODES[mode]
    return sk.DataLoader(ds, worker_mode=worker_mode, num_workers=num_workers, **kwargs, **extra)


def leaves(batch, path=""):
    """(path, leaf) pairs of a batch, in order."""
    if isinstance(batch, dict):
        for key, value in batch.items():
            yield from leaves(value, f"{path}[{key!r}]")
    elif isinstance(batch, list | tuple):
        for i, value in enumerate(batch):
            yield from leaves(value, f"{path}[{i}]")
    else:
        yield path, batch


def assert_identical(expected, got):
    """Same batches, same structure, dtypes and shapes, and the same bits."""
    assert len(got) == len(expected), f"{len(got)} batches, expected {len(expected)}"
    for k, (a, b) in enumerate(zip(expected, got, strict=True)):
        assert_batches_equal(a, b, f"batch {k}")
        for (where, x), (_, y) in zip(leaves(a), leaves(b), strict=True):
            if isinstance(x, np.ndarray):
                assert x.tobytes() == y.tobytes(), f"batch {k}{where}: the bits differ"


def key(batch):
    """A hashable, exact description of a batch (for comparing multisets)."""
    return tuple(
        (where, x.dtype.str, x.shape, x.tobytes()) if isinstance(x, np.ndarray) else (where, x)
        for where, x in leaves(batch)
    )


def reference(kind, epochs=2):
    return run_epochs(make_loader(kind, "inline"), epochs)


# -- guarantee 1: the same batches in every mode ---------------------------------------------------


@pytest.mark.parametrize("mode", WORKER_MODES)
@pytest.mark.parametrize("kind", KINDS)
def test_every_mode_yields_the_same_batches(kind, mode):
    with make_loader(kind, mode) as loader:
        got = run_epochs(loader, 2)
    assert_identical(reference(kind), got)


@pytest.mark.parametrize("prefetch", [1, 5])
def test_prefetch_does_not_change_process_batches(prefetch):
    with make_loader("seeded", "process-2", prefetch=prefetch) as loader:
        got = run_epochs(loader, 2)
    assert_identical(reference("seeded"), got)


def test_stats_name_the_mode_used():
    for mode, (worker_mode, num_workers) in MODES.items():
        with make_loader("range", mode) as loader:
            it = iter(loader)
            next(it)
            stats = it.stats()
            it.close()
        assert stats.worker_mode == worker_mode, mode
        assert stats.num_workers == num_workers, mode


# -- guarantee 2: exact resume, across modes -------------------------------------------------------

RESUME_PAIRS = [
    ("process-4", "thread-2"),
    ("thread-3", "process-1"),
    ("process-2", "inline"),
    ("inline", "process-3"),
]


@pytest.mark.parametrize(("saved", "resumed"), RESUME_PAIRS)
@pytest.mark.parametrize("kind", KINDS)
def test_state_resumes_exactly_in_another_mode(kind, saved, resumed):
    with make_loader(kind, saved) as a, make_loader(kind, resumed) as b:
        assert_resumes_exactly(a, epochs=2, fresh=b, max_stops=5)


def test_state_saved_with_4_processes_resumes_with_2_threads():
    expected = reference("seeded", epochs=1)
    with make_loader("seeded", "process-4") as loader:
        it = iter(loader)
        head = [next(it) for _ in range(3)]
        saved = json.dumps(it.state_dict())
        it.close()
    assert_identical(expected[:3], head)
    with make_loader("seeded", "thread-2") as loader:
        it = loader.iter(state=json.loads(saved))
        rest = list(it)
        assert it.stats().worker_mode == "thread"
        assert_identical(expected[3:], rest)


# -- ordered=False ---------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["thread-2", "process-3"])
@pytest.mark.parametrize("kind", KINDS)
def test_unordered_yields_the_same_multiset(kind, mode):
    with make_loader(kind, mode, ordered=False) as loader:
        got = run_epochs(loader, 2)
    assert Counter(map(key, got)) == Counter(map(key, reference(kind)))


@pytest.mark.parametrize("resume_in", ["inline", "thread-2", "process-2", "process-3"])
@pytest.mark.parametrize("mode", ["thread-3", "process-3"])
def test_unordered_state_with_batches_ahead_resumes_exactly(mode, resume_in, tmp_path):
    gate = tmp_path / "gate"
    ds = sk.range(0, 40).map(held_back({1}, str(gate)))  # batch 0 waits for the gate
    expected = [b.tolist() for b in sk.DataLoader(ds, batch_size=4)]
    gate.touch()
    with make_unordered(ds, mode) as loader:
        it = iter(loader)
        head = [next(it).tolist() for _ in range(3)]  # batch 0 is still held back
        state = json.loads(json.dumps(it.state_dict()))
        it.close()
        gate.unlink()
    assert expected[0] not in head
    assert state["batches"] == 0
    assert state["ahead"] == sorted(expected.index(b) for b in head)
    with make_unordered(ds, resume_in) as loader:
        rest = [b.tolist() for b in loader.iter(state=state)]
    assert sorted(head + rest) == sorted(expected)
    assert len(head) + len(rest) == len(expected)


def make_unordered(ds, mode):
    worker_mode, num_workers = MODES[mode]
    return sk.DataLoader(
        ds, batch_size=4, num_workers=num_workers, worker_mode=worker_mode, ordered=False
    )


def test_unordered_resume_of_a_resumed_state_stays_exact(tmp_path):
    gate = tmp_path / "gate"
    ds = sk.range(0, 48).map(held_back({1, 21}, str(gate)))  # batches 0 and 5 wait
    expected = [b.tolist() for b in sk.DataLoader(ds, batch_size=4)]
    gate.touch()
    seen = []
    with make_unordered(ds, "process-3") as first, make_unordered(ds, "thread-3") as second:
        it = iter(first)
        seen += [next(it).tolist() for _ in range(3)]
        state = json.loads(json.dumps(it.state_dict()))
        it.close()
        it = second.iter(state=state)
        seen += [next(it).tolist() for _ in range(2)]
        state = json.loads(json.dumps(it.state_dict()))
        it.close()
        gate.unlink()
    assert expected[0] not in seen
    assert expected[5] not in seen
    assert state["batches"] == 0
    assert state["ahead"] == sorted(expected.index(b) for b in seen)
    with make_unordered(ds, "inline") as last:
        seen += [b.tolist() for b in last.iter(state=state)]
    assert sorted(seen) == sorted(expected)
    assert len(seen) == len(expected)


# -- several loaders, torch ------------------------------------------------------------------------


def test_two_process_loaders_iterated_together():
    first = sk.range(0, 30).map(lambda x: x * 2)
    second = sk.from_arrays(x=np.arange(96, dtype=np.float32).reshape(32, 3), y=np.arange(32) % 4)
    refs = (
        run_epochs(sk.DataLoader(first, batch_size=4, shuffle=True), 2),
        run_epochs(sk.DataLoader(second, batch_size=4, shuffle=True, seed=5), 2),
    )
    a = sk.DataLoader(first, batch_size=4, shuffle=True, num_workers=2, worker_mode="process")
    b = sk.DataLoader(
        second, batch_size=4, shuffle=True, seed=5, num_workers=2, worker_mode="process"
    )
    with a, b:
        got = ([], [])
        for _ in range(2):
            for x, y in zip(a, b, strict=True):  # 8 batches each
                got[0].append(x.copy())
                got[1].append({k: v.copy() for k, v in y.items()})
    assert_identical(refs[0], got[0])
    assert_identical(refs[1], got[1])


_TORCH_SCRIPT = """
import torch

torch.set_num_threads(2)
torch.ones(100, 100) @ torch.ones(100, 100)  # torch's intra-op threads are running now

import stoker as sk


def main():
    ds = sk.range(0, 64).map(lambda x: (torch.ones(16, 16) @ torch.ones(16, 16)).numpy()[0, :2] * x)
    loader = sk.DataLoader(
        ds, batch_size=8, num_workers=2, worker_mode="process", start_method="forkserver",
        timeout=60,
    )
    with loader:
        total = sum(float(b.sum()) for b in loader)
    print(int(total))


if __name__ == "__main__":
    main()
"""


def test_process_workers_start_after_torch_started_its_threads(tmp_path):
    pytest.importorskip("torch")
    script = tmp_path / "after_torch.py"
    script.write_text(textwrap.dedent(_TORCH_SCRIPT))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) == 16 * 2 * sum(range(64))


# -- guarantee 3: zero-copy batches that are never overwritten -------------------------------------


def _segment_ranges():
    """(start, end) of every stoker batch segment mapped in this process."""
    ranges = []
    with open("/proc/self/maps") as f:
        for line in f:
            if "/memfd:stoker-batch" in line:
                start, end = line.split()[0].split("-")
                ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _in_shared_memory(array):
    address = array.__array_interface__["data"][0]
    return any(start <= address < end for start, end in _segment_ranges())


WARM_UP = 4
"""Batches whose jobs may be sent before the first batch told the slot size (2 workers).

They travel by copy; every later batch is built in a shared-memory slot."""


def _arrays(rows=200):
    return sk.from_arrays(
        x=np.arange(rows * 8, dtype=np.float64).reshape(rows, 8), y=np.arange(rows, dtype=np.int32)
    )


def test_process_batches_are_views_of_shared_memory():
    with sk.DataLoader(_arrays(), batch_size=5, num_workers=2, worker_mode="process") as loader:
        it = iter(loader)
        for _ in range(WARM_UP):  # sent before the slot size was known: copied
            next(it)
        batch = next(it)
        for array in batch.values():
            assert not array.flags.owndata
            base = array
            while isinstance(base, np.ndarray):
                base = base.base
            assert base is not None, "the batch owns its memory"
            assert _in_shared_memory(array), "the batch is not in a shared-memory slot"
        np.testing.assert_array_equal(batch["y"], np.arange(5 * WARM_UP, 5 * WARM_UP + 5))
        del batch, array, base
        it.close()


@pytest.mark.parametrize("mode", ["inline", "thread-2", "process-2"])
def test_held_batches_are_never_overwritten(mode):
    worker_mode, num_workers = MODES[mode]
    expected = run_epochs(sk.DataLoader(_arrays(), batch_size=5), 1)
    with sk.DataLoader(
        _arrays(), batch_size=5, num_workers=num_workers, worker_mode=worker_mode, prefetch=2
    ) as loader:
        it = iter(loader)
        held = [next(it) for _ in range(20)]  # no copies: the loader's own memory
        later = [b["y"].copy() for b in it]
    assert len(held) + len(later) == len(expected) == 40
    assert_identical(expected[:20], held)
    for got, want in zip(later, expected[20:], strict=True):
        np.testing.assert_array_equal(got, want["y"])


def test_process_slots_are_recycled_when_batches_are_dropped():
    with sk.DataLoader(_arrays(), batch_size=5, num_workers=2, worker_mode="process") as loader:
        addresses = []
        for k, batch in enumerate(loader):
            x = batch["x"]
            if k >= WARM_UP:
                assert _in_shared_memory(x), f"batch {k} was copied, not recycled"
            np.testing.assert_array_equal(x[:, 0], np.arange(5 * k, 5 * k + 5) * 8.0)
            addresses.append(x.__array_interface__["data"][0])
        del batch, x
    assert len(addresses) == 40
    assert len(set(addresses)) <= 12, "a slot per batch: dropped batches are not recycled"


# -- workers: info, init, auto mode, closures ------------------------------------------------------


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_worker_init_fn_and_get_worker_info(mode):
    main_pid = os.getpid()
    made = []

    def init_arg(loader):
        made.append(loader)
        return {"from": os.getpid()}

    started = {}

    def init(info):
        started[info.id] = info

    def fn(x):
        info = sk.get_worker_info()
        return {
            "x": x,
            "id": info.id,
            "num_workers": info.num_workers,
            "seed": info.seed,
            "dataset_len": len(info.dataset),
            "init_from": info.init_arg["from"],
            "same_info": started.get(info.id) is info,
            "pid": os.getpid(),
            "mode": info.mode,
        }

    loader = sk.DataLoader(
        sk.range(0, 24).map(fn),
        batch_size=3,
        seed=9,
        num_workers=2,
        worker_mode=mode,
        worker_init_fn=init,
        worker_init_arg=init_arg,
    )
    with loader:
        batches = run_epochs(loader, 2)
    assert made == [loader]  # once, in this process, for both epochs
    x = np.concatenate([b["x"] for b in batches])
    np.testing.assert_array_equal(x, np.tile(np.arange(24), 2))
    for field, want in [("num_workers", 2), ("dataset_len", 24)]:
        assert {int(v) for b in batches for v in b[field]} == {want}, field
    seeds = {int(i): int(s) for b in batches for i, s in zip(b["id"], b["seed"], strict=True)}
    assert len(set(seeds.values())) == len(seeds)  # each worker its own seed
    assert {int(v) for b in batches for v in b["init_from"]} == {main_pid}
    assert {int(v) for b in batches for v in b["id"]} <= {0, 1}
    assert all(bool(v) for b in batches for v in b["same_info"])
    assert {m for b in batches for m in b["mode"]} == {mode}
    pids = {int(v) for b in batches for v in b["pid"]}
    if mode == "thread":
        assert pids == {main_pid}
    else:
        assert main_pid not in pids
        assert 1 <= len(pids) <= 2
    assert sk.get_worker_info() is None


def test_get_worker_info_is_none_outside_workers():
    ds = sk.range(0, 6).map(lambda x: sk.get_worker_info() is None)
    assert all(bool(v) for b in sk.DataLoader(ds, batch_size=3, prefetch=0) for v in b)
    assert all(bool(v) for b in sk.DataLoader(ds, batch_size=3, prefetch=2) for v in b)
    assert sk.get_worker_info() is None


def test_auto_mode_picks_threads_for_marked_functions_and_processes_otherwise():
    marked = sk.range(0, 12).map(sk.releases_gil(lambda x: os.getpid()))
    plain = sk.range(0, 12).map(lambda x: os.getpid())
    for ds, expected in [(marked, "thread"), (plain, "process")]:
        with sk.DataLoader(ds, batch_size=4, num_workers=2) as loader:
            it = iter(loader)
            pids = {int(p) for b in it for p in b}
            assert it.stats().worker_mode == expected
            # The first batches are built on threads while the processes start
            # (docs/tuning.md); later epochs run on the processes.
            deadline = time.monotonic() + 60
            while expected == "process" and pids == {os.getpid()}:
                assert time.monotonic() < deadline, "the process workers never took over"
                time.sleep(0.05)
                pids = {int(p) for b in loader for p in b}
        assert (pids == {os.getpid()}) == (expected == "thread")


def test_lambdas_closures_and_local_classes_run_in_process_workers():
    offset = 1000

    class Point:
        def __init__(self, v):
            self.v = v

    def scale(factor):
        return lambda p: p.v * factor

    double = scale(2)
    ds = sk.range(0, 20).map(lambda x: Point(x + offset)).map(double)
    with sk.DataLoader(ds, batch_size=5, num_workers=2, worker_mode="process") as loader:
        it = iter(loader)
        got = [x for b in it for x in b.tolist()]
        assert it.stats().worker_mode == "process"
    assert got == [2 * (x + offset) for x in range(20)]
