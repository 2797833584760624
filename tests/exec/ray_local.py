"""A local Ray instance for one test module: started by it, shut down after it."""

from __future__ import annotations

import os
from collections.abc import Iterator

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.abspath(os.path.join(HERE, "..", "..", "src"))


def local_ray() -> Iterator[None]:
    """Start ``ray.init(num_cpus=2)``, yield, shut it down.

    The Ray workers inherit this process's environment while Ray starts: PYTHONPATH
    then names ``src`` and this directory, so that they import the functions the test
    modules define, as they would a user's.
    """
    import ray

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([SRC, HERE, saved or ""])
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved
    yield
    ray.shutdown()
