"""Image operations for training input pipelines (``pip install 'stoker[images]'``).

Decode JPEG, PNG and WebP, crop, resize, flip and normalise, as dataset operations:

* per-step operations for ``ds.map``: :data:`decode`, :func:`random_resized_crop`,
  :func:`center_crop`, :func:`resize`, :func:`hflip`, :func:`normalize`,
  :func:`to_chw`; the random ones (``random_resized_crop``, ``hflip``) need
  ``ds.map(op, seeded=True)`` and draw only from each record's generator, so the
  augmentations are identical in every worker mode and after a resume;
* fused transforms, the fast path: :func:`train_transform` (decode + random resized
  crop + flip + normalise) and :func:`eval_transform` (decode + resize + center crop
  + normalise); ``t.apply(ds)`` writes each image straight into the batch.

Bilinear crops and resizes resample with torch's vectorised uint8 kernel when torch
is installed (about 2.5x Pillow's speed; pixels within two levels of Pillow's, about
3 % of them one level off), else with Pillow; ``backend="pillow"`` or ``"torch"``
picks one (bicubic is Pillow's unless ``backend="torch"``). The choice is made when
the operation is built, so every worker uses the same kernel and batches stay
identical in every worker mode. A crop is torchvision's: the box is cut out, then
resized.

Every operation is marked with :func:`stoker.releases_gil` (Pillow, the JPEG decoder,
torch and NumPy release the GIL), so ``worker_mode="auto"`` runs them on threads. This
package imports Pillow (and torch, for the torch kernel) when it is first used, never
on ``import stoker``.

Example:
    >>> import io, numpy as np, stoker as sk
    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("RGB", (64, 48), (200, 10, 10)).save(buf, "PNG")
    >>> ds = sk.from_sequence([{"image": buf.getvalue(), "label": 3}])
    >>> ds = ds.map(sk.vision.decode).map(sk.vision.random_resized_crop(32), seeded=True)
    >>> ds = ds.map(sk.vision.normalize())
    >>> ds[0]["image"].shape, ds[0]["image"].dtype.name, ds[0]["label"]
    ((3, 32, 32), 'float32', 3)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._decode import DecodeError, decode_image
from .._typing import builds_operation
from ._fused import ImageDataset, ImageTransform
from ._ops import (
    CenterCrop,
    Decode,
    ImageOp,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    ToCHW,
    refuse_record,
)
from ._pixels import IMAGENET_MEAN, IMAGENET_STD

F = TypeVar("F", bound=Callable[..., Any])

__all__ = [
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "DecodeError",
    "ImageDataset",
    "ImageOp",
    "ImageTransform",
    "center_crop",
    "decode",
    "decode_image",
    "eval_transform",
    "hflip",
    "normalize",
    "random_resized_crop",
    "resize",
    "to_chw",
    "train_transform",
]

# How each factory is used: shown by map() given the factory itself, and by the
# factory given a record.
_USAGE = {
    "random_resized_crop": "ds.map(sk.vision.random_resized_crop(224), seeded=True)",
    "center_crop": "ds.map(sk.vision.center_crop(224))",
    "resize": "ds.map(sk.vision.resize(256))",
    "hflip": "ds.map(sk.vision.hflip(), seeded=True)",
    "normalize": "ds.map(sk.vision.normalize())",
    "train_transform": "ds.map(sk.vision.train_transform(224), seeded=True)",
    "eval_transform": "ds.map(sk.vision.eval_transform(224))",
}


def _factory(fn: F) -> F:
    return builds_operation(_USAGE[fn.__name__])(fn)


def _refuse(value: Any, name: str) -> None:
    refuse_record(value, name, _USAGE[name])


decode: Decode = Decode()
"""Bytes of a JPEG, PNG or WebP file -> uint8 RGB (H, W, 3): ``ds.map(sk.vision.decode)``.

A record's ``"image"`` field is decoded; a ``from_files`` record's ``"bytes"`` field
becomes ``"image"``. A corrupt file raises :class:`DecodeError` naming it: the
record's ``"path"`` (``from_files``) or its member and shard (``from_tar_shards``);
in a loader a note also gives the sample index and the file the record was read
from (``from_image_folder`` and others whose records do not carry a path)."""

to_chw: ToCHW = ToCHW()
"""(H, W, C) -> (C, H, W), contiguous: ``ds.map(sk.vision.to_chw)``."""


@_factory
def random_resized_crop(
    size: int | Sequence[int],
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    interpolation: str = "bilinear",
    *,
    key: str | None = None,
    backend: str = "auto",
) -> RandomResizedCrop:
    """A random crop (area fraction in ``scale``, aspect in ``ratio``) resized to ``size``.

    torchvision's RandomResizedCrop, for ``ds.map(op, seeded=True)``. Given encoded
    bytes instead of pixels, it decodes a JPEG at the smallest DCT scale that still
    covers the crop at the output size. ``backend``: the resampling kernel ("auto",
    "torch" or "pillow"; see the package docstring).

    Example:
        >>> import numpy as np, stoker as sk
        >>> op = sk.vision.random_resized_crop(8)
        >>> op(np.zeros((20, 30, 3), np.uint8), np.random.default_rng(0)).shape
        (8, 8, 3)
    """
    _refuse(size, "random_resized_crop")
    return RandomResizedCrop(size, scale, ratio, interpolation, key, backend)


@_factory
def center_crop(
    size: int | Sequence[int], *, key: str | None = None, backend: str = "auto"
) -> CenterCrop:
    """The central ``size`` (int, or (height, width)) box of the image (an image
    smaller than it is resized up, with ``backend``'s kernel).

    Example:
        >>> import numpy as np, stoker as sk
        >>> sk.vision.center_crop(4)(np.zeros((10, 6, 3), np.uint8)).shape
        (4, 4, 3)
    """
    _refuse(size, "center_crop")
    return CenterCrop(size, key, backend)


@_factory
def resize(
    size: int | Sequence[int],
    interpolation: str = "bilinear",
    *,
    key: str | None = None,
    backend: str = "auto",
) -> Resize:
    """Resize: an int sets the shorter side (aspect kept), (height, width) the exact size.

    Example:
        >>> import numpy as np, stoker as sk
        >>> sk.vision.resize(8)(np.zeros((20, 40, 3), np.uint8)).shape
        (8, 16, 3)
    """
    _refuse(size, "resize")
    return Resize(size, interpolation, key, backend)


@_factory
def hflip(p: float = 0.5, *, key: str | None = None) -> RandomHFlip:
    """Mirror left to right with probability ``p``: ``ds.map(sk.vision.hflip(), seeded=True)``.

    Example:
        >>> import numpy as np, stoker as sk
        >>> img = np.arange(6, dtype=np.uint8).reshape(1, 2, 3)
        >>> sk.vision.hflip(p=1.0)(img, np.random.default_rng(0))[0, 0].tolist()
        [3, 4, 5]
    """
    _refuse(p, "hflip")
    return RandomHFlip(p, key)


@_factory
def normalize(
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    layout: str = "CHW",
    *,
    key: str | None = None,
) -> Normalize:
    """uint8 RGB -> float32 ``(pixel / 255 - mean) / std``, in ``layout`` ("CHW" or "HWC").

    Example:
        >>> import numpy as np, stoker as sk
        >>> sk.vision.normalize(layout="HWC")(np.zeros((2, 2, 3), np.uint8)).dtype.name
        'float32'
    """
    _refuse(mean, "normalize")
    return Normalize(mean, std, layout, key)


@_factory
def train_transform(
    size: int | Sequence[int] = 224,
    *,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    flip: float = 0.5,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    layout: str = "CHW",
    dtype: str = "float32",
    interpolation: str = "bilinear",
    key: str | None = None,
    backend: str = "auto",
) -> ImageTransform:
    """Decode + random resized crop + random flip + normalise, fused: the training input.

    ``dtype="float32"`` normalises with ``mean``/``std`` (default: ImageNet's);
    ``dtype="uint8"`` keeps the pixels. ``backend`` picks the resampling kernel
    ("auto": torch's when installed, else Pillow's). Use ``t.apply(ds)`` (batches
    built in place) or ``ds.map(t, seeded=True)``.

    Example:
        >>> import io, stoker as sk
        >>> from PIL import Image
        >>> buf = io.BytesIO(); Image.new("RGB", (50, 40)).save(buf, "JPEG")
        >>> t = sk.vision.train_transform(24)
        >>> ds = t.apply(sk.from_sequence([{"image": buf.getvalue(), "label": 1}] * 4))
        >>> batch = next(iter(sk.DataLoader(ds, batch_size=4, seed=0)))
        >>> batch["image"].shape, batch["label"].tolist()
        ((4, 3, 24, 24), [1, 1, 1, 1])
    """
    _refuse(size, "train_transform")
    return ImageTransform(
        size,
        train=True,
        scale=scale,
        ratio=ratio,
        flip=flip,
        mean=mean,
        std=std,
        layout=layout,
        dtype=dtype,
        interpolation=interpolation,
        key=key,
        backend=backend,
    )


@_factory
def eval_transform(
    size: int | Sequence[int] = 224,
    *,
    resize: int | None = None,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    layout: str = "CHW",
    dtype: str = "float32",
    interpolation: str = "bilinear",
    key: str | None = None,
    backend: str = "auto",
) -> ImageTransform:
    """Decode + resize (shorter side to ``resize``, default ``size / 0.875``) + center
    crop + normalise, fused. Not random: ``ds.map(t)`` or ``t.apply(ds)``.

    torchvision's ``Resize(resize)`` + ``CenterCrop(size)``: the image is resized to
    the integer size torchvision computes (shorter side ``resize``, longer side
    ``int(resize * long / short)``) and the crop cut at torchvision's integer offsets
    (``int(round((side - crop) / 2.0))``; padded with zeros, centred, where the
    resized image is smaller than the crop). With ``backend="pillow"`` the pixels are
    exactly those of Pillow's ``resize`` + ``crop`` (torchvision on PIL images);
    torch's kernel is within two levels of them. Images are decoded at full size
    (no DCT-scaled JPEG decoding here: it moves pixels by tens of levels).

    Example:
        >>> import io, stoker as sk
        >>> from PIL import Image
        >>> buf = io.BytesIO(); Image.new("RGB", (300, 200)).save(buf, "JPEG")
        >>> sk.vision.eval_transform(224)(buf.getvalue()).shape
        (3, 224, 224)
    """
    _refuse(size, "eval_transform")
    return ImageTransform(
        size,
        train=False,
        resize=resize,
        mean=mean,
        std=std,
        layout=layout,
        dtype=dtype,
        interpolation=interpolation,
        key=key,
        backend=backend,
    )
