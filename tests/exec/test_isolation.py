"""Workers asked for isolate the trainer (DESIGN.md, guarantee 7).

With ``num_workers > 0`` and the default ``worker_mode="auto"``, user code that is
not marked safe to share the process runs in worker processes from the first batch
on: a native crash in it (a real segfault, ``ctypes.string_at(0)``) is a
``WorkerCrashed`` naming the record (a fresh worker reads the batch again record by
record), and the training process lives; ``restart_workers=True`` with
``on_error="skip"`` leaves the record out and goes on. Each crash runs in a child
interpreter, so that a failure of this guarantee kills the child and not pytest.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stoker as sk

_SCRIPT = """
import ctypes, os, sys
import stoker as sk

BAD = int(sys.argv[1])
CLAIM = sys.argv[2]


def crash(x):
    if x == BAD and not (ONCE and os.path.exists(CLAIM)):
        if ONCE:
            open(CLAIM, "w").close()
        ctypes.string_at(0)  # a native crash: SIGSEGV
    return x


class Records:  # a user's own dataset, unmarked
    def __len__(self):
        return 400

    def __getitem__(self, i):
        return crash(i)


def collate(records):  # a user's own collate_fn, unmarked
    for x in records:
        crash(x)
    return records


PIPELINES = {
    "map": lambda: (sk.range(0, 400).map(crash), {}),
    "filter": lambda: (sk.range(0, 400).filter(lambda x: crash(x) >= 0), {}),
    "getitem": lambda: (Records(), {}),
    "collate": lambda: (sk.range(0, 400), {"collate_fn": collate}),
}

if __name__ == "__main__":
    ONCE = sys.argv[4] == "once"
    dataset, extra = PIPELINES[sys.argv[3]]()
    kw = dict(eval(sys.argv[5]), **extra)
    loader = sk.DataLoader(dataset, batch_size=4, num_workers=2, **kw)
    seen = []
    it = loader.iter()
    try:
        for batch in it:
            seen.extend(int(x) for x in batch)
    except sk.WorkerCrashed as exc:
        print(f"crashed: batch_index={exc.batch_index} sample_index={exc.sample_index} {exc}")
    print(f"alive: {len(seen)} records")
    print(f"skipped: {[i for i, _ in it.stats().skipped]}")
    print(f"restarts: {it.stats().restarts}")
    it.close()
    loader.close()
"""


def _run(tmp_path, bad, pipeline="map", once=False, options="{}"):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    args = [str(bad), str(tmp_path / "claim"), pipeline, "once" if once else "always", options]
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"the training process died ({done.returncode}): {done.stderr}"
    return done.stdout


@pytest.mark.parametrize("bad", [1, 161])  # in the first batch; in batch 40
def test_a_segfault_under_the_defaults_is_a_worker_crash_naming_the_record(tmp_path, bad):
    out = _run(tmp_path, bad)
    batch = bad // 4
    assert f"crashed: batch_index={batch} sample_index={bad} " in out, out
    assert "SIGSEGV" in out
    # A fresh worker read the batch (or, the first batch, built by both workers, the
    # slice) again record by record: it crashed at the same record.
    assert f"while reading sample {bad} of batch {batch} of epoch 0" in out, out
    assert f"alive: {batch * 4} records" in out  # every batch before it arrived


@pytest.mark.parametrize("pipeline", ["filter", "getitem", "collate"])
def test_every_kind_of_unmarked_user_code_is_isolated(tmp_path, pipeline):
    out = _run(tmp_path, 161, pipeline)
    assert "crashed: " in out, out
    assert "SIGSEGV" in out
    assert "161" in out  # the record is among the samples named
    assert "alive: " in out


def test_restart_workers_recovers_from_a_crash_under_the_defaults(tmp_path):
    out = _run(tmp_path, 161, once=True, options="{'restart_workers': True}")
    assert "crashed" not in out, out
    assert "alive: 400 records" in out
    assert "restarts: 1" in out


@pytest.mark.parametrize("pipeline", ["map", "filter", "getitem"])
@pytest.mark.parametrize("bad", [1, 161])
def test_a_record_that_always_crashes_is_skipped_under_on_error_skip(tmp_path, pipeline, bad):
    options = "{'restart_workers': True, 'on_error': 'skip', 'max_errors': 1}"
    out = _run(tmp_path, bad, pipeline, options=options)
    assert "crashed" not in out, out
    assert "alive: 399 records" in out, out  # every record but that one, each once
    assert f"skipped: [{bad}]" in out, out
    assert "restarts: 2" in out, out  # the crash, then the same record read alone


def test_a_record_that_always_crashes_is_named_once_the_restarts_run_out(tmp_path):
    out = _run(tmp_path, 161, options="{'restart_workers': True, 'max_restarts': 2}")
    assert "crashed: batch_index=40 sample_index=161 " in out, out
    assert "max_restarts=2" in out, out
    assert "on_error='skip'" in out, out


def test_a_crash_in_collate_names_the_batch_once_its_records_are_read(tmp_path):
    out = _run(tmp_path, 161, "collate")
    assert "crashed: batch_index=40 sample_index=None " in out, out
    assert "while collating batch 40 of epoch 0 (samples [160, 161, 162, 163])" in out, out


def test_a_crash_a_fresh_worker_does_not_repeat_still_raises_without_restarts(tmp_path):
    out = _run(tmp_path, 161, once=True)
    assert "crashed: batch_index=40 sample_index=None " in out, out
    assert "every record loaded" in out, out
    assert "alive: 160 records" in out, out


def _pid(x):
    return np.array([x, os.getpid()])


def test_unmarked_code_never_runs_in_the_trainer(no_leaks):
    here = os.getpid()
    with sk.DataLoader(sk.range(0, 4000).map(_pid), batch_size=8, num_workers=2) as loader:
        it = iter(loader)
        pids = {int(p) for batch in it for p in batch[:, 1]}
        assert it.stats().worker_mode == "process"
        assert it.stats().isolated
    assert here not in pids


def test_marked_code_may_share_the_trainer_and_gives_the_same_batches(no_leaks):
    kw = {"batch_size": 8, "shuffle": True, "seed": 5}
    plain = sk.range(0, 800).map(lambda x: x * 3)
    marked = sk.range(0, 800).map(sk.shares_process(lambda x: x * 3))
    assert not plain.shares_process
    assert marked.shares_process
    with (
        sk.DataLoader(plain, num_workers=2, **kw) as isolated,
        sk.DataLoader(marked, num_workers=2, **kw) as shared,
        sk.DataLoader(plain, num_workers=0, **kw) as inline,
    ):
        batches = [b.tolist() for b in inline]
        assert [b.tolist() for b in isolated] == batches
        it = iter(shared)
        assert [b.tolist() for b in it] == batches
        assert not it.stats().isolated


def test_the_marks_are_asked_of_the_nodes():
    safe = sk.shares_process(textwrap.dedent)
    assert sk.range(4).shares_process  # stoker's own source
    assert sk.range(4).map(sk.releases_gil(str)).shares_process  # implies it
    assert sk.range(4).map(safe).filter(safe).shuffle(1).shares_process
    assert not sk.range(4).map(safe).filter(bool).shares_process
    assert not sk.concat([sk.range(2), sk.range(2).map(str)]).shares_process
    assert sk.from_iterable(sk.shares_process(lambda: range(3))).shares_process
    assert not sk.from_iterable(lambda: range(3)).map(safe).shares_process
