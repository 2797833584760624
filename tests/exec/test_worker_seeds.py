"""Each worker gets its own seed: distinct across workers, the same in every run.

A user seeding a per-worker library from ``WorkerInfo.seed`` (``np.random.seed``,
``random.seed``) must get a different stream in every worker (PyTorch's classic
augmentation bug is the opposite), and the same streams again for the same loader
seed. Records' seeded maps do not depend on it.
"""

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_same_batches

pytestmark = pytest.mark.usefixtures("no_leaks")

MODES = ["thread", "process"]


class _Record:
    """worker_init_fn: writes the worker's seed and a first draw to a file per worker."""

    def __init__(self, folder, loader_seed):
        self.folder = folder
        self.loader_seed = loader_seed

    def __call__(self, info):
        assert info.loader_seed == self.loader_seed
        draw = np.random.default_rng(info.seed).integers(1 << 62)
        (self.folder / f"{info.id}-{info.seed}").write_text(f"{info.seed} {draw}")


def _seeds(mode, seed, folder, workers=4):
    """worker id -> (seed, first draw of a generator seeded with it)."""
    folder.mkdir()
    loader = sk.DataLoader(
        sk.range(0, 8),
        batch_size=2,
        seed=seed,
        num_workers=workers,
        worker_mode=mode,
        worker_init_fn=_Record(folder, seed),
    )
    with loader:
        list(loader)
    found = {
        int(p.name.split("-")[0]): tuple(map(int, p.read_text().split())) for p in folder.iterdir()
    }
    assert sorted(found) == list(range(workers))
    return found


@pytest.mark.parametrize("mode", MODES)
def test_every_worker_has_its_own_seed_reproducibly(mode, tmp_path):
    first = _seeds(mode, 7, tmp_path / "a")
    seeds = [s for s, _ in first.values()]
    draws = [d for _, d in first.values()]
    assert len(set(seeds)) == len(seeds)
    assert len(set(draws)) == len(draws)
    assert all(0 <= s < 2**32 for s in seeds)  # np.random.seed takes them
    assert _seeds(mode, 7, tmp_path / "b") == first
    other = _seeds(mode, 8, tmp_path / "c")
    assert not {s for s, _ in other.values()} & set(seeds)


def test_seeded_maps_do_not_depend_on_worker_seeds():
    def aug(x, rng):
        return x * 1000 + rng.integers(1000)

    ds = sk.range(0, 40).map(aug, seeded=True)
    inline = sk.DataLoader(ds, batch_size=4, shuffle=True, seed=3)
    with sk.DataLoader(
        ds, batch_size=4, shuffle=True, seed=3, num_workers=3, worker_mode="thread"
    ) as threaded:
        assert_same_batches(inline, threaded)


def test_workers_started_again_get_new_seeds(tmp_path):
    loader = sk.DataLoader(
        sk.range(0, 16),
        batch_size=2,
        seed=1,
        num_workers=2,
        worker_mode="thread",
        worker_init_fn=_Record(tmp_path, 1),
    )
    with loader:
        held = iter(loader)
        next(held)
        list(loader)  # read while `held` holds the workers: a private executor starts
        held.close()
    seeds = [int(p.name.split("-")[1]) for p in tmp_path.iterdir()]
    assert len(seeds) == 4  # two workers started twice
    assert len(set(seeds)) == 4
