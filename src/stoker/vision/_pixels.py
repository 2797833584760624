"""Pixel work on uint8 RGB arrays: crop-and-resize through Pillow, normalise with NumPy.

Both release the GIL: Pillow's resampling runs in C outside it, and NumPy ufuncs on
arrays of this size do too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ._geometry import Box

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "INTERPOLATIONS",
    "Normalizer",
    "crop_resize",
    "resample",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")


def resample(interpolation: str) -> Any:
    """Pillow's resampling filter for ``interpolation`` (one of :data:`INTERPOLATIONS`).

    Errors:
        ConfigError: an unknown name.
    """
    if interpolation not in INTERPOLATIONS:
        raise ConfigError(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
    from PIL import Image

    return getattr(Image.Resampling, interpolation.upper())


def _pil(pixels: np.ndarray) -> Any:
    from PIL import Image

    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise TypeError(
            "crops and resizes work on uint8 RGB images (height, width, 3), got "
            f"{pixels.dtype} {pixels.shape}: apply them before normalize"
        )
    return Image.fromarray(pixels)


def crop_resize(
    pixels: np.ndarray, box: Box | tuple[float, ...], size: tuple[int, int], filt: Any
) -> np.ndarray:
    """The ``box`` of ``pixels`` (uint8 HWC) resampled to ``size`` (width, height).

    Example:
        >>> crop_resize(np.zeros((8, 8, 3), np.uint8), (0, 0, 4, 4), (2, 3), None).shape
        (3, 2, 3)
    """
    image = _pil(pixels)
    width, height = image.size
    if tuple(box) == (0, 0, width, height) and size == (width, height):
        return pixels
    if filt is None:
        filt = resample("bilinear")
    return np.asarray(image.resize(size, filt, box=tuple(float(v) for v in box)))


class Normalizer:
    """``(pixel - mean) / std`` per channel, written as float32 in CHW or HWC layout.

    ``mean`` and ``std`` are on the 0-1 scale (torchvision's convention); pixels are
    0-255, so the stored constants are ``mean * 255`` and ``1 / (std * 255)`` in
    float32, and the result is ``(pixel - m) * s``, computed in float32.

    Example:
        >>> norm = Normalizer((0.5, 0.5, 0.5), (0.5, 0.5, 0.5), "CHW")
        >>> norm(np.full((1, 1, 3), 255, np.uint8)).ravel().round(3).tolist()
        [1.0, 1.0, 1.0]
    """

    def __init__(self, mean: Sequence[float], std: Sequence[float], layout: str) -> None:
        if len(mean) != 3 or len(std) != 3:
            raise ConfigError(f"mean and std need 3 values (R, G, B), got {mean!r} and {std!r}")
        if any(float(s) <= 0 for s in std):
            raise ConfigError(f"std must be > 0, got {std!r}")
        if layout not in ("CHW", "HWC"):
            raise ConfigError(f"layout must be 'CHW' or 'HWC', got {layout!r}")
        self.layout = layout
        self.mean = np.asarray([float(m) * 255 for m in mean], dtype=np.float32)
        self.scale = np.asarray([1 / (float(s) * 255) for s in std], dtype=np.float32)
        if layout == "CHW":
            self._mean, self._scale = self.mean[:, None, None], self.scale[:, None, None]
        else:
            self._mean, self._scale = self.mean, self.scale

    def shape(self, width: int, height: int) -> tuple[int, int, int]:
        """The output shape for an image of this size."""
        return (3, height, width) if self.layout == "CHW" else (height, width, 3)

    def into(self, pixels: np.ndarray, out: np.ndarray, flip: bool = False) -> None:
        """Normalise ``pixels`` (uint8 HWC) into ``out`` (float32), mirrored when ``flip``."""
        src = pixels[:, ::-1] if flip else pixels
        if self.layout == "CHW":
            src = src.transpose(2, 0, 1)
        np.subtract(src, self._mean, out=out, dtype=np.float32)
        np.multiply(out, self._scale, out=out)

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        height, width = pixels.shape[:2]
        out = np.empty(self.shape(width, height), dtype=np.float32)
        self.into(pixels, out)
        return out


def layout_into(pixels: np.ndarray, out: np.ndarray, layout: str, flip: bool = False) -> None:
    """Copy uint8 HWC ``pixels`` into ``out`` in ``layout``, mirrored when ``flip``."""
    src = pixels[:, ::-1] if flip else pixels
    out[...] = src.transpose(2, 0, 1) if layout == "CHW" else src
