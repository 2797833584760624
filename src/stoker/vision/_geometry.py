"""Where to crop: the boxes of random-resized, center and resize crops (no pixels here).

A box is ``(left, top, right, bottom)`` in pixels of the full image. The random box
draws only from the generator it is given, in a fixed order, so the same generator
state always gives the same box.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..errors import ConfigError

__all__ = [
    "Box",
    "ResizedCrop",
    "as_size",
    "center_box",
    "check_range",
    "random_resized_box",
    "resized_center_crop",
    "shorter_side",
]

Box = tuple[int, int, int, int]


def as_size(size: int | Sequence[int], what: str) -> tuple[int, int]:
    """``size`` (an int, or (height, width) as in torchvision) as (width, height).

    Example:
        >>> as_size(224, "crop"), as_size((100, 200), "crop")
        ((224, 224), (200, 100))

    Errors:
        ConfigError: not a positive int or a pair of them.
    """
    if isinstance(size, int | np.integer) and not isinstance(size, bool):
        if size > 0:
            return int(size), int(size)
    elif isinstance(size, Sequence) and len(size) == 2:
        h, w = size
        if all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) and v > 0 for v in (h, w)
        ):
            return int(w), int(h)
    raise ConfigError(f"{what} size must be an int > 0 or (height, width), got {size!r}")


def check_range(pair: Sequence[float], what: str, positive: bool = False) -> tuple[float, float]:
    """``pair`` as (low, high) floats with low <= high (and low > 0 when ``positive``).

    Errors:
        ConfigError: not an ordered pair of numbers.
    """
    try:
        low, high = (float(v) for v in pair)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must be a (low, high) pair of numbers, got {pair!r}") from exc
    if not low <= high or (positive and low <= 0) or low < 0:
        raise ConfigError(f"{what} must be (low, high) with 0 <= low <= high, got {pair!r}")
    return low, high


def random_resized_box(
    rng: np.random.Generator,
    width: int,
    height: int,
    scale: tuple[float, float],
    ratio: tuple[float, float],
) -> Box:
    """torchvision's RandomResizedCrop box: a random area fraction and aspect ratio.

    Up to 10 draws of (area in ``scale`` x image area, log-uniform aspect in ``ratio``);
    the first that fits is placed uniformly at random; if none fits, the largest
    central box within ``ratio``.

    Example:
        >>> box = random_resized_box(np.random.default_rng(0), 256, 256, (0.08, 1), (3 / 4, 4 / 3))
        >>> all(0 <= v <= 256 for v in box) and box[0] < box[2] and box[1] < box[3]
        True
    """
    area = width * height
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(10):
        target = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_low, log_high))
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return left, top, left + w, top + h
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, round(width / ratio[0])
    elif in_ratio > ratio[1]:
        w, h = round(height * ratio[1]), height
    else:
        w, h = width, height
    left, top = (width - w) // 2, (height - h) // 2
    return left, top, left + w, top + h


def center_box(width: int, height: int, crop_w: int, crop_h: int) -> Box:
    """The central ``crop_w`` x ``crop_h`` box (clipped to the image).

    Example:
        >>> center_box(256, 200, 224, 224)
        (16, 0, 240, 200)
    """
    crop_w, crop_h = min(crop_w, width), min(crop_h, height)
    left = round((width - crop_w) / 2.0)
    top = round((height - crop_h) / 2.0)
    return left, top, left + crop_w, top + crop_h


def shorter_side(width: int, height: int, size: int) -> tuple[int, int]:
    """(width, height) scaled so that the shorter side is ``size`` (aspect kept), as
    torchvision's ``Resize(size)`` computes it: the longer side is
    ``int(size * long / short)``, rounded down.

    Example:
        >>> shorter_side(400, 300, 256)
        (341, 256)
    """
    if width <= height:
        return size, max(1, int(size * height / width))
    return max(1, int(size * width / height)), size


class ResizedCrop(NamedTuple):
    """Where torchvision's ``Resize(resize)`` + ``CenterCrop(crop)`` takes its pixels.

    The image is resized to ``resized`` (width, height); ``window`` (left, top,
    right, bottom, integers in the resized image) is cut out and lands at ``at``
    (left, top) of the ``crop`` output. ``at`` is (0, 0) and the window the crop's
    size unless the resized image is smaller than the crop: torchvision then pads
    it with zeros, the image centred (the extra pixel, if any, on the right or
    bottom).
    """

    resized: tuple[int, int]
    window: Box
    at: tuple[int, int]

    def source_box(self, width: int, height: int) -> tuple[float, float, float, float]:
        """The window in the coordinates of the original ``width`` x ``height`` image:
        resampling this box to the window's size gives exactly the window's pixels
        of the resized image (Pillow's ``resize(size, box=...)``)."""
        sx, sy = width / self.resized[0], height / self.resized[1]
        left, top, right, bottom = self.window
        return (left * sx, top * sy, right * sx, bottom * sy)


def _crop_axis(resized: int, crop: int) -> tuple[int, int, int]:
    """(start, stop) in the resized image and the offset in the output, along one axis
    (torchvision's ``center_crop``: ``int(round((size - crop) / 2.0))``, or padding)."""
    if resized >= crop:
        start = round((resized - crop) / 2.0)
        return start, start + crop, 0
    return 0, resized, (crop - resized) // 2


def resized_center_crop(width: int, height: int, resize: int, crop: tuple[int, int]) -> ResizedCrop:
    """torchvision's ``Resize(resize)`` then ``CenterCrop(crop)`` for a ``width`` x
    ``height`` image; ``crop`` is (width, height).

    Example:
        >>> resized_center_crop(500, 375, 256, (224, 224))
        ResizedCrop(resized=(341, 256), window=(58, 16, 282, 240), at=(0, 0))
        >>> resized_center_crop(40, 30, 8, (10, 10)).at
        (0, 1)
    """
    new_w, new_h = shorter_side(width, height, resize)
    left, right, x = _crop_axis(new_w, crop[0])
    top, bottom, y = _crop_axis(new_h, crop[1])
    return ResizedCrop((new_w, new_h), (left, top, right, bottom), (x, y))
