"""The eval transform is torchvision's Resize + CenterCrop (box, size and pixels against
Pillow-made references); the torch kernel's documented bound; ready-made operations
used the wrong way say how they are used."""

import io

import numpy as np
import pytest
from PIL import Image

import stoker as sk
from stoker.vision._geometry import resized_center_crop

BILINEAR = Image.Resampling.BILINEAR


def _tv_size(width, height, resize):
    """torchvision's Resize(int) output size (``_compute_resized_output_size``)."""
    short, long = (width, height) if width <= height else (height, width)
    new_short, new_long = resize, int(resize * long / short)
    return (new_short, new_long) if width <= height else (new_long, new_short)


def _tv_resize_center_crop(image, resize, crop_hw):
    """torchvision's Resize(resize) + CenterCrop(crop_hw) on a PIL image, with Pillow:
    ``resize`` then ``center_crop`` (zero padding where the image is smaller)."""
    width, height = _tv_size(*image.size, resize)
    pixels = np.asarray(image.resize((width, height), BILINEAR))
    crop_h, crop_w = crop_hw
    if crop_w > width or crop_h > height:
        pad_l = (crop_w - width) // 2 if crop_w > width else 0
        pad_t = (crop_h - height) // 2 if crop_h > height else 0
        pad_r = (crop_w - width + 1) // 2 if crop_w > width else 0
        pad_b = (crop_h - height + 1) // 2 if crop_h > height else 0
        pixels = np.pad(pixels, ((pad_t, pad_b), (pad_l, pad_r), (0, 0)))
        height, width = pixels.shape[:2]
    top = round((height - crop_h) / 2.0)
    left = round((width - crop_w) / 2.0)
    return pixels[top : top + crop_h, left : left + crop_w]


def _image(rng, width, height):
    """A smooth random image (noise resampled up), as photos are."""
    coarse = rng.integers(0, 256, (int(rng.integers(2, 30)), int(rng.integers(2, 30)), 3))
    return Image.fromarray(coarse.astype(np.uint8)).resize(
        (width, height), Image.Resampling.BICUBIC
    )


def _cases(n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        width, height = int(rng.integers(5, 500)), int(rng.integers(5, 500))
        crop_h = int(rng.integers(4, 260))
        crop_w = crop_h if rng.random() < 0.5 else int(rng.integers(4, 260))
        resize = int(rng.integers(max(1, min(crop_h, crop_w) - 30), 2 * max(crop_h, crop_w)))
        yield rng, width, height, resize, (crop_h, crop_w)


def test_box_and_size_are_torchvisions_for_many_sizes_and_crop_ratios():
    checked = 0
    for width in (1, 2, 3, 7, 31, 64, 99, 224, 255, 256, 257, 333, 500, 640, 1023):
        for height in (1, 5, 32, 100, 224, 256, 375, 480, 999):
            for resize in (1, 8, 32, 224, 256, 292):
                for crop_h, crop_w in ((224, 224), (224, 160), (100, 300), (8, 8), (300, 300)):
                    plan = resized_center_crop(width, height, resize, (crop_w, crop_h))
                    new_w, new_h = _tv_size(width, height, resize)
                    assert plan.resized == (new_w, new_h)
                    left, top, right, bottom = plan.window
                    x, y = plan.at
                    if new_w >= crop_w:
                        assert (left, right, x) == (
                            round((new_w - crop_w) / 2.0),
                            left + crop_w,
                            0,
                        )
                    else:
                        assert (left, right, x) == (0, new_w, (crop_w - new_w) // 2)
                    if new_h >= crop_h:
                        assert (top, bottom, y) == (
                            round((new_h - crop_h) / 2.0),
                            top + crop_h,
                            0,
                        )
                    else:
                        assert (top, bottom, y) == (0, new_h, (crop_h - new_h) // 2)
                    checked += 1
    assert checked == 15 * 9 * 6 * 5


def test_the_default_box_of_imagenet_eval():
    # 500x375 -> Resize(256) gives 341x256; CenterCrop(224) starts at (58, 16).
    plan = resized_center_crop(500, 375, 256, (224, 224))
    assert plan.resized == (341, 256)
    assert plan.window == (58, 16, 282, 240)
    assert sk.vision.eval_transform(224).resize == 256


@pytest.mark.parametrize("backend", ["pillow", "torch"])
def test_eval_pixels_match_pillow_resize_then_center_crop(backend):
    worst = []
    for rng, width, height, resize, crop in _cases(60, seed=7):
        image = _image(rng, width, height)
        t = sk.vision.eval_transform(
            crop, resize=resize, dtype="uint8", layout="HWC", backend=backend
        )
        got = t(np.asarray(image))
        want = _tv_resize_center_crop(image, resize, crop)
        assert got.shape == want.shape == (*crop, 3)
        worst.append(int(np.abs(got.astype(int) - want).max()))
    if backend == "pillow":
        assert max(worst) == 0  # Pillow's own resize and crop, bit for bit
    else:
        assert max(worst) <= 2


@pytest.mark.parametrize("backend", ["pillow", "torch"])
def test_eval_from_encoded_bytes_and_in_chw_float(backend):
    rng = np.random.default_rng(3)
    image = _image(rng, 300, 200)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    t = sk.vision.eval_transform(96, resize=110, backend=backend)
    got = t(buf.getvalue())
    want = _tv_resize_center_crop(image, 110, (96, 96)).astype(np.float32)
    mean = np.array(sk.vision.IMAGENET_MEAN, np.float32) * 255
    std = np.array(sk.vision.IMAGENET_STD, np.float32) * 255
    levels = np.abs(got.transpose(1, 2, 0) * std + mean - want)
    assert got.shape == (3, 96, 96)
    assert levels.max() <= (0.01 if backend == "pillow" else 2.01)


def test_eval_pads_with_zeros_where_the_resized_image_is_smaller_than_the_crop():
    image = _image(np.random.default_rng(1), 40, 30)  # Resize(8): 10x8
    t = sk.vision.eval_transform((12, 10), resize=8, dtype="uint8", layout="HWC", backend="pillow")
    got = t(np.asarray(image))
    np.testing.assert_array_equal(got, _tv_resize_center_crop(image, 8, (12, 10)))
    assert not got[:2].any()
    assert not got[10:].any()


def test_eval_through_a_loader_equals_the_reference():
    rng = np.random.default_rng(5)
    images = [_image(rng, int(rng.integers(60, 200)), int(rng.integers(60, 200))) for _ in range(6)]
    t = sk.vision.eval_transform(48, resize=56, dtype="uint8", layout="HWC", backend="pillow")
    ds = t.apply(sk.from_sequence([np.asarray(i) for i in images]))
    batch = np.concatenate(list(sk.DataLoader(ds, batch_size=3)))
    want = np.stack([_tv_resize_center_crop(i, 56, (48, 48)) for i in images])
    np.testing.assert_array_equal(batch, want)


@pytest.mark.parametrize("kind", ["smooth", "noise"])
def test_torch_bilinear_kernel_is_within_two_levels_of_pillow(kind):
    # The documented bound of the default (torch) kernel: within two levels, and only
    # a few percent of the pixels differ at all.
    rng = np.random.default_rng(11 if kind == "smooth" else 12)
    worst, shares = 0, []
    for _ in range(80):
        width, height = int(rng.integers(8, 400)), int(rng.integers(8, 400))
        if kind == "smooth":
            pixels = np.asarray(_image(rng, width, height))
        else:
            pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        out_w, out_h = int(rng.integers(4, 300)), int(rng.integers(4, 300))
        got = sk.vision.resize((out_h, out_w))(pixels)
        want = np.asarray(Image.fromarray(pixels).resize((out_w, out_h), BILINEAR))
        diff = np.abs(got.astype(int) - want)
        worst = max(worst, int(diff.max()))
        shares.append(float((diff > 0).mean()))
    assert sk.vision.resize(8).backend == "torch"
    assert worst <= 2
    assert np.mean(shares) < 0.15


def test_auto_keeps_pillow_for_bicubic():
    assert sk.vision.resize(8, "bicubic").backend == "pillow"
    assert sk.vision.resize(8, "bicubic", backend="torch").backend == "torch"
    assert sk.vision.random_resized_crop(8).backend == "torch"


def _records():
    buf = io.BytesIO()
    Image.new("RGB", (20, 16), (9, 8, 7)).save(buf, "PNG")
    return sk.from_sequence([{"image": buf.getvalue(), "label": 1}])


@pytest.mark.parametrize(
    ("factory", "call"),
    [
        ("normalize", "ds.map(sk.vision.normalize())"),
        ("resize", "ds.map(sk.vision.resize(256))"),
        ("center_crop", "ds.map(sk.vision.center_crop(224))"),
        ("eval_transform", "ds.map(sk.vision.eval_transform(224))"),
        ("hflip", "ds.map(sk.vision.hflip(), seeded=True)"),
        ("random_resized_crop", "seeded=True"),
        ("train_transform", "seeded=True"),
    ],
)
def test_a_factory_mapped_uncalled_says_how_it_is_used(factory, call):
    fn = getattr(sk.vision, factory)
    for seeded in (False, True):
        with pytest.raises(TypeError, match="builds an operation") as info:
            _records().map(fn, seeded=seeded)
        assert call in str(info.value)
    with pytest.raises(TypeError, match="builds an operation"):
        sk.from_iterable(lambda: [1]).map(fn)
    with pytest.raises(TypeError, match=f"sk.vision.{factory} builds an operation"):
        fn({"image": b""})
    with pytest.raises(TypeError, match="it was given a ndarray"):
        fn(np.zeros((4, 4, 3), np.uint8))


@pytest.mark.parametrize("name", ["decode", "to_chw"])
def test_a_ready_operation_called_without_a_record_says_how_it_is_used(name):
    op = getattr(sk.vision, name)
    with pytest.raises(TypeError, match=rf"ds\.map\(sk\.vision\.{name}\)"):
        op()
    assert _records().map(sk.vision.decode)[0]["image"].shape == (16, 20, 3)


def test_a_built_operation_called_without_a_record_says_how_it_is_used():
    with pytest.raises(TypeError, match=r"without a record.*ds\.map\(op\)"):
        sk.vision.normalize()()
    with pytest.raises(TypeError, match=r"ds\.map\(op, seeded=True\)"):
        sk.vision.train_transform(8)()
    batch = next(
        iter(
            sk.DataLoader(_records().map(sk.vision.decode).map(sk.vision.normalize()), batch_size=1)
        )
    )
    assert batch["image"].shape == (1, 3, 16, 20)


@pytest.mark.parametrize("backend", ["pillow", "torch"])
def test_eval_decodes_a_large_jpeg_at_full_size(backend):
    # A JPEG several times the resized size: torchvision decodes it whole, so does eval.
    image = _image(np.random.default_rng(8), 700, 610)
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=90)
    decoded = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    t = sk.vision.eval_transform(96, resize=110, dtype="uint8", layout="HWC", backend=backend)
    diff = np.abs(t(buf.getvalue()).astype(int) - _tv_resize_center_crop(decoded, 110, (96, 96)))
    assert diff.max() <= (0 if backend == "pillow" else 2)
