"""from_tar_shards: the WebDataset layout read from real tar files, split by shard."""

import json
import os
import tarfile

import pytest

import stoker as sk
from stoker.testing import assert_resumes_exactly
from tar_helpers import add_member, all_keys, keys_of, write_shards

MODES = [(0, "inline"), (2, "thread"), (2, "process")]


@pytest.fixture
def shards(tmp_path):
    return write_shards(tmp_path / "shards")


def test_members_are_grouped_into_samples_by_key(tmp_path):
    path = tmp_path / "one.tar"
    with tarfile.open(path, "w") as tar:
        add_member(tar, "train/a.b.jpg", b"J1")  # the key ends at the first dot
        add_member(tar, "train/a.b.cls", b"1")
        add_member(tar, "train/", type=tarfile.DIRTYPE)  # folders are not samples
        add_member(tar, "README", b"no field: skipped")
        add_member(tar, "val/a.jpg", b"J2")  # same name in another folder: another key
        add_member(tar, "train/a.jpg", b"J3")  # not consecutive: a new sample
    records = list(sk.from_tar_shards(str(path)))
    assert records == [
        {"__key__": "train/a", "__url__": str(path), "b.jpg": b"J1", "b.cls": b"1"},
        {"__key__": "val/a", "__url__": str(path), "jpg": b"J2"},
        {"__key__": "train/a", "__url__": str(path), "jpg": b"J3"},
    ]


def test_a_glob_a_brace_range_and_a_list_name_the_same_shards(shards, tmp_path):
    root = tmp_path / "shards"
    by_glob = sk.from_tar_shards(str(root / "*.tar"))
    by_range = sk.from_tar_shards(str(root / "shard-{00..03}.tar"))
    by_list = sk.from_tar_shards([root / "shard-00.tar", *shards[1:]])
    assert by_glob.urls == by_range.urls == shards
    assert by_list.urls == shards
    assert keys_of(by_glob) == all_keys()


def test_a_field_twice_in_a_sample_is_an_error(tmp_path):
    path = tmp_path / "dup.tar"
    with tarfile.open(path, "w") as tar:
        add_member(tar, "k.txt", b"a")
        add_member(tar, "k.txt", b"b")
    with pytest.raises(sk.StokerError, match=r"dup\.tar.*'txt' twice.*'k'"):
        list(sk.from_tar_shards(str(path)))


@pytest.mark.parametrize(
    ("name", "fields", "why"),
    [
        ("../escape.txt", {}, "outside"),
        ("/etc/abs.txt", {}, "absolute"),
        ("a.lnk", {"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, "absolute"),
        ("b.lnk", {"type": tarfile.SYMTYPE, "linkname": "../../x"}, "outside"),
        ("c.lnk", {"type": tarfile.LNKTYPE, "linkname": "0.txt"}, "link"),
        ("d.dev", {"type": tarfile.CHRTYPE}, "special"),
    ],
)
def test_a_member_that_escapes_the_archive_is_refused_by_name(tmp_path, name, fields, why):
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as tar:
        add_member(tar, "0.txt", b"fine")
        add_member(tar, name, b"", **fields)
    with pytest.raises(sk.StokerError, match=why) as info:
        list(sk.from_tar_shards(str(path)))
    assert isinstance(info.value, ValueError)
    assert "evil.tar" in str(info.value)
    assert name in str(info.value)


def _cut(src, dst, size):
    with open(src, "rb") as f:
        data = f.read()
    with open(dst, "wb") as f:
        f.write(data[:size])


@pytest.mark.parametrize(
    "size",
    [
        700,  # inside the data of the first member
        1024,  # right after the first member: no end-of-archive marker
        4 * 1024,  # after four members
        100,  # inside the first header
    ],
)
def test_a_truncated_shard_is_a_named_error(shards, tmp_path, size):
    bad = tmp_path / "cut.tar"
    _cut(shards[0], bad, size)
    with pytest.raises(sk.StokerError, match=r"cut\.tar.*(truncated|readable)"):
        list(sk.from_tar_shards(str(bad)))


def test_an_empty_pattern_and_a_missing_file_fail_when_built(tmp_path):
    with pytest.raises(sk.ConfigError, match="no shards match"):
        sk.from_tar_shards(str(tmp_path / "*.tar"))
    with pytest.raises(sk.ConfigError, match="does not exist"):
        sk.from_tar_shards([str(tmp_path / "gone.tar")])
    with pytest.raises(sk.ConfigError, match="seed"):
        sk.from_tar_shards(str(tmp_path / "*.tar"), seed=-1)


def test_a_link_out_of_the_folder_is_refused(shards, tmp_path):
    inside = tmp_path / "inside"
    inside.mkdir()
    os.symlink(shards[0], inside / "out.tar")
    with pytest.raises(sk.ConfigError, match="outside"):
        sk.from_tar_shards(str(inside / "*.tar"))


def test_a_shard_deleted_after_listing_names_the_file(shards):
    ds = sk.from_tar_shards(shards)
    os.remove(shards[1])
    with pytest.raises(FileNotFoundError, match="shard-01"):
        list(ds)


@pytest.mark.parametrize(("workers", "mode"), MODES)
def test_every_record_once_per_epoch_across_workers(shards, workers, mode):
    ds = sk.from_tar_shards(shards, shuffle_shards=True)
    with sk.DataLoader(ds, batch_size=3, num_workers=workers, worker_mode=mode) as loader:
        for _ in range(2):
            keys = keys_of(loader)
            assert sorted(keys) == all_keys()


@pytest.mark.parametrize("hosts", [2, 3, 5])
@pytest.mark.parametrize("workers", [0, 2])
def test_every_record_once_across_hosts(shards, hosts, workers):
    ds = sk.from_tar_shards(shards)
    mode = "thread" if workers else "inline"
    per_host = []
    for i in range(hosts):
        loader = sk.DataLoader(
            ds, batch_size=2, num_workers=workers, worker_mode=mode, shard=sk.Shard(i, hosts)
        )
        with loader:
            per_host.append(keys_of(loader))
    seen = [k for keys in per_host for k in keys]
    assert sorted(seen) == all_keys()


@pytest.mark.parametrize(("workers", "mode"), MODES)
def test_resumes_exactly(shards, workers, mode):
    ds = sk.from_tar_shards(shards, shuffle_shards=True).map(lambda r: r["txt"])
    with sk.DataLoader(
        ds, batch_size=3, num_workers=workers, worker_mode=mode, collate_fn=list
    ) as loader:
        stops = None if mode != "process" else 4
        assert_resumes_exactly(loader, epochs=2, max_stops=stops)


def test_the_state_is_per_shard_and_small(shards):
    ds = sk.from_tar_shards(shards)
    it = iter(sk.DataLoader(ds, batch_size=3))
    next(it)
    stream = it.state_dict()["stream"]
    assert stream["states"] == [{"todo": [[0, 3], [1, 0], [2, 0], [3, 0]]}]
    assert len(json.dumps(stream)) < 200


def test_shard_order_changes_per_epoch_and_repeats_for_the_same_seed_and_epoch(tmp_path):
    shards = write_shards(tmp_path, shards=12, per_shard=1)
    ds = sk.from_tar_shards(shards, shuffle_shards=True)

    def order(seed, epoch):
        return [
            r["__url__"] for r in sk.DataLoader(ds, batch_size=None, seed=seed).iter(epoch=epoch)
        ]

    assert order(0, 1) == order(0, 1) == ds.shard_order(0, 1)
    assert order(0, 0) != order(0, 1)
    assert order(1, 0) != order(0, 0)
    assert sorted(order(0, 2)) == shards
    pinned = sk.from_tar_shards(shards, shuffle_shards=True, seed=5)
    assert pinned.shard_order(0, 3) == pinned.shard_order(1, 3) == ds.shard_order(5, 3)
    assert sk.from_tar_shards(shards).shard_order(0, 4) == shards


def test_fsspec_urls_are_read_with_fsspec(shards):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    for path in shards:
        with open(path, "rb") as src:
            fs.pipe(f"/tar-test/{os.path.basename(path)}", src.read())
    try:
        ds = sk.from_tar_shards("memory://tar-test/shard-*.tar")
        assert [u.rsplit("/", 1)[1] for u in ds.urls] == [os.path.basename(p) for p in shards]
        with sk.DataLoader(ds, batch_size=4, num_workers=2, worker_mode="thread") as loader:
            assert sorted(keys_of(loader)) == all_keys()
        braced = sk.from_tar_shards("memory://tar-test/shard-{00..01}.tar")
        assert len(braced.urls) == 2
    finally:
        fs.rm("/tar-test", recursive=True)


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_long_and_unicode_names_in_every_tar_format(tmp_path, fmt):
    deep = "/".join(["folder"] * 12)  # longer than the 100 bytes of a header's name
    names = [f"{deep}/key.txt", f"{deep}/key.cls"]
    if fmt != tarfile.USTAR_FORMAT:
        names.append("döner/" + "x" * 120 + ".txt")
    path = tmp_path / "formats.tar"
    with tarfile.open(path, "w", format=fmt) as tar:
        for name in names:
            add_member(tar, name, name.encode())
    records = list(sk.from_tar_shards(str(path)))
    assert records[0]["__key__"] == f"{deep}/key"
    assert records[0]["txt"] == names[0].encode()
    assert records[0]["cls"] == names[1].encode()
    if fmt != tarfile.USTAR_FORMAT:
        assert records[1]["__key__"] == "döner/" + "x" * 120
