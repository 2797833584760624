import os
import pickle

import numpy as np
import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches, run_epochs


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    (root / "a" / "deep").mkdir(parents=True)
    (root / "b").mkdir()
    files = {
        "a/1.txt": b"one",
        "a/deep/2.txt": b"two",
        "b/3.txt": b"three",
        "b/4.bin": b"\x00\x01",
        "top.txt": b"top",
        ".hidden.txt": b"hidden",
    }
    for rel, data in files.items():
        (root / rel).write_bytes(data)
    (tmp_path / "outside.txt").write_bytes(b"secret")
    return root


def _names(ds, root):
    return [os.path.relpath(p, root) for p in ds.paths]


def test_glob_lists_sorted_and_reads_bytes_lazily(tree):
    ds = sk.from_files(str(tree / "**" / "*.txt"))
    assert _names(ds, tree) == ["a/1.txt", "a/deep/2.txt", "b/3.txt", "top.txt"]
    assert ds.root == str(tree)
    assert ds[2] == {"path": str(tree / "b" / "3.txt"), "bytes": b"three"}


def test_single_star_stays_in_one_folder(tree):
    assert _names(sk.from_files(str(tree / "*.txt")), tree) == ["top.txt"]
    assert _names(sk.from_files(str(tree / "*" / "*.txt")), tree) == ["a/1.txt", "b/3.txt"]


def test_folder_file_and_list(tree):
    assert len(sk.from_files(tree)) == 5  # hidden files are left out
    one = sk.from_files(tree / "b" / "4.bin")
    assert one[0]["bytes"] == b"\x00\x01"
    both = sk.from_files([tree / "top.txt", tree / "a" / "1.txt"])
    assert [r["bytes"] for r in both] == [b"top", b"one"]  # a list keeps its order


def test_pattern_matching_nothing_and_missing_paths_name_the_path(tree):
    with pytest.raises(sk.ConfigError, match=r"\*\.png.*matches no file"):
        sk.from_files(str(tree / "*.png"))
    with pytest.raises(sk.ConfigError, match=r"no such directory.*nowhere"):
        sk.from_files(str(tree / "nowhere" / "*.txt"))
    with pytest.raises(sk.ConfigError, match=r"no such file.*missing\.txt"):
        sk.from_files([tree / "top.txt", tree / "missing.txt"])
    with pytest.raises(sk.ConfigError, match="on_unsafe"):
        sk.from_files(tree, on_unsafe="follow")


def test_file_deleted_after_listing_names_it(tree):
    ds = sk.from_files(tree)
    os.remove(tree / "b" / "3.txt")
    with pytest.raises(FileNotFoundError, match=r"3\.txt.*removed after"):
        ds[2]
    loader = sk.DataLoader(ds, batch_size=2)
    with pytest.raises(FileNotFoundError, match=r"3\.txt"):
        list(loader)
    kept = list(sk.DataLoader(ds, batch_size=2, on_error="skip", max_errors=1))
    assert sum(len(b["path"]) for b in kept) == 4


def test_link_inside_root_is_followed(tree):
    os.symlink(tree / "a", tree / "b" / "link_to_a")
    os.symlink("../top.txt", tree / "b" / "top_link.txt")
    ds = sk.from_files(str(tree / "b" / "**" / "*.txt"), root=tree)
    assert _names(ds, tree) == [
        "b/3.txt",
        "b/link_to_a/1.txt",
        "b/link_to_a/deep/2.txt",
        "b/top_link.txt",
    ]
    assert ds[3]["bytes"] == b"top"


def test_link_out_of_root_is_refused_or_skipped(tree):
    os.symlink(tree.parent / "outside.txt", tree / "a" / "escape.txt")
    with pytest.raises(sk.ConfigError, match=r"escape\.txt.*outside\.txt.*outside the root"):
        sk.from_files(tree)
    ds = sk.from_files(tree, on_unsafe="skip")
    assert b"secret" not in [r["bytes"] for r in ds]
    assert len(ds.skipped) == 1
    assert "escape.txt" in ds.skipped[0]
    # A wider root makes the same link safe.
    wide = sk.from_files(str(tree / "**" / "*.txt"), root=tree.parent)
    assert b"secret" in [r["bytes"] for r in wide]


def test_link_loops_are_refused_or_skipped(tree):
    os.symlink("loop_b", tree / "loop_a")
    os.symlink("loop_a", tree / "loop_b")
    os.symlink("..", tree / "a" / "up")  # a folder link back to an ancestor
    with pytest.raises(sk.ConfigError, match="loop"):
        sk.from_files(tree)
    ds = sk.from_files(tree, on_unsafe="skip")
    assert len(ds) == 5
    assert sorted(s.split(":")[0].rsplit("/", 1)[-1] for s in ds.skipped) == [
        "loop_a",
        "loop_b",
        "up",
    ]


def test_broken_link_is_named(tree):
    os.symlink("nothing-here", tree / "broken.txt")
    with pytest.raises(sk.ConfigError, match=r"broken\.txt.*does not exist"):
        sk.from_files(tree)
    with pytest.raises(sk.ConfigError, match=r"broken\.txt"):
        sk.from_files([tree / "broken.txt"])


def test_link_swapped_after_listing_is_not_followed(tree):
    os.symlink("top.txt", tree / "z_link.txt")
    ds = sk.from_files(str(tree / "*.txt"))
    os.remove(tree / "z_link.txt")
    os.symlink(tree.parent / "outside.txt", tree / "z_link.txt")
    assert ds[1]["bytes"] == b"top"  # read from the target resolved when listed


def test_pickles_small_and_auto_picks_threads(tree):
    ds = sk.from_files(tree)
    assert len(pickle.dumps(ds)) < 2000
    it = iter(sk.DataLoader(ds, batch_size=2, num_workers=2))
    next(it)
    assert it.stats().worker_mode == "thread"
    it.close()


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_same_batches_in_every_worker_mode(tree, mode):
    ds = sk.from_files(tree)
    base = sk.DataLoader(ds, batch_size=2, shuffle=True, seed=3)
    other = sk.DataLoader(ds, batch_size=2, shuffle=True, seed=3, num_workers=2, worker_mode=mode)
    assert_same_batches(base, other, epochs=2)


def test_resumes_exactly_and_reads_every_file_once(tree):
    ds = sk.from_files(tree)
    loader = sk.DataLoader(ds, batch_size=2, shuffle=True, seed=1)
    assert_resumes_exactly(loader, epochs=2)
    (epoch,) = [run_epochs(loader, 1)]
    seen = sorted(p for batch in epoch for p in batch["path"])
    assert seen == sorted(ds.paths)
    assert isinstance(epoch[0]["bytes"], list)
    assert isinstance(epoch[0]["bytes"][0], bytes)


def test_records_are_numpy_free(tree):
    record = sk.from_files(tree)[0]
    assert set(record) == {"path", "bytes"}
    assert not isinstance(record["bytes"], np.ndarray)
