"""Resume after a crash: a training process is killed mid-epoch and resumed from its JSON state.

Run it with ``python examples/resume_after_crash.py``. It

1. computes the batches of two uninterrupted epochs (the reference);
2. starts a training process that loads with two worker processes and, after every
   step, writes a checkpoint: the loader's ``state_dict()`` as JSON, written to a
   temporary file and renamed over the old one, so a crash never leaves half a file;
3. kills that process with SIGKILL in the middle of its second epoch, as an
   out-of-memory killer or a lost machine would (its workers exit on their own when
   their parent dies);
4. builds the loader again in this process, with no workers this time, restores the
   saved state and finishes the run;
5. checks that the steps before the checkpoint plus the resumed ones are exactly the
   reference: no record lost, none repeated, the same shuffled order and the same
   random augmentation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import stoker as sk

EPOCHS = 2
KILL_AT_STEP = 10  # an epoch has 7 steps (500 records, 64 a batch): mid-epoch 2


def augment(record: dict, rng: np.random.Generator) -> dict:
    """A random shift of the features: the draws depend on (seed, epoch, index) only."""
    return {**record, "x": record["x"] + rng.normal(size=record["x"].shape).astype(np.float32)}


def make_loader(num_workers: int) -> sk.DataLoader:
    """The same description in every process: the data, the order, the transforms."""
    features = np.arange(500 * 4, dtype=np.float32).reshape(500, 4)
    ds = sk.from_arrays(x=features, id=np.arange(500)).map(augment, seeded=True)
    return sk.DataLoader(
        ds, batch_size=64, shuffle=True, seed=42, last_batch="drop", num_workers=num_workers
    )


def summary(batch: dict) -> list:
    """What we compare: the records' ids and their augmented features, rounded."""
    return [batch["id"].tolist(), np.round(batch["x"], 4).tolist()]


def save_checkpoint(path: Path, step: int, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"step": step, "loader": state}))
    os.replace(tmp, path)  # atomic: the file holds the old checkpoint or the new one


def train(checkpoint: Path) -> None:
    """The training process: one "step" per batch, a checkpoint after each."""
    step = 0
    with make_loader(num_workers=2) as loader:
        for _ in range(EPOCHS):
            it = iter(loader)
            for _batch in it:
                time.sleep(0.02)  # the training step
                step += 1
                save_checkpoint(checkpoint, step, it.state_dict())
                print(step, flush=True)  # tells the parent how far we got


def main() -> None:
    uninterrupted = make_loader(num_workers=0)
    reference = [summary(b) for _ in range(EPOCHS) for b in uninterrupted]  # each pass: an epoch

    checkpoint = Path(tempfile.mkdtemp()) / "checkpoint.json"
    child = subprocess.Popen(
        [sys.executable, __file__, "train", str(checkpoint)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    for line in child.stdout:  # wait, without polling, until the child reports the step
        if int(line) >= KILL_AT_STEP:
            break
    child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    print(f"training process killed by SIGKILL (exit code {child.returncode})")

    saved = json.loads(checkpoint.read_text())
    done = saved["step"]
    print(
        f"last checkpoint: step {done}, epoch {saved['loader']['epoch']} ({done} of "
        f"{len(reference)} steps done)"
    )

    # A new loader built the same way, with no workers this time, at the saved state.
    loader = make_loader(num_workers=0)
    resumed = [summary(b) for b in loader.iter(state=saved["loader"])]  # rest of the epoch
    for _ in range(saved["loader"]["epoch"] + 1, EPOCHS):  # then the epochs after it
        resumed += [summary(b) for b in loader]

    assert resumed == reference[done:], "the resumed run differs from the uninterrupted one"
    print(f"resumed {len(resumed)} steps: identical to the uninterrupted run")


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"]:
        train(Path(sys.argv[2]))
    else:
        main()
