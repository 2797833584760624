"""The image operations, one small class each, applied to records by ``ds.map``.

An operation takes a record and returns the new record. When the record is a dict
it works on one field (``key``; by default ``"image"``, or a ``from_files`` record's
``"bytes"``, which :data:`decode` turns into ``"image"``) and keeps the others; any
other record is the image itself. Images are uint8 RGB arrays (height, width, 3)
until :func:`normalize` turns them into float32.

Random operations take the generator of a seeded map (``ds.map(op, seeded=True)``),
and draw only from it: the same record gets the same crop in every worker mode and
after a resume. Every operation is marked with :func:`stoker.releases_gil`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from .._decode import decode_image, decode_scaled, image_size
from .._typing import releases_gil
from ._geometry import as_size, center_box, check_range, random_resized_box, shorter_side
from ._pixels import IMAGENET_MEAN, IMAGENET_STD, Normalizer, Resampler

__all__ = [
    "CenterCrop",
    "Decode",
    "ImageOp",
    "Normalize",
    "RandomHFlip",
    "RandomResizedCrop",
    "Resize",
    "ToCHW",
    "as_pixels",
    "record_name",
    "refuse_record",
]


def record_name(record: Any, field: str | None = None) -> str | None:
    """The file a record was read from, as errors name it: a ``from_files`` record's
    ``"path"``, or for a tar shard sample the member holding ``field`` and its shard.

    Example:
        >>> record_name({"__key__": "a/0001", "__url__": "s.tar", "jpg": b""}, "jpg")
        "member 'a/0001.jpg' of tar shard 's.tar'"
    """
    if not isinstance(record, dict):
        return None
    path = record.get("path")
    if isinstance(path, str):
        return path
    key, url = record.get("__key__"), record.get("__url__")
    if isinstance(key, str) and isinstance(url, str):
        member = f"{key}.{field}" if field else key
        return f"member {member!r} of tar shard {url!r}"
    return None


_NO_RECORD: Any = object()


def refuse_record(value: Any, factory: str, usage: str) -> None:
    """Raise a ``TypeError`` saying how ``factory`` is used when it was handed a record
    (a dict, an image, bytes) where its first argument belongs: it was mapped, or
    called on a record, instead of being called to build an operation."""
    if isinstance(value, dict | np.ndarray | bytes | bytearray | memoryview):
        raise TypeError(
            f"sk.vision.{factory} builds an operation and is not applied to a record "
            f"itself (it was given a {type(value).__name__}): call it to build the "
            f"operation, then map that: {usage}"
        )


class ImageOp:
    """Base of the image operations: finds the image in a record, calls ``_image``."""

    random: ClassVar[bool] = False
    public_name: ClassVar[str | None] = None
    """The ready-made instance's name (``"sk.vision.decode"``), for errors; None for
    operations that factories build."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        releases_gil(self)

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        raise NotImplementedError

    def _no_record(self) -> str:
        name = self.public_name
        if name is not None:
            return (
                f"{name}() was called without a record: {name} is the operation itself; "
                f"map it uncalled, ds.map({name}), or apply it to one record, {name}(record)"
            )
        usage = "ds.map(op, seeded=True)" if self.random else "ds.map(op)"
        return (
            f"the {type(self).__name__} operation was called without a record: it is "
            f"applied to records, {usage}, or to one record as op(record)"
        )

    def _field(self, record: dict[str, Any]) -> str:
        if self.key is not None:
            if self.key not in record:
                raise KeyError(
                    f"{type(self).__name__}: the record has no field {self.key!r} "
                    f"(its fields: {sorted(record)})"
                )
            return self.key
        for key in ("image", "bytes"):
            if key in record:
                return key
        raise KeyError(
            f"{type(self).__name__}: the record has no 'image' field (its fields: "
            f"{sorted(record)}); pass key= the field that holds the image"
        )

    def __call__(self, record: Any = _NO_RECORD, rng: np.random.Generator | None = None) -> Any:
        if record is _NO_RECORD:
            raise TypeError(self._no_record())
        if self.random and rng is None:
            raise TypeError(
                f"{type(self).__name__} is random: apply it with ds.map(op, seeded=True), "
                "which passes each record's generator"
            )
        if not isinstance(record, dict):
            return self._image(record, rng, None)
        key = self._field(record)
        value = self._image(record[key], rng, record_name(record, key))
        out = dict(record)
        out[key] = value
        return out

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _needs(rng: np.random.Generator | None, op: ImageOp) -> np.random.Generator:
    if rng is None:
        raise TypeError(f"{type(op).__name__} is random: apply it with ds.map(op, seeded=True)")
    return rng


def as_pixels(value: Any, name: str | None) -> np.ndarray:
    """``value`` as uint8 pixels: encoded bytes decoded (naming ``name``), else an array."""
    if isinstance(value, bytes | bytearray | memoryview):
        return decode_image(bytes(value), name)
    return np.asarray(value)


class Decode(ImageOp):
    """Bytes of a JPEG, PNG or WebP file -> uint8 RGB (H, W, 3); see :data:`decode`."""

    public_name = "sk.vision.decode"

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        return decode_image(value, name)

    def __call__(self, record: Any = _NO_RECORD, rng: np.random.Generator | None = None) -> Any:
        out = super().__call__(record, rng)
        if isinstance(out, dict) and self.key is None and "image" not in out and "bytes" in out:
            return {("image" if k == "bytes" else k): v for k, v in out.items()}
        return out


class RandomResizedCrop(ImageOp):
    """A random box (area fraction in ``scale``, aspect in ``ratio``) resized to ``size``.

    Given bytes, it reads the size from the header, draws the box, and decodes a
    JPEG at the smallest DCT scale that still covers the box at the output size.
    The box is cut out and resampled by ``backend``'s kernel (see
    :class:`~stoker.vision._pixels.Resampler`).
    """

    random = True

    def __init__(
        self,
        size: int | Sequence[int],
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        interpolation: str = "bilinear",
        key: str | None = None,
        backend: str = "auto",
    ) -> None:
        super().__init__(key)
        self.size = as_size(size, "random_resized_crop")
        self.scale = check_range(scale, "scale")
        self.ratio = check_range(ratio, "ratio", positive=True)
        self.interpolation = interpolation
        self._resampler = Resampler(interpolation, backend)
        self.backend = self._resampler.backend

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        rng = _needs(rng, self)
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            width, height = image_size(data, name)
            drawn = random_resized_box(rng, width, height, self.scale, self.ratio)
            pixels, box = decode_for_box(data, name, (width, height), drawn, self.size)
        else:
            pixels = np.asarray(value)
            box = random_resized_box(rng, pixels.shape[1], pixels.shape[0], self.scale, self.ratio)
        return self._resampler.hwc(pixels, box, self.size)


def decode_for_box(
    data: bytes,
    name: str | None,
    full: tuple[int, int],
    box: Sequence[float],
    size: tuple[int, int],
) -> tuple[np.ndarray, Sequence[float]]:
    """Decode ``data`` (of size ``full``) as small as still covers ``box`` at ``size``.

    Returns the pixels and ``box`` in their coordinates: scaled with the image when
    the JPEG was decoded at a DCT scale (an integer box stays integer, rounded
    outwards so that it still covers the same region).
    """
    width, height = full
    factor = max(size[0] / max(1e-9, box[2] - box[0]), size[1] / max(1e-9, box[3] - box[1]))
    min_size = None
    if factor <= 0.5:
        min_size = (max(1, int(np.ceil(width * factor))), max(1, int(np.ceil(height * factor))))
    pixels = decode_scaled(data, name, min_size)
    if pixels.shape[1] == width and pixels.shape[0] == height:
        return pixels, box
    sx, sy = pixels.shape[1] / width, pixels.shape[0] / height
    scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
    if all(float(v).is_integer() for v in box):
        w, h = pixels.shape[1], pixels.shape[0]
        left, top = int(np.floor(scaled[0])), int(np.floor(scaled[1]))
        right = min(w, max(left + 1, int(np.ceil(scaled[2]))))
        bottom = min(h, max(top + 1, int(np.ceil(scaled[3]))))
        return pixels, (left, top, right, bottom)
    return pixels, scaled


class CenterCrop(ImageOp):
    """The central ``size`` box; an image smaller than it is resized up to fill it."""

    def __init__(
        self, size: int | Sequence[int], key: str | None = None, backend: str = "auto"
    ) -> None:
        super().__init__(key)
        self.size = as_size(size, "center_crop")
        self._resampler = Resampler("bilinear", backend)
        self.backend = self._resampler.backend

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        pixels = as_pixels(value, name)
        height, width = pixels.shape[:2]
        box = center_box(width, height, *self.size)
        if box[2] - box[0] == self.size[0] and box[3] - box[1] == self.size[1]:
            return np.ascontiguousarray(pixels[box[1] : box[3], box[0] : box[2]])
        return self._resampler.hwc(pixels, box, self.size)


class Resize(ImageOp):
    """Resize: an int makes the shorter side that long (aspect kept); (h, w) is exact."""

    def __init__(
        self,
        size: int | Sequence[int],
        interpolation: str = "bilinear",
        key: str | None = None,
        backend: str = "auto",
    ) -> None:
        super().__init__(key)
        self.size = size
        self._exact = None if isinstance(size, int) else as_size(size, "resize")
        if self._exact is None:
            as_size(size, "resize")
        self.interpolation = interpolation
        self._resampler = Resampler(interpolation, backend)
        self.backend = self._resampler.backend

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        pixels = as_pixels(value, name)
        height, width = pixels.shape[:2]
        target = self._exact or shorter_side(width, height, int(self.size))  # type: ignore[arg-type]
        return self._resampler.hwc(pixels, (0, 0, width, height), target)


class RandomHFlip(ImageOp):
    """Mirror the image left to right with probability ``p``."""

    random = True

    def __init__(self, p: float = 0.5, key: str | None = None) -> None:
        super().__init__(key)
        check_range((p, p), "p")
        if p > 1:
            from ..errors import ConfigError

            raise ConfigError(f"p must be within [0, 1], got {p!r}")
        self.p = float(p)

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        rng = _needs(rng, self)
        pixels = as_pixels(value, name)
        if rng.random() < self.p:
            return np.ascontiguousarray(pixels[:, ::-1])
        return pixels


class Normalize(ImageOp):
    """uint8 RGB -> float32 ``(pixel / 255 - mean) / std`` in ``layout`` (CHW or HWC)."""

    def __init__(
        self,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        layout: str = "CHW",
        key: str | None = None,
    ) -> None:
        super().__init__(key)
        self._norm = Normalizer(mean, std, layout)
        self.mean, self.std, self.layout = tuple(mean), tuple(std), layout

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        return self._norm(as_pixels(value, name))


class ToCHW(ImageOp):
    """(H, W, C) -> (C, H, W), contiguous, dtype kept."""

    public_name = "sk.vision.to_chw"

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        return np.ascontiguousarray(as_pixels(value, name).transpose(2, 0, 1))
