"""The watchdog: a stuck record is reported, once, with what is in flight and where.

With ``timeout=None`` nothing raises; after ``watchdog`` seconds without a batch a
warning on the ``"stoker"`` logger names the batch and sample indices in flight and
shows the stack of the worker reading them, and ``it.stats().watchdog`` holds it.
"""

import logging
import re

import pytest

import stoker as sk
from exec.gates import held_back

pytestmark = pytest.mark.usefixtures("no_leaks")

MODES = [
    pytest.param({"num_workers": 2, "worker_mode": "thread"}, id="thread-workers"),
    pytest.param({"num_workers": 2, "worker_mode": "process"}, id="process-workers"),
    pytest.param({"prefetch": 2}, id="prefetch-thread"),
]


class _OpenGateOnWarning(logging.Handler):
    """Records stoker's warnings and releases the stuck record after the first one."""

    def __init__(self, gate):
        super().__init__(logging.WARNING)
        self.gate = gate
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())
        self.gate.unlink(missing_ok=True)


@pytest.mark.parametrize("kwargs", MODES)
def test_a_stuck_record_is_reported_once_with_its_batch_samples_and_stack(kwargs, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    ds = sk.range(0, 16).map(held_back({9}, str(gate)))  # batch 2 is stuck on record 9
    handler = _OpenGateOnWarning(gate)
    logger = logging.getLogger("stoker")
    logger.addHandler(handler)
    try:
        with sk.DataLoader(ds, batch_size=4, watchdog=0.5, **kwargs) as loader:
            it = iter(loader)
            got = [b.tolist() for b in it]  # no timeout: it waits until the gate opens
            stats = it.stats()
    finally:
        logger.removeHandler(handler)
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
    assert len(handler.messages) == 1, handler.messages  # once
    (message,) = handler.messages
    assert "no batch for" in message
    assert "batch 2" in message
    # The stuck worker's stack: the map function's frame under the map stage.
    # (cloudpickle >= 3.1.3 names a by-value function's file "<dynamic-code>",
    # so the frame is found by its function name, not its file.)
    assert re.search(r"line \d+,? in fn\n", message), message
    assert "map.py" in message
    if kwargs.get("num_workers"):
        assert "samples [8, 9, 10, 11]" in message
    assert stats.watchdog is not None
    assert stats.watchdog in message


def test_the_watchdog_is_quiet_when_batches_come_and_can_be_turned_off(caplog):
    with caplog.at_level(logging.WARNING, logger="stoker"):
        loader = sk.DataLoader(sk.range(0, 8), batch_size=2, watchdog=0.5, num_workers=1)
        with loader:
            it = iter(loader)
            assert len(list(it)) == 4
            assert it.stats().watchdog is None
        off = sk.DataLoader(sk.range(0, 8), batch_size=2, watchdog=None)
        assert len(list(off)) == 4
    assert not caplog.records


@pytest.mark.parametrize("bad", [0, -1, True, "60"])
def test_watchdog_is_checked_when_the_loader_is_built(bad):
    with pytest.raises(sk.ConfigError, match="watchdog"):
        sk.DataLoader(sk.range(0, 4), batch_size=2, watchdog=bad)
