"""Fused image transforms: decode, crop, flip and normalise in one call, into the batch.

:func:`train_transform` and :func:`eval_transform` build an :class:`ImageTransform`.
Used as ``ds.map(t, seeded=True)`` it turns each record's encoded image into the
finished array. ``t.apply(ds)`` gives the same records, and also the bulk path: an
:class:`ImageDataset` whose batches are written image by image straight into the
loader's planned batch buffer (no per-record array, no stacking copy).

Per image: the size is read from the header, the crop box is drawn, a JPEG is
decoded at the smallest DCT scale that still covers the box at the output size, the
box is cut out and resampled to the output size (torch's uint8 kernel when torch is
installed, else Pillow: see :mod:`stoker.vision._pixels`), straight to CHW, and the
result is mirrored and normalised into its slot of the batch (NumPy).

Where an image's time goes on the 2-core development VM (256x256 JPEG -> 224x224
float32 CHW, one core, best of 5 passes over 300 images): decode 0.29 ms
(simplejpeg; Pillow 0.32-0.45 ms), resample 0.2 ms (torch; Pillow 0.5 ms),
normalise 0.06 ms (0.1 ms mirrored), header, box, generator and the rest 0.05 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._collate import default_collate
from .._context import SKIP, Context, Skip
from .._dataset import Dataset, UnaryNode
from .._decode import image_size
from .._rng import reused_record_rng
from ..errors import ConfigError
from ._geometry import as_size, check_range, random_resized_box, resized_center_crop
from ._ops import ImageOp, as_pixels, decode_for_box, record_name
from ._pixels import IMAGENET_MEAN, IMAGENET_STD, Normalizer, Resampler, layout_into

__all__ = ["ImageDataset", "ImageTransform"]


class ImageTransform(ImageOp):
    """Encoded image (or uint8 RGB pixels) -> finished ``size`` image: see :func:`train_transform`.

    Records are as for every image operation (a dict's ``"image"`` field, or the
    record itself). ``apply(ds)`` wraps a dataset in an :class:`ImageDataset`.
    """

    def __init__(
        self,
        size: int | Sequence[int],
        *,
        train: bool,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        flip: float = 0.5,
        resize: int | None = None,
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        layout: str = "CHW",
        dtype: str = "float32",
        interpolation: str = "bilinear",
        key: str | None = None,
        backend: str = "auto",
    ) -> None:
        super().__init__(key)
        self.size = as_size(size, "transform")
        self.train = bool(train)
        self.random = self.train  # type: ignore[misc]
        self.scale = check_range(scale, "scale")
        self.ratio = check_range(ratio, "ratio", positive=True)
        if not 0 <= flip <= 1:
            raise ConfigError(f"flip must be a probability within [0, 1], got {flip!r}")
        self.flip = float(flip) if train else 0.0
        if resize is not None and (not isinstance(resize, int) or resize < 1):
            raise ConfigError(f"resize must be an int >= 1, got {resize!r}")
        self.resize = resize if resize is not None else round(min(self.size) / 0.875)
        if layout not in ("CHW", "HWC"):
            raise ConfigError(f"layout must be 'CHW' or 'HWC', got {layout!r}")
        self.layout = layout
        if dtype not in ("float32", "uint8"):
            raise ConfigError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
        if dtype == "uint8" and (mean is not None or std is not None):
            raise ConfigError("uint8 output is not normalised: leave mean and std out")
        self.dtype = dtype
        self._norm = (
            Normalizer(mean or IMAGENET_MEAN, std or IMAGENET_STD, layout)
            if dtype == "float32"
            else None
        )
        self.interpolation = interpolation
        self._resampler = Resampler(interpolation, backend)
        self.backend = self._resampler.backend

    @property
    def shape(self) -> tuple[int, int, int]:
        """The shape of one output image."""
        w, h = self.size
        return (3, h, w) if self.layout == "CHW" else (h, w, 3)

    def _box(self, rng: np.random.Generator | None, width: int, height: int) -> Sequence[float]:
        if rng is None:
            raise TypeError("a training transform is random: use ds.map(t, seeded=True)")
        return random_resized_box(rng, width, height, self.scale, self.ratio)

    def into(
        self, value: Any, rng: np.random.Generator | None, name: str | None, out: np.ndarray
    ) -> None:
        """Write the finished image of ``value`` (bytes or uint8 RGB pixels) into ``out``."""
        if not self.train:
            self._eval_into(value, name, out)
            return
        if isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            width, height = image_size(data, name)
            box = self._box(rng, width, height)
            pixels, box = decode_for_box(data, name, (width, height), box, self.size)
        else:
            pixels = np.asarray(value)
            box = self._box(rng, pixels.shape[1], pixels.shape[0])
        flip = self.flip > 0 and rng is not None and rng.random() < self.flip
        if self.layout == "CHW":
            image, source = self._resampler.chw(pixels, box, self.size), "CHW"
        else:
            image, source = self._resampler.hwc(pixels, box, self.size), "HWC"
        if self._norm is not None:
            self._norm.into(image, out, flip, source)
        else:
            layout_into(image, out, self.layout, flip, source)

    def _eval_into(self, value: Any, name: str | None, out: np.ndarray) -> None:
        """torchvision's ``Resize(resize)`` + ``CenterCrop(size)`` into ``out``: the
        integer resized size and crop window of :func:`resized_center_crop`.

        The image is decoded at full size: decoding a JPEG at a DCT scale (as the
        training transform does) moved pixels of the eval crop up to 47 levels (a
        median of 14 an image, 40 JPEGs of 520-1400 pixels a side, quality 90)."""
        pixels = as_pixels(value, name)
        plan = resized_center_crop(pixels.shape[1], pixels.shape[0], self.resize, self.size)
        image = self._resampler.window(pixels, plan, self.layout)
        if image.shape != self.shape:  # smaller than the crop: zeros around it
            canvas = np.zeros(self.shape, dtype=np.uint8)
            x, y = plan.at
            h, w = image.shape[1:] if self.layout == "CHW" else image.shape[:2]
            if self.layout == "CHW":
                canvas[:, y : y + h, x : x + w] = image
            else:
                canvas[y : y + h, x : x + w] = image
            image = canvas
        if self._norm is not None:
            self._norm.into(image, out, False, self.layout)
        else:
            layout_into(image, out, self.layout, False, self.layout)

    def _image(self, value: Any, rng: np.random.Generator | None, name: str | None) -> Any:
        out = np.empty(self.shape, dtype=self.dtype)
        self.into(value, rng, name, out)
        return out

    def apply(self, dataset: Dataset[Any]) -> ImageDataset:
        """``dataset`` with this transform applied to every record, batches built in place.

        The records equal those of ``dataset.map(self, seeded=True)``.
        """
        return ImageDataset(dataset, self)


class ImageDataset(UnaryNode[Any]):
    """Records of ``parent`` with an :class:`ImageTransform` applied; built by ``apply``.

    Its bulk path decodes every image of a batch straight into the batch's image
    array (the loader's planned buffer when it has one); the other fields of the
    records are collated as usual. The random draws are those of a seeded map at
    the same place in the pipeline.

    Example:
        >>> import io, stoker as sk
        >>> from PIL import Image
        >>> buf = io.BytesIO(); Image.new("RGB", (40, 30)).save(buf, "JPEG")
        >>> ds = sk.vision.eval_transform(16).apply(sk.from_sequence([buf.getvalue()] * 3))
        >>> next(iter(sk.DataLoader(ds, batch_size=3))).shape
        (3, 3, 16, 16)

    Errors:
        stoker.vision.DecodeError: an image that cannot be decoded (naming its file
            when the source knows it); ``DataLoader(on_error="skip")`` skips it.
    """

    def __init__(self, parent: Dataset[Any], transform: ImageTransform) -> None:
        super().__init__(parent)
        self._transform = transform

    @property
    def transform(self) -> ImageTransform:
        return self._transform

    def _name(self, record: Any, index: int, ctx: Context) -> str | None:
        field = self._transform._field(record) if isinstance(record, dict) else None
        named = record_name(record, field)
        return named if named is not None else self._parent._record_name(index, ctx.child(0))

    def _each(self, records: list[Any], indices: np.ndarray, ctx: Context) -> Any:
        seeded = self._transform.random
        seed, epoch, path = ctx.seed, ctx.epoch, ctx.path
        for record, index in zip(records, indices.tolist(), strict=True):
            rng = reused_record_rng(seed, epoch, index, path) if seeded else None
            yield record, index, rng

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[Any | Skip]:
        records = self._parent._fetch(indices, ctx.child(0))
        t = self._transform
        out: list[Any | Skip] = []
        for record, index, rng in self._each(records, indices, ctx):
            if record is SKIP:
                out.append(SKIP)
                continue
            image = np.empty(t.shape, dtype=t.dtype)
            value = record[t._field(record)] if isinstance(record, dict) else record
            t.into(value, rng, self._name(record, index, ctx), image)
            if isinstance(record, dict):
                key = t._field(record)
                out.append({k: (image if k == key else v) for k, v in record.items()})
            else:
                out.append(image)
        return out

    def _gather(self, indices: np.ndarray, ctx: Context, out: Any | None) -> Any:
        if self._parent.may_skip or not len(indices):
            return NotImplemented
        records: list[Any] = self._parent._fetch(indices, ctx.child(0))
        t = self._transform
        first = records[0]
        key = t._field(first) if isinstance(first, dict) else None
        shape = (len(indices), *t.shape)
        target = out if key is None else (out.get(key) if isinstance(out, dict) else None)
        if not (isinstance(target, np.ndarray) and target.shape == shape):
            target = np.empty(shape, dtype=t.dtype)
        for k, (record, index, rng) in enumerate(self._each(records, indices, ctx)):
            value = record if key is None else record[key]
            t.into(value, rng, self._name(record, index, ctx), target[k])
        if key is None:
            return target
        rest = [{f: v for f, v in r.items() if f != key} for r in records]
        rest_out = {f: v for f, v in out.items() if f != key} if isinstance(out, dict) else None
        collated = default_collate(rest, rest_out) if rest[0] else {}
        return {f: (target if f == key else collated[f]) for f in first}

    def __repr__(self) -> str:
        return f"ImageDataset(len={len(self)}, transform={self._transform!r})"
