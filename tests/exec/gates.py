"""Map functions that hold chosen records back, so batches really finish out of order."""

from __future__ import annotations

import os
import time


def held_back(slow, gate):
    """A map function that holds records in ``slow`` back while the file ``gate`` exists."""

    def fn(x):
        if x in slow:
            deadline = time.monotonic() + 20
            while os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.005)
        return x

    return fn
