import io
import os

import numpy as np
import pytest
from PIL import Image

import stoker as sk
from stoker.testing import assert_resumes_exactly, assert_same_batches, run_epochs


def _jpeg(seed, size=(40, 30), fmt="JPEG"):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return buf.getvalue()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "images"
    layout = {"dog": 3, "cat": 2, "bird": 4}
    for k, (cls, n) in enumerate(sorted(layout.items())):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            ext = "png" if i == 1 else "jpg"
            (root / cls / f"{i:03d}.{ext}").write_bytes(
                _jpeg(10 * k + i, fmt="PNG" if ext == "png" else "JPEG")
            )
        (root / cls / "notes.txt").write_text("not an image")
    (root / "README.md").write_text("files beside class folders are ignored")
    (root / ".cache").mkdir()
    return root


def test_classes_labels_and_order(folder):
    ds = sk.from_image_folder(folder)
    assert ds.classes == ["bird", "cat", "dog"]
    assert ds.class_to_index == {"bird": 0, "cat": 1, "dog": 2}
    assert len(ds) == 9
    assert ds.labels.tolist() == [0, 0, 0, 0, 1, 1, 2, 2, 2]
    assert [os.path.relpath(p, folder) for p in ds.paths[:2]] == ["bird/000.jpg", "bird/001.png"]
    record = ds[4]
    assert set(record) == {"image", "label"}
    assert record["image"] == (folder / "cat" / "000.jpg").read_bytes()
    assert record["label"].dtype == np.int64
    assert int(record["label"]) == 1


def test_decode_gives_rgb_pixels_equal_to_pillow(folder):
    ds = sk.from_image_folder(folder, decode=True)
    for i in (0, 1):
        expected = np.asarray(Image.open(ds.paths[i]).convert("RGB"))
        np.testing.assert_array_equal(ds[i]["image"], expected)
    batch = next(iter(sk.DataLoader(ds, batch_size=3)))
    assert batch["image"].shape == (3, 30, 40, 3)
    assert batch["label"].tolist() == [0, 0, 0]


def test_extensions_filter(folder):
    ds = sk.from_image_folder(folder, extensions=[".PNG"])
    assert len(ds) == 3
    everything = sk.from_image_folder(folder, extensions=None)
    assert len(everything) == 12


def test_errors_name_the_folder(tmp_path, folder):
    with pytest.raises(sk.ConfigError, match="no such directory"):
        sk.from_image_folder(tmp_path / "missing")
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.jpg").write_bytes(_jpeg(0))
    with pytest.raises(sk.ConfigError, match="no class folder"):
        sk.from_image_folder(tmp_path / "flat")
    (folder / "empty").mkdir()
    with pytest.raises(sk.ConfigError, match=r"class folder .*empty.* holds no image"):
        sk.from_image_folder(folder)


def test_links_follow_the_rules(tmp_path, folder):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x.jpg").write_bytes(_jpeg(99))
    os.symlink(outside / "x.jpg", folder / "cat" / "escape.jpg")
    with pytest.raises(sk.ConfigError, match=r"escape\.jpg"):
        sk.from_image_folder(folder)
    ds = sk.from_image_folder(folder, on_unsafe="skip")
    assert len(ds) == 9
    assert len(ds.skipped) == 1
    os.remove(folder / "cat" / "escape.jpg")
    os.symlink("..", folder / "cat" / "loop")
    with pytest.raises(sk.ConfigError, match="loop"):
        sk.from_image_folder(folder)
    os.remove(folder / "cat" / "loop")
    os.symlink(folder / "dog" / "000.jpg", folder / "cat" / "zz_alias.jpg")
    assert len(sk.from_image_folder(folder)) == 10  # inside the root: followed


def test_corrupt_image_names_the_file_and_can_be_skipped(folder):
    (folder / "cat" / "001.jpg").write_bytes(b"\xff\xd8\xff\xe0 truncated")
    ds = sk.from_image_folder(folder, decode=True)
    with pytest.raises(sk.vision.DecodeError, match=r"cat/001\.jpg"):
        ds[5]
    loader = sk.DataLoader(ds, batch_size=4, on_error="skip", max_errors=1)
    batches = list(loader)
    assert sum(len(b["label"]) for b in batches) == 9


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_same_batches_in_every_worker_mode(folder, mode):
    ds = sk.vision.train_transform(16).apply(sk.from_image_folder(folder))
    base = sk.DataLoader(ds, batch_size=4, shuffle=True, seed=5)
    other = sk.DataLoader(ds, batch_size=4, shuffle=True, seed=5, num_workers=2, worker_mode=mode)
    assert_same_batches(base, other, epochs=2)


def test_resumes_exactly_and_reads_every_image_once(folder):
    ds = sk.from_image_folder(folder, decode=True).map(
        sk.vision.random_resized_crop(12), seeded=True
    )
    loader = sk.DataLoader(ds, batch_size=2, shuffle=True, seed=2)
    assert_resumes_exactly(loader, epochs=2)
    labels = np.concatenate([b["label"] for b in run_epochs(loader, 1)])
    assert sorted(labels.tolist()) == [0, 0, 0, 0, 1, 1, 2, 2, 2]


def test_auto_uses_threads(folder):
    ds = sk.vision.train_transform(16).apply(sk.from_image_folder(folder))
    it = iter(sk.DataLoader(ds, batch_size=4, num_workers=2))
    next(it)
    assert it.stats().worker_mode == "thread"
    it.close()
