import io
import pickle
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import stoker as sk
from stoker._rng import record_rng
from stoker.testing import assert_same_batches, run_epochs
from stoker.vision._geometry import random_resized_box

# The documented constants: mean * 255 and 1 / (std * 255), rounded to float32.
MEAN = (np.array([0.485, 0.456, 0.406]) * 255).astype(np.float32)
INV = (1 / (np.array([0.229, 0.224, 0.225]) * 255)).astype(np.float32)


def _pixels(seed, size=(64, 48)):
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (4, 4, 3), dtype=np.uint8))
    return np.asarray(coarse.resize(size, Image.Resampling.BICUBIC))


def _encode(pixels, fmt="JPEG", mode=None):
    image = Image.fromarray(pixels)
    if mode:
        image = image.convert(mode)
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("fmt", "mode"),
    [
        ("JPEG", None),
        ("PNG", None),
        ("WEBP", None),
        ("JPEG", "L"),
        ("PNG", "RGBA"),
        ("JPEG", "CMYK"),
    ],
)
def test_decode_matches_pillow(fmt, mode):
    data = _encode(_pixels(0), fmt, mode)
    expected = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    got = sk.vision.decode(data)
    assert got.dtype == np.uint8
    if mode == "CMYK":  # libjpeg-turbo's and Pillow's CMYK -> RGB round differently
        assert np.abs(got.astype(int) - expected).max() <= 1
    else:
        np.testing.assert_array_equal(got, expected)


def test_decode_records_and_errors():
    data = _encode(_pixels(1))
    record = sk.vision.decode({"path": "a.jpg", "bytes": data})
    assert list(record) == ["path", "image"]
    with pytest.raises(sk.vision.DecodeError, match=r"'bad\.jpg'"):
        sk.vision.decode({"path": "bad.jpg", "image": data[: len(data) // 3]})
    with pytest.raises(sk.vision.DecodeError):
        sk.vision.decode(b"not an image at all")
    with pytest.raises(KeyError, match="pass key="):
        sk.vision.decode({"x": data})


def test_random_ops_need_a_seeded_map():
    with pytest.raises(TypeError, match="seeded=True"):
        sk.vision.random_resized_crop(8)(_pixels(0))
    ds = sk.from_sequence([_pixels(0)]).map(sk.vision.hflip())
    with pytest.raises(TypeError, match="seeded=True"):
        ds[0]


def _torch_resized(crop, size):
    torch = pytest.importorskip("torch")
    image = torch.from_numpy(np.ascontiguousarray(crop)).permute(2, 0, 1)[None]
    out = torch.nn.functional.interpolate(image, size=size, mode="bilinear", antialias=True)
    return out[0].permute(1, 2, 0).numpy()


def test_random_resized_crop_is_the_resized_crop_of_the_drawn_box():
    pixels = _pixels(2)
    box = random_resized_box(record_rng(0, 0, 3), 64, 48, (0.08, 1.0), (3 / 4, 4 / 3))
    left, top, right, bottom = box
    # Pillow: torchvision's resized_crop on a PIL image, crop then resize.
    op = sk.vision.random_resized_crop(16, backend="pillow")
    got = op(pixels, record_rng(0, 0, 3))
    pil = np.asarray(Image.fromarray(pixels).crop(box).resize((16, 16), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(got, pil)
    # torch: its antialiased uint8 kernel on the same crop (within two levels of Pillow; here one).
    op = sk.vision.random_resized_crop(16, backend="torch")
    got = op(pixels, record_rng(0, 0, 3))
    np.testing.assert_array_equal(got, _torch_resized(pixels[top:bottom, left:right], (16, 16)))
    assert got.flags.c_contiguous
    assert np.abs(got.astype(int) - pil).max() <= 1
    # From bytes, the same crop when the output is too large for DCT scaling.
    data = _encode(pixels)
    decoded = sk.vision.decode(data)
    for backend in ("pillow", "torch", "auto"):
        op = sk.vision.random_resized_crop(40, backend=backend)
        np.testing.assert_array_equal(
            op(data, record_rng(0, 0, 3)), op(decoded, record_rng(0, 0, 3))
        )


def test_backend_choice_and_errors():
    pytest.importorskip("torch")
    assert sk.vision.random_resized_crop(8).backend == "torch"
    assert sk.vision.resize(8, "lanczos").backend == "pillow"
    assert sk.vision.train_transform(8, backend="pillow").backend == "pillow"
    op = pickle.loads(pickle.dumps(sk.vision.train_transform(8, backend="pillow")))
    assert op.backend == "pillow"
    with pytest.raises(sk.ConfigError, match="backend must be one of"):
        sk.vision.random_resized_crop(8, backend="cv2")
    with pytest.raises(sk.ConfigError, match="backend='pillow'"):
        sk.vision.resize(8, "lanczos", backend="torch")
    # Both kernels keep a crop of the output size as it is.
    pixels = _pixels(7)
    for backend in ("pillow", "torch"):
        same = sk.vision.resize((48, 64), backend=backend)(pixels)
        np.testing.assert_array_equal(same, pixels)


def test_dct_scaling_when_the_crop_is_much_larger_than_the_output():
    big = _encode(_pixels(3, (512, 512)))
    op = sk.vision.random_resized_crop(32, scale=(0.9, 1.0))
    fast = op(big, record_rng(0, 0, 0))
    full = op(sk.vision.decode(big), record_rng(0, 0, 0))
    assert fast.shape == full.shape == (32, 32, 3)
    # Decoded at 1/8 in the DCT domain: close to, not equal to, the full decode.
    assert np.abs(fast.astype(int) - full.astype(int)).mean() < 6


def test_other_ops():
    pixels = _pixels(4)
    assert sk.vision.center_crop(20)(pixels).shape == (20, 20, 3)
    np.testing.assert_array_equal(sk.vision.center_crop((10, 20))(pixels), pixels[19:29, 22:42])
    assert sk.vision.resize(24)(pixels).shape == (24, 32, 3)
    assert sk.vision.resize((10, 12))(pixels).shape == (10, 12, 3)
    flipped = sk.vision.hflip(p=1.0)(pixels, np.random.default_rng(0))
    np.testing.assert_array_equal(flipped, pixels[:, ::-1])
    norm = sk.vision.normalize()(pixels)
    assert norm.shape == (3, 48, 64)
    assert norm.dtype == np.float32
    np.testing.assert_allclose(
        norm, ((pixels.astype(np.float32) - MEAN) * INV).transpose(2, 0, 1), rtol=1e-6
    )
    assert sk.vision.normalize(layout="HWC")(pixels).shape == (48, 64, 3)
    assert sk.vision.to_chw(pixels).shape == (3, 48, 64)
    with pytest.raises(sk.ConfigError):
        sk.vision.normalize(std=(0, 1, 1))
    with pytest.raises(sk.ConfigError):
        sk.vision.random_resized_crop(0)
    with pytest.raises(TypeError, match="before normalize"):
        sk.vision.resize(8)(norm.transpose(1, 2, 0))


@pytest.mark.parametrize("backend", ["pillow", "torch"])
def test_train_transform_is_decode_crop_flip_normalize(backend):
    data = _encode(_pixels(5))
    t = sk.vision.train_transform(24, backend=backend)
    for index in range(8):  # both flips
        rng = record_rng(1, 0, index)
        got = t(data, rng)
        rng = record_rng(1, 0, index)
        box = random_resized_box(rng, 64, 48, (0.08, 1.0), (3 / 4, 4 / 3))
        flip = rng.random() < 0.5
        image = Image.open(io.BytesIO(data)).convert("RGB")
        if backend == "pillow":
            crop = np.asarray(image.crop(box).resize((24, 24), Image.Resampling.BILINEAR))
        else:
            left, top, right, bottom = box
            crop = _torch_resized(np.asarray(image)[top:bottom, left:right], (24, 24))
        if flip:
            crop = crop[:, ::-1]
        expected = ((crop.astype(np.float32) - MEAN) * INV).transpose(2, 0, 1)
        np.testing.assert_array_equal(got, expected)
        hwc = sk.vision.train_transform(24, backend=backend, layout="HWC", dtype="uint8")
        np.testing.assert_array_equal(hwc(data, record_rng(1, 0, index)), crop)


def test_uint8_hwc_and_eval():
    data = _encode(_pixels(6))
    t = sk.vision.train_transform(16, dtype="uint8", layout="HWC")
    out = t(data, np.random.default_rng(0))
    assert out.shape == (16, 16, 3)
    assert out.dtype == np.uint8
    ev = sk.vision.eval_transform(16)
    np.testing.assert_array_equal(ev(data), ev(data))
    assert ev(data).shape == (3, 16, 16)
    with pytest.raises(sk.ConfigError, match="uint8"):
        sk.vision.train_transform(16, dtype="uint8", mean=(0, 0, 0))


def _records(n=10):
    return [{"image": _encode(_pixels(i)), "label": i % 3} for i in range(n)]


def test_apply_gives_the_records_of_a_seeded_map_and_fills_planned_buffers():
    source = sk.from_sequence(_records())
    t = sk.vision.train_transform(16)
    mapped = sk.DataLoader(source.map(t, seeded=True), batch_size=4, shuffle=True, seed=3)
    applied = sk.DataLoader(t.apply(source), batch_size=4, shuffle=True, seed=3)
    assert_same_batches(mapped, applied, epochs=3)  # epochs 2-3 reuse the buffers
    batch = run_epochs(applied, 1)[0]
    assert batch["image"].shape == (4, 3, 16, 16)
    assert batch["label"].dtype == np.int64
    record = t.apply(source)[2]
    np.testing.assert_array_equal(record["image"], source.map(t, seeded=True)[2]["image"])


def test_apply_on_bare_images_and_filters():
    images = [r["image"] for r in _records(6)]
    t = sk.vision.eval_transform(8)
    ds = t.apply(sk.from_sequence(images))
    assert next(iter(sk.DataLoader(ds, batch_size=6))).shape == (6, 3, 8, 8)
    kept = t.apply(sk.from_sequence(_records(6)).filter(lambda r: r["label"] != 1))
    labels = np.concatenate([b["label"] for b in sk.DataLoader(kept, batch_size=2)])
    assert labels.tolist() == [0, 2, 0, 2]


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_step_ops_same_batches_in_every_worker_mode(mode):
    ds = (
        sk.from_sequence(_records())
        .map(sk.vision.decode)
        .map(sk.vision.random_resized_crop(12), seeded=True)
        .map(sk.vision.hflip(), seeded=True)
        .map(sk.vision.normalize())
    )
    base = sk.DataLoader(ds, batch_size=3, shuffle=True, seed=4)
    other = sk.DataLoader(ds, batch_size=3, shuffle=True, seed=4, num_workers=2, worker_mode=mode)
    assert_same_batches(base, other, epochs=2)


def test_ops_pickle_and_are_marked_for_threads():
    from stoker._settings import pipeline_releases_gil

    for op in (sk.vision.decode, sk.vision.hflip(), sk.vision.train_transform(8)):
        assert pickle.loads(pickle.dumps(op)).__class__ is op.__class__
    ds = sk.from_sequence(_records(2)).map(sk.vision.decode).map(sk.vision.hflip(), seeded=True)
    assert pipeline_releases_gil(ds)


def test_import_stoker_does_not_import_pillow():
    code = (
        "import sys, stoker\n"
        "assert 'PIL' not in sys.modules\n"
        "assert 'simplejpeg' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
