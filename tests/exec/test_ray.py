"""worker_mode="ray": Ray actors build the batches; order, state and errors stay the parent's.

The module starts one local Ray instance (``ray.init(num_cpus=2)``) that every test
shares; the loaders find it initialised and must leave it running. The tests that
need Ray not to be initialised (the loader starting its own instance) or a cluster of
two nodes run in a fresh interpreter.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from concurrent.futures import Future

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_in_every_mode

ray = pytest.importorskip("ray")

from ray_local import SRC, local_ray  # noqa: E402

from stoker._context import Context  # noqa: E402
from stoker._exec.jobs import Job, WorkerSpec  # noqa: E402
from stoker._exec.ray import RayExecutor  # noqa: E402

pytestmark = pytest.mark.usefixtures("no_thread_leak")


@pytest.fixture(scope="module", autouse=True)
def local_ray_for_module():
    """One local Ray instance for the module (see ``ray_local.py``)."""
    yield from local_ray()


def _record(i, rng):
    return {"x": np.full(3, i, dtype=np.int64), "noise": rng.random(2)}


def _pid(x):
    return np.array([x, os.getpid()])


def _raise_at(bad):
    def fn(x):
        if x == bad:
            raise ValueError(f"bad record {x}")
        return x

    return fn


def _sleep_at(index, seconds):
    def fn(x):
        if x == index:
            time.sleep(seconds)
        return x

    return fn


def _kill_self_once(bad, marker):
    def fn(x):
        if x == bad and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), 9)
        return x

    return fn


def _kill_self_at(bad):
    def fn(x):
        if x == bad:
            os.kill(os.getpid(), 9)
        return x

    return fn


def _ray_loader(ds, **kwargs):
    return sk.DataLoader(ds, num_workers=2, worker_mode="ray", **kwargs)


def _lists(batches):
    return [b.tolist() for b in batches]


# -- same batches, exact resume -----------------------------------------------------


def test_same_batches_as_inline_over_two_epochs_with_seeded_maps():
    ds = sk.range(0, 37).map(_record, seeded=True)
    assert_same_in_every_mode(
        ds, modes=("ray",), epochs=2, batch_size=4, shuffle=True, seed=5, last_batch="rollover"
    )


def test_batches_filled_past_a_filter_and_unbatched_records_match_inline():
    ds = sk.range(0, 60).filter(lambda x: x % 3 != 0)
    assert_same_in_every_mode(ds, modes=("ray",), batch_size=5, shuffle=True)
    assert_same_in_every_mode(sk.range(0, 9), modes=("ray",), batch_size=None)


def test_a_stream_read_in_parts_matches_thread_workers_and_resumes_in_them():
    ds = sk.from_iterable(lambda: iter(range(50)))
    with (
        _ray_loader(ds, batch_size=4) as on_ray,
        sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="thread") as threads,
    ):
        expected = _lists(threads)
        assert _lists(on_ray) == expected
        it = iter(on_ray)
        head = _lists([next(it) for _ in range(5)])
        state = json.loads(json.dumps(it.state_dict()))
        it.close()
        assert head + _lists(threads.iter(state=state)) == expected


def test_a_state_saved_under_ray_resumes_inline_and_the_reverse():
    ds = sk.range(0, 30).map(_record, seeded=True)
    kwargs = {"batch_size": 4, "shuffle": True, "seed": 2}
    inline = sk.DataLoader(ds, **kwargs)
    with _ray_loader(ds, **kwargs) as on_ray:
        assert_resumes_exactly(on_ray, max_stops=3, fresh=inline)
        assert_resumes_exactly(inline, max_stops=3, fresh=on_ray)


def test_unordered_batches_resume_exactly():
    ds = sk.range(0, 40).map(_sleep_at(2, 0.3))
    with _ray_loader(ds, batch_size=2, ordered=False) as on_ray:
        it = iter(on_ray)
        head = [next(it).tolist() for _ in range(4)]
        state = json.loads(json.dumps(it.state_dict()))
        it.close()
        rest = _lists(sk.DataLoader(ds, batch_size=2).iter(state=state))
    assert sorted(x for b in head + rest for x in b) == list(range(40))


def test_batches_are_read_only_views_that_stay_valid_while_held():
    ds = sk.range(0, 64).map(lambda i: np.full(1000, i, dtype=np.float32))
    with _ray_loader(ds, batch_size=8) as on_ray:
        held = list(on_ray)
        list(on_ray)  # a second epoch: nothing is recycled under the first one's batches
    assert all(not b.flags.writeable for b in held)
    for k, batch in enumerate(held):
        assert (batch == np.arange(8 * k, 8 * k + 8, dtype=np.float32)[:, None]).all()
    assert np.array(held[0]).flags.writeable  # a copy is the user's to change


def test_workers_see_their_worker_info_and_run_worker_init_fn():
    def init(info):
        os.environ["STOKER_TEST_INIT"] = f"{info.mode}-{info.id}"

    def tag(x):
        info = sk.get_worker_info()
        return np.array([x, info.id, info.num_workers, os.environ["STOKER_TEST_INIT"] != ""])

    with _ray_loader(sk.range(0, 8).map(tag), batch_size=2, worker_init_fn=init) as on_ray:
        rows = np.concatenate(list(on_ray))
        assert on_ray.iter().stats().worker_mode == "ray"
    assert rows[:, 0].tolist() == list(range(8))
    assert set(rows[:, 1].tolist()) <= {0, 1}
    assert set(rows[:, 2].tolist()) == {2}
    assert rows[:, 3].all()


# -- errors --------------------------------------------------------------------------


def test_an_error_names_its_sample_index_as_in_process_workers_and_the_next_batch_follows():
    ds = sk.range(0, 12).map(_raise_at(5))
    with _ray_loader(ds, batch_size=4) as on_ray:
        it = iter(on_ray)
        assert next(it).tolist() == [0, 1, 2, 3]
        with pytest.raises(ValueError, match="bad record 5") as info:
            next(it)
        assert next(it).tolist() == [8, 9, 10, 11]
    notes = "\n".join(info.value.__notes__)
    assert "sample index 5" in notes
    assert "batch 1" in notes
    assert "Ray worker" in notes
    assert info.value.batch_index == 1


def test_skipped_records_count_against_max_errors_in_order():
    ds = sk.range(0, 12).map(_raise_at(5))
    with _ray_loader(ds, batch_size=4, on_error="skip", max_errors=1) as on_ray:
        it = iter(on_ray)
        assert _lists(it) == [[0, 1, 2, 3], [4, 6, 7, 8], [9, 10, 11]]
        assert [i for i, _ in it.stats().skipped] == [5]
    ds = sk.range(0, 12).map(_raise_at(5)).map(_raise_at(9))
    with (
        _ray_loader(ds, batch_size=4, on_error="skip", max_errors=1) as on_ray,
        pytest.raises(ValueError, match="bad record 9"),
    ):
        list(on_ray)


def test_a_failing_worker_init_fn_reaches_the_caller():
    def init(info):
        raise RuntimeError("no licence on this node")

    with (
        _ray_loader(sk.range(0, 8), batch_size=2, worker_init_fn=init) as on_ray,
        pytest.raises(RuntimeError, match="no licence") as info,
    ):
        list(on_ray)
    assert "starting Ray worker" in "\n".join(info.value.__notes__)


def test_a_pipeline_that_cannot_be_sent_is_named_when_the_workers_start():
    import threading

    class Holder:
        def __init__(self):
            self.lock = threading.Lock()

        def __call__(self, x):
            return x

    with (
        _ray_loader(sk.range(0, 4).map(Holder()), batch_size=2) as on_ray,
        pytest.raises(sk.ConfigError, match=r"Holder\.lock"),
    ):
        list(on_ray)


# -- dead actors ---------------------------------------------------------------------


def _spec(ds, num_workers=1):
    return WorkerSpec(ds, None, 2, "raise", 0, num_workers, None, None)


def _job(seq, indices):
    return Job(seq, "build", ((Context(), np.array(indices)),), f"batch {seq}", None, 2)


def _wait_running(future: Future, seconds=30):
    deadline = time.monotonic() + seconds
    while not future.running() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_killed_actor_fails_the_job_it_held_with_worker_crashed():
    with RayExecutor(_spec(sk.range(0, 10).map(_sleep_at(0, 2.0)))) as ex:
        held = ex.submit(_job(0, [0, 1]))
        _wait_running(held)
        time.sleep(0.3)  # let the actor take the job
        ray.kill(ex.actors[0])
        with pytest.raises(sk.WorkerCrashed, match=r"held batch 0.*restart_workers=True"):
            held.result(timeout=30)
        assert isinstance(ex.broken, sk.WorkerCrashed)
        with pytest.raises(sk.WorkerCrashed):
            ex.submit(_job(1, [2, 3])).result(timeout=30)


def test_a_killed_actor_is_replaced_and_its_job_reissued_under_restarts():
    ds = sk.range(0, 10).map(_sleep_at(0, 2.0))
    with RayExecutor(_spec(ds), restart=True, max_restarts=1) as ex:
        first = ex.actors[0]
        futures = [ex.submit(_job(s, [2 * s, 2 * s + 1])) for s in range(3)]
        _wait_running(futures[0])
        time.sleep(0.3)
        ray.kill(first)
        values = [f.result(timeout=60).value.tolist() for f in futures]
        assert values == [[0, 1], [2, 3], [4, 5]]
        assert ex.actors[0] != first
        assert ex.broken is None


def test_a_worker_that_dies_is_replaced_and_nothing_is_lost_or_repeated(tmp_path):
    ds = sk.range(0, 40).map(_kill_self_once(13, str(tmp_path / "killed")))
    with _ray_loader(ds, batch_size=4, shuffle=True, restart_workers=True) as on_ray:
        got = _lists(on_ray)
    assert (tmp_path / "killed").exists()
    assert got == _lists(sk.DataLoader(ds, batch_size=4, shuffle=True))


def test_a_record_that_always_kills_its_worker_stops_after_max_restarts():
    ds = sk.range(0, 12).map(_kill_self_at(5))
    with (
        _ray_loader(ds, batch_size=4, restart_workers=True, max_restarts=1) as on_ray,
        pytest.raises(sk.WorkerCrashed, match=r"max_restarts=1") as info,
    ):
        list(on_ray)
    assert info.value.batch_index == 1


# -- ownership and resources ----------------------------------------------------------


def test_closing_ends_the_actors_but_leaves_a_cluster_it_did_not_start():
    with _ray_loader(sk.range(0, 8).map(_pid), batch_size=2) as on_ray:
        pids = {int(p) for b in on_ray for p in b[:, 1]}
    assert os.getpid() not in pids
    assert ray.is_initialized()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)


def _alive(pid):
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_ray_options_reach_the_actors():
    # No node of the 2-CPU instance has 3 CPUs: the actors cannot be placed, so no
    # batch comes, and timeout= says so instead of waiting forever.
    ds = sk.range(0, 4)
    with (
        _ray_loader(ds, batch_size=2, ray_options={"num_cpus": 3}, timeout=1) as on_ray,
        pytest.raises(sk.LoaderTimeout),
    ):
        next(iter(on_ray))
    with _ray_loader(ds, batch_size=2, ray_options={"num_cpus": 1}) as on_ray:
        assert _lists(on_ray) == [[0, 1], [2, 3]]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"worker_mode": "ray", "num_workers": 0}, "needs num_workers >= 1"),
        ({"worker_mode": "thread", "num_workers": 2, "ray_options": {}}, "for worker_mode='ray'"),
        ({"worker_mode": "ray", "num_workers": 2, "ray_options": [1]}, "dict of actor options"),
    ],
)
def test_bad_ray_settings_are_refused_when_the_loader_is_built(kwargs, match):
    with pytest.raises(sk.ConfigError, match=match):
        sk.DataLoader(sk.range(0, 4), batch_size=2, **kwargs)


def _run_fresh(code, timeout=240):
    env = {**os.environ, "PYTHONPATH": os.path.abspath(SRC)}
    env.pop("RAY_ADDRESS", None)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_a_loader_starts_a_local_instance_when_none_is_running_and_shuts_down_only_that():
    out = _run_fresh(
        """
        import ray, stoker as sk
        assert not ray.is_initialized()
        loader = sk.DataLoader(sk.range(0, 8), batch_size=2, num_workers=2, worker_mode="ray")
        print([b.tolist() for b in loader])
        print("during", ray.is_initialized())
        loader.close()
        print("after", ray.is_initialized())
        """
    )
    assert "[[0, 1], [2, 3], [4, 5], [6, 7]]" in out
    assert "during True" in out
    assert "after False" in out


def test_two_nodes_actors_placed_by_ray_options_on_the_second_node():
    out = _run_fresh(
        """
        import numpy as np, ray, stoker as sk
        from ray.cluster_utils import Cluster

        def node(x):
            return np.array([x, int(ray.get_runtime_context().get_node_id() == head)])

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1, resources={"preprocess": 2})
        ray.init(address=cluster.address)
        head = ray.get_runtime_context().get_node_id()
        ds = sk.range(0, 12).map(node)
        with sk.DataLoader(
            ds, batch_size=3, shuffle=True, num_workers=2, worker_mode="ray",
            ray_options={"num_cpus": 0, "resources": {"preprocess": 1}},
        ) as loader:
            batches = [b.tolist() for b in loader]
        print("on head", any(row[1] for b in batches for row in b))
        print("rows", sorted(row[0] for b in batches for row in b) == list(range(12)))
        print("still up", ray.is_initialized())
        ray.shutdown()
        cluster.shutdown()
        """
    )
    assert "on head False" in out
    assert "rows True" in out
    assert "still up True" in out
