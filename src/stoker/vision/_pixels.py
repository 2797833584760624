"""Pixel work on uint8 RGB arrays: crop-and-resize (torch's kernel or Pillow's), normalise.

A crop box with integer corners is cut out and the cut-out resampled to the output
size (torchvision's ``resized_crop``: ``crop`` then ``resize``). Two kernels do the
resampling, chosen once, when an operation is built (:func:`resize_backend`), so
every worker of a loader uses the same one:

* ``"torch"``: ``torch.nn.functional.interpolate(..., antialias=True)`` on uint8,
  PyTorch's vectorised port of Pillow's resampling (bilinear and bicubic). On the
  2-core development VM it resizes a 256x256 crop to 224x224 in about 0.2 ms against
  Pillow's 0.5 ms. Its bilinear pixels are within two levels of Pillow's: measured
  on 300 images and output sizes drawn from 8 to 800 pixels a side (smooth images,
  and noise), about 3 % of the pixels differ by one, and one image in 300 (a
  downscale) had a pixel two levels off; never more. Its bicubic pixels are not as
  close (up to 6 levels on smooth images, 23 on noise, in half of the images).
* ``"pillow"``: ``Image.crop(box).resize(size, filter)``, every filter.

``"auto"`` (the default) takes torch's when torch is installed and the
interpolation is bilinear, else Pillow's (so bicubic is Pillow's unless
``backend="torch"`` asks for torch's).

Both release the GIL while they resample, and NumPy releases it in the normalisation.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ConfigError
from ._geometry import Box, ResizedCrop

__all__ = [
    "BACKENDS",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "INTERPOLATIONS",
    "Normalizer",
    "Resampler",
    "layout_into",
    "oriented",
    "resample",
    "resize_backend",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "lanczos", "box", "hamming")
BACKENDS = ("auto", "torch", "pillow")
_TORCH_MODES = ("bilinear", "bicubic")


def resample(interpolation: str) -> Any:
    """Pillow's resampling filter for ``interpolation`` (one of :data:`INTERPOLATIONS`).

    Errors:
        ConfigError: an unknown name.
    """
    if interpolation not in INTERPOLATIONS:
        raise ConfigError(f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
    from PIL import Image

    return getattr(Image.Resampling, interpolation.upper())


def resize_backend(backend: str, interpolation: str) -> str:
    """The resampling kernel ``backend`` (one of :data:`BACKENDS`) names: "torch" or "pillow".

    ``"auto"`` is ``"torch"`` when torch is installed (looked up, not imported) and
    ``interpolation`` is bilinear (within two levels of Pillow's), else ``"pillow"``.

    Example:
        >>> resize_backend("pillow", "bilinear"), resize_backend("auto", "bicubic")
        ('pillow', 'pillow')

    Errors:
        ConfigError: an unknown backend, or ``"torch"`` for an interpolation torch
            does not antialias (or without torch installed).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {BACKENDS}, got {backend!r}")
    installed = importlib.util.find_spec("torch") is not None
    if backend == "auto":
        return "torch" if installed and interpolation == "bilinear" else "pillow"
    if backend == "torch":
        if interpolation not in _TORCH_MODES:
            raise ConfigError(
                f"backend='torch' resamples {' and '.join(_TORCH_MODES)} only, not "
                f"{interpolation!r}: use backend='pillow' (or 'auto')"
            )
        if not installed:
            raise ConfigError("backend='torch' needs PyTorch: pip install torch, or use 'pillow'")
    return backend


def _pil(pixels: np.ndarray) -> Any:
    from PIL import Image

    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise TypeError(
            "crops and resizes work on uint8 RGB images (height, width, 3), got "
            f"{pixels.dtype} {pixels.shape}: apply them before normalize"
        )
    return Image.fromarray(pixels)


def _integral(box: Sequence[float]) -> Box | None:
    corners = tuple(int(v) for v in box)
    if corners != tuple(box):
        return None
    return corners  # type: ignore[return-value]


_torch_module: Any = None


def _torch() -> Any:
    global _torch_module
    if _torch_module is None:
        _torch_module = importlib.import_module("torch")
    return _torch_module


class Resampler:
    """Cuts a box out of uint8 RGB pixels and resamples it to a size, with one kernel.

    ``backend`` is resolved when the resampler is built (see :func:`resize_backend`);
    the resolved name is kept, so a pickled copy in a worker uses the same kernel.

    Example:
        >>> r = Resampler("bilinear", "pillow")
        >>> r.hwc(np.zeros((8, 8, 3), np.uint8), (0, 0, 4, 4), (2, 3)).shape
        (3, 2, 3)
        >>> r.chw(np.zeros((8, 8, 3), np.uint8), (0, 0, 4, 4), (2, 3)).shape
        (3, 3, 2)

    Errors:
        ConfigError: see :func:`resize_backend`.
    """

    def __init__(self, interpolation: str = "bilinear", backend: str = "auto") -> None:
        self._filter = resample(interpolation)
        self.interpolation = interpolation
        self.backend = resize_backend(backend, interpolation)

    def _torch_chw(self, pixels: np.ndarray, box: Box, size: tuple[int, int]) -> np.ndarray:
        left, top, right, bottom = box
        crop = pixels[top:bottom, left:right]
        # A contiguous, writable (height, width, 3) crop is a channels-last tensor that
        # torch's uint8 kernel reads in place; anything else would be copied by torch
        # (in a parallel region that fights the loader's threads for the cores).
        if not (crop.flags.c_contiguous and crop.flags.writeable):
            crop = crop.copy()
        torch = _torch()
        image = torch.from_numpy(crop).permute(2, 0, 1)[None]
        out = torch.nn.functional.interpolate(
            image, size=(size[1], size[0]), mode=self.interpolation, antialias=True
        )
        chw: np.ndarray = out[0].numpy()
        return chw

    def _pillow(self, pixels: np.ndarray, box: Sequence[float], size: tuple[int, int]) -> Any:
        image = _pil(pixels)
        corners = _integral(box)
        if corners is None:
            return image.resize(size, self._filter, box=tuple(float(v) for v in box))
        if corners != (0, 0, *image.size):
            image = image.crop(corners)
        return image.resize(size, self._filter)

    def window(self, pixels: np.ndarray, plan: ResizedCrop, layout: str) -> np.ndarray:
        """``pixels`` resized to ``plan.resized`` and cut to ``plan.window``, uint8 in
        ``layout`` ("CHW" or "HWC"; either may be a view).

        ``pixels`` may be smaller than the image the plan was made for (a JPEG decoded
        at a DCT scale): it is resized to the same grid. The whole image is resized
        and the window cut out, as torchvision's ``Resize`` + ``CenterCrop`` do:
        resampling only the window's (fractional) box with Pillow is a quarter
        faster but puts pixels up to 2 levels off its own resize-then-crop.
        """
        pixels = self._check(pixels)
        height, width = pixels.shape[:2]
        left, top, right, bottom = plan.window
        if (width, height) == plan.resized:
            hwc = pixels
        elif self.backend == "torch":
            chw = self._torch_chw(pixels, (0, 0, width, height), plan.resized)
            cut = chw[:, top:bottom, left:right]
            return cut if layout == "CHW" else cut.transpose(1, 2, 0)
        else:
            hwc = np.asarray(_pil(pixels).resize(plan.resized, self._filter))
        cut = hwc[top:bottom, left:right]
        return cut.transpose(2, 0, 1) if layout == "CHW" else cut

    def _check(self, pixels: np.ndarray) -> np.ndarray:
        if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
            _pil(pixels)  # raises the TypeError that names the problem
        return pixels

    def hwc(
        self, pixels: np.ndarray, box: Box | Sequence[float], size: tuple[int, int]
    ) -> np.ndarray:
        """``box`` of ``pixels`` (uint8 HWC) resampled to ``size`` (width, height), HWC."""
        pixels = self._check(pixels)
        corners = _integral(box)
        if corners is not None and (corners[2] - corners[0], corners[3] - corners[1]) == size:
            return np.ascontiguousarray(pixels[corners[1] : corners[3], corners[0] : corners[2]])
        if self.backend == "torch" and corners is not None:
            return np.ascontiguousarray(self._torch_chw(pixels, corners, size).transpose(1, 2, 0))
        return np.asarray(self._pillow(pixels, box, size))

    def chw(
        self, pixels: np.ndarray, box: Box | Sequence[float], size: tuple[int, int]
    ) -> np.ndarray:
        """As :meth:`hwc`, laid out (3, height, width): contiguous from torch's kernel,
        a transposed view otherwise."""
        pixels = self._check(pixels)
        corners = _integral(box)
        if (
            self.backend == "torch"
            and corners is not None
            and (corners[2] - corners[0], corners[3] - corners[1]) != size
        ):
            return self._torch_chw(pixels, corners, size)
        return self.hwc(pixels, box, size).transpose(2, 0, 1)

    def __repr__(self) -> str:
        return f"Resampler({self.interpolation!r}, backend={self.backend!r})"


class Normalizer:
    """``(pixel - mean) / std`` per channel, written as float32 in CHW or HWC layout.

    ``mean`` and ``std`` are on the 0-1 scale (torchvision's convention); pixels are
    0-255, so the stored constants are ``mean * 255`` and ``1 / (std * 255)`` in
    float32, and the result is ``(pixel - m) * s``, computed in float32.

    NumPy does it even after torch's kernel: the same two operations in torch give the
    same numbers and are a little faster alone (0.07 against 0.08 ms for 224x224), but
    torch splits an elementwise operation of that size over its OpenMP threads, a team
    for every thread that calls it; with the development VM busy, the fused transform
    run on one thread took 6-7 ms an image that way against 0.7 ms with NumPy (1 ms
    with ``OMP_NUM_THREADS=1``). A per-channel lookup table (``np.take``) is slower
    (0.21 ms).

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

    def into(
        self, pixels: np.ndarray, out: np.ndarray, flip: bool = False, source: str = "HWC"
    ) -> None:
        """Normalise ``pixels`` (uint8, laid out as ``source``) into ``out`` (float32),
        mirrored left to right when ``flip``."""
        src = oriented(pixels, source, self.layout, flip)
        np.subtract(src, self._mean, out=out, dtype=np.float32)
        np.multiply(out, self._scale, out=out)

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        height, width = pixels.shape[:2]
        out = np.empty(self.shape(width, height), dtype=np.float32)
        self.into(pixels, out)
        return out


def oriented(pixels: np.ndarray, source: str, layout: str, flip: bool) -> np.ndarray:
    """``pixels`` (laid out as ``source``) as ``layout``, mirrored when ``flip``.

    A mirrored image is copied first: reading an array backwards row by row is the
    slowest part of the normalisation otherwise (0.14 ms against 0.1 ms with the copy
    for 224x224 CHW on the development VM). Mirroring the crop before torch's kernel
    instead gives the same pixels (checked for every width from 1 to 300 to every
    width from 1 to 300, bilinear and bicubic, and 200,000 random larger pairs), but
    NumPy copies 3-byte pixels backwards 20-30x slower than forwards (0.16-0.3 ms for
    a 180x180 crop), more than this copy of the output costs.

    Example:
        >>> oriented(np.arange(6, dtype=np.uint8).reshape(1, 2, 3), "HWC", "CHW", True)[0].tolist()
        [[3, 0]]
    """
    if source == "CHW" and layout == "CHW":
        src = np.ascontiguousarray(pixels[:, :, ::-1]) if flip else pixels
    else:
        hwc = pixels.transpose(1, 2, 0) if source == "CHW" else pixels
        src = hwc[:, ::-1] if flip else hwc
        if layout == "CHW":
            src = src.transpose(2, 0, 1)
    return src


def layout_into(
    pixels: np.ndarray, out: np.ndarray, layout: str, flip: bool = False, source: str = "HWC"
) -> None:
    """Copy uint8 ``pixels`` (laid out as ``source``) into ``out`` in ``layout``,
    mirrored when ``flip``."""
    out[...] = oriented(pixels, source, layout, flip)
