"""Process workers started after JAX ran a computation (XLA's threads are running).

Each case runs in a fresh interpreter with a time limit, so a deadlock fails the
test instead of hanging the suite. The default start method, forkserver, starts
workers from a clean server process and is safe. "fork" copies the parent with
JAX's threads stopped mid-flight: the workers here never touch JAX, so they work,
and JAX warns at every fork (a worker that did use JAX would hang).
"""

import json
import subprocess
import sys
import textwrap

import pytest

import stoker as sk

SCRIPT = textwrap.dedent(
    """
    import json, sys

    import numpy as np

    import stoker as sk


    def square(x):
        return x * x


    if __name__ == "__main__":
        import jax
        import jax.numpy as jnp

        total = jax.jit(lambda v: (v * 2).sum())(jnp.arange(10.0))
        assert float(total) == 90.0
        loader = sk.DataLoader(
            sk.range(0, 20).map(square), batch_size=4, shuffle=True, seed=3,
            num_workers=2, worker_mode="process", start_method=sys.argv[1], timeout=60,
        )
        with loader:
            it = iter(loader)
            batches = [b.tolist() for b in it]
            mode = it.stats().worker_mode
        # JAX still works in the parent after the workers ran.
        placed = jax.device_put(np.array(batches))
        print(json.dumps({"batches": batches, "sum": int(placed.sum()), "mode": mode}))
    """
)


@pytest.mark.parametrize("start_method", ["forkserver", "fork"])
def test_process_workers_after_a_jax_computation(tmp_path, start_method):
    script = tmp_path / "after_jax.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), start_method],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = [[x * x for x in b] for b in _shuffled_batches()]
    assert result["batches"] == expected
    assert result["sum"] == sum(x * x for x in range(20))
    assert result["mode"] == "process"
    warned = "os.fork() was called" in done.stderr
    assert warned == (start_method == "fork"), done.stderr[-3000:]


def _shuffled_batches():
    return [b.tolist() for b in sk.DataLoader(sk.range(0, 20), batch_size=4, shuffle=True, seed=3)]
