"""A corrupt image names its file (and tar member) and carries its sample index, in
every worker mode and from every file source."""

import io
import re
import tarfile

import numpy as np
import pytest
from PIL import Image

import stoker as sk
from http_helpers import serve

MODES = [("inline", 0), ("thread", 2), ("process", 2), ("auto", 2)]
CORRUPT = b"\xff\xd8\xff\xe0" + b"not a jpeg at all" * 8


def _jpeg(seed):
    pixels = np.random.default_rng(seed).integers(0, 256, (10, 12, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG")
    return buf.getvalue()


def _folder(root):
    """root/<cls>/<k>.jpg, 2 classes of 4 images; b/2.jpg (sample index 6) is corrupt."""
    for c, cls in enumerate(("a", "b")):
        (root / cls).mkdir(parents=True)
        for k in range(4):
            (root / cls / f"{k}.jpg").write_bytes(_jpeg(4 * c + k))
    (root / "b" / "2.jpg").write_bytes(CORRUPT)
    return root / "b" / "2.jpg"


def _raised(ds, mode, workers, **kw):
    loader = sk.DataLoader(ds, batch_size=2, num_workers=workers, worker_mode=mode, **kw)
    with pytest.raises(sk.vision.DecodeError) as info:
        for _ in loader:
            pass
    return info.value


def _text(exc):
    return "\n".join([str(exc), *getattr(exc, "__notes__", [])])


def _names_sample(exc, index, path):
    text = _text(exc)
    assert exc.sample_index == index
    assert f"sample index {index} " in text
    assert str(path) in text
    assert exc.batch_index == index // 2


@pytest.mark.parametrize(("mode", "workers"), MODES)
def test_image_folder_step_decode(tmp_path, mode, workers):
    bad = _folder(tmp_path)
    ds = sk.from_image_folder(tmp_path).map(sk.vision.decode)
    _names_sample(_raised(ds, mode, workers), 6, bad)


@pytest.mark.parametrize(("mode", "workers"), MODES)
def test_image_folder_fused_transform_bulk_path(tmp_path, mode, workers):
    bad = _folder(tmp_path)
    ds = sk.vision.eval_transform(8).apply(sk.from_image_folder(tmp_path))
    exc = _raised(ds, mode, workers)
    _names_sample(exc, 6, bad)
    assert str(bad) in str(exc)  # the decoder itself names it here


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("process", 2)])
def test_files_shuffled_names_the_file_read(tmp_path, mode, workers):
    bad = _folder(tmp_path)
    ds = sk.from_files(str(tmp_path / "**" / "*.jpg")).map(sk.vision.decode)
    exc = _raised(ds, mode, workers, shuffle=True, seed=3)
    assert exc.sample_index == 6  # the dataset index, whatever the order
    assert str(bad) in str(exc)  # from_files records carry their path: decode names it
    assert f"(read from {str(bad)!r})" in _text(exc)


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("thread", 2), ("process", 2)])
def test_files_behind_shuffle_and_concat_name_the_source_record(tmp_path, mode, workers):
    bad = _folder(tmp_path)
    good = sk.from_files(str(tmp_path / "a" / "*.jpg"))
    ds = sk.concat([good, sk.from_image_folder(tmp_path)]).shuffle(5).map(sk.vision.decode)
    exc = _raised(ds, mode, workers, collate_fn=list)
    assert f"(read from {str(bad)!r})" in _text(exc)
    # The sample index is the pipeline's: shuffle(5) moved the file's record there.
    perm = ds._parent.permutation(0)
    assert int(perm[exc.sample_index]) == 4 + 6


@pytest.mark.parametrize(("mode", "workers"), MODES)
def test_tar_shards_name_the_member_and_shard(tmp_path, mode, workers):
    for s in range(2):
        with tarfile.open(tmp_path / f"{s}.tar", "w") as tar:
            for k in range(4):
                data = CORRUPT if (s, k) == (1, 2) else _jpeg(k)
                for name, value in ((f"s{s}/{k:04d}.jpg", data), (f"s{s}/{k:04d}.cls", b"1")):
                    info = tarfile.TarInfo(name)
                    info.size = len(value)
                    tar.addfile(info, io.BytesIO(value))
    ds = sk.from_tar_shards(str(tmp_path / "*.tar")).map(sk.vision.Decode(key="jpg"))
    exc = _raised(ds, mode, workers)
    assert re.search(r"member 's1/0002\.jpg' of tar shard '[^']*1\.tar'", str(exc)), str(exc)
    assert "stream" in _text(exc)  # where in the stream: the record of its batch


@pytest.mark.parametrize(("mode", "workers"), [("inline", 0), ("thread", 2), ("process", 2)])
def test_remote_files_and_image_folder_name_the_url(tmp_path, mode, workers):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    _folder(tmp_path / "imgs")
    with serve(tmp_path) as url:
        bad = f"{url}/imgs/b/2.jpg"
        folder = sk.from_image_folder(f"{url}/imgs/").map(sk.vision.decode)
        _names_sample(_raised(folder, mode, workers), 6, bad)
        urls = [f"{url}/imgs/{c}/{k}.jpg" for c in "ab" for k in range(4)]
        files = sk.from_files(urls).map(sk.vision.decode)
        exc = _raised(files, mode, workers)
        assert bad in str(exc)
        assert exc.sample_index == 6


def test_skip_counts_the_corrupt_record_and_keeps_the_rest(tmp_path):
    _folder(tmp_path)
    ds = sk.from_image_folder(tmp_path).map(sk.vision.decode)
    loader = sk.DataLoader(ds, batch_size=2, on_error="skip", max_errors=1, collate_fn=list)
    it = iter(loader)
    labels = [int(r["label"]) for batch in it for r in batch]
    assert labels == [0, 0, 0, 0, 1, 1, 1]
    ((index, summary),) = it.stats().skipped
    assert index == 6
    assert "DecodeError" in summary
