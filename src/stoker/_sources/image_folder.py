"""``from_image_folder``: a folder of class sub-folders of images, as (image, label) records."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._context import Context, Skip
from .._dataset import DatasetNode
from ..errors import ConfigError
from .files import FilesDataset
from .listing import check_on_unsafe, walk_files
from .remote import DEFAULT_CONCURRENCY, Remote, is_url
from .retry import RetryPolicy, check_policy

__all__ = ["IMAGE_EXTENSIONS", "ImageFolderDataset", "from_image_folder"]

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".ppm", ".tif", ".tiff", ".webp")
"""The file endings listed by default (compared case-insensitively)."""


class ImageFolderDataset(DatasetNode[dict[str, Any]]):
    """Images in class folders as records ``{"image": ..., "label": int64}``.

    Built by :func:`from_image_folder`. ``image`` is the file's bytes, or with
    ``decode=True`` its pixels (uint8, height x width x 3, RGB). For a fast training
    pipeline keep the bytes and apply a fused transform such as
    ``sk.vision.train_transform(224).apply(ds)``, which decodes each image straight
    into the batch.

    Example:
        >>> import tempfile, os
        >>> from PIL import Image
        >>> root = tempfile.mkdtemp()
        >>> for cls in ("dog", "cat"):
        ...     os.mkdir(os.path.join(root, cls))
        ...     Image.new("RGB", (4, 4)).save(os.path.join(root, cls, "0.png"))
        >>> ds = from_image_folder(root)
        >>> ds.classes, len(ds), int(ds[1]["label"])
        (['cat', 'dog'], 2, 1)

    Resources:
        As :class:`~stoker._sources.files.FilesDataset`.

    Errors:
        FileNotFoundError: a listed image was deleted before it was read.
        stoker.vision.DecodeError: (``decode=True``) an image that cannot be decoded,
            naming the file; skip such records with ``DataLoader(on_error="skip")``.
    """

    @property
    def releases_gil(self) -> bool:
        return True  # file reads and the image decoder release it

    def __init__(
        self, files: FilesDataset, labels: np.ndarray, classes: list[str], decode: bool
    ) -> None:
        self._files = files
        self._labels = labels
        self._classes = classes
        self._decode = decode

    def __len__(self) -> int:
        return len(self._files)

    @property
    def classes(self) -> list[str]:
        """The class names (sub-folder names), sorted; label ``k`` is ``classes[k]``."""
        return list(self._classes)

    @property
    def class_to_index(self) -> dict[str, int]:
        """Class name -> label."""
        return {name: k for k, name in enumerate(self._classes)}

    @property
    def labels(self) -> np.ndarray:
        """The label of every record (int64), in record order."""
        return self._labels.copy()

    @property
    def paths(self) -> list[str]:
        """The image files, in record order (by class, then sorted path)."""
        return self._files.paths

    @property
    def skipped(self) -> list[str]:
        """Unsafe links left out under ``on_unsafe="skip"``."""
        return self._files.skipped

    def record_name(self, index: int) -> str:
        """The path of record ``index`` (named in errors about its contents)."""
        return self._files.record_name(index)

    def _record_name(self, index: int, ctx: Context) -> str | None:
        return self.record_name(index)

    def _fetch(self, indices: np.ndarray, ctx: Context) -> list[dict[str, Any] | Skip]:
        data: list[Any] = self._files.read(indices)
        if self._decode:
            from .._decode import decode_image

            data = [
                decode_image(d, self._files.record_name(i))
                for d, i in zip(data, indices.tolist(), strict=True)
            ]
        labels = self._labels[indices]
        return [{"image": d, "label": label} for d, label in zip(data, labels, strict=True)]

    def __repr__(self) -> str:
        return (
            f"ImageFolderDataset(len={len(self)}, classes={len(self._classes)}, "
            f"root={self._files.root!r})"
        )


def _extension_filter(extensions: Sequence[str] | None) -> Any:
    if extensions is None:
        return lambda name: True
    endings = tuple(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)
    return lambda name: name.lower().endswith(endings)


def from_image_folder(
    root: str | os.PathLike[str],
    *,
    decode: bool = False,
    extensions: Sequence[str] | None = IMAGE_EXTENSIONS,
    on_unsafe: str = "error",
    storage_options: dict[str, Any] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    retry: RetryPolicy | None = None,
) -> ImageFolderDataset:
    """A map-style dataset of images in class folders (torchvision's ``ImageFolder`` layout).

    ``root/<class>/**/<image>``: every sub-folder of ``root`` is a class, sorted by
    name (hidden ones left out); its images, at any depth, get its label. Records are
    ordered by class, then by path. The files are listed once, when the dataset is
    built, under the link rules of :func:`stoker.from_files` (``root`` is the root).

    Args:
        root: the folder, or an fsspec URL of one (``pip install 'stoker[remote]'``;
            an HTTP server must return HTML folder indexes).
        decode: give each image as decoded pixels (uint8 HWC RGB) instead of bytes.
        extensions: the file endings to list (case-insensitive); None lists every file.
        on_unsafe: ``"error"`` or ``"skip"`` for symbolic links that leave ``root``,
            loop or point to nothing (see :func:`stoker.from_files`).
        storage_options: passed to the fsspec file system of a URL.
        concurrency: most requests in flight at once in each process on an asynchronous
            file system, shared by every batch its workers read.
        retry: how reads of URLs are retried when the store throttles or fails (HTTP
            429 and 5xx, resets, timeouts, truncated bodies): a
            :class:`~stoker.RetryPolicy`; None: its defaults (10 tries, back-off from
            0.1 s with full jitter, at most 120 s a read).

    Returns:
        An :class:`ImageFolderDataset` with ``classes`` and ``class_to_index``.

    Example:
        >>> import tempfile, os
        >>> from PIL import Image
        >>> root = tempfile.mkdtemp(); os.mkdir(os.path.join(root, "a"))
        >>> Image.new("RGB", (5, 3)).save(os.path.join(root, "a", "x.jpg"))
        >>> from_image_folder(root, decode=True)[0]["image"].shape
        (3, 5, 3)

    Errors:
        ConfigError: ``root`` is missing or has no class folder; a class folder with
            no image; an unsafe link (``on_unsafe="error"``).
    """
    check_on_unsafe(on_unsafe)
    policy = check_policy(retry)
    keep = _extension_filter(extensions)
    text = os.fspath(root)
    classes: list[str] = []
    paths: list[str] = []
    real: list[str] = []
    labels: list[int] = []
    skipped: list[str] = []
    remote: Remote | None = None
    if is_url(text):
        remote = Remote(text, storage_options or {}, concurrency, policy)
        classes = remote.folders(text)
        for label, name in enumerate(classes):
            folder = text.rstrip("/") + "/" + name + "/"
            found = [u for u in remote.list_files([folder]) if keep(u)]
            if not found:
                raise ConfigError(f"the class folder {folder!r} holds no image")
            paths += found
            labels += [label] * len(found)
        real = paths
    else:
        if not os.path.isdir(text):
            raise ConfigError(f"no such directory: {text!r} (the root of the image folder)")
        entries = sorted(e.name for e in os.scandir(text) if not e.name.startswith("."))
        for name in entries:
            folder = os.path.join(text, name)
            if not os.path.isdir(folder):
                continue  # files beside the class folders are not images of a class
            listing = walk_files(folder, text, on_unsafe, keep)
            skipped += listing.skipped
            if not listing.paths:
                if os.path.islink(folder) and listing.skipped:
                    continue
                raise ConfigError(
                    f"the class folder {folder!r} holds no image (endings {extensions}); "
                    "remove it, or pass extensions="
                )
            classes.append(name)
            paths += listing.paths
            real += listing.real
            labels += [len(classes) - 1] * len(listing.paths)
    if not classes:
        raise ConfigError(
            f"{text!r} has no class folder: from_image_folder expects root/<class>/<image>"
        )
    files = FilesDataset(paths, real, remote, text, skipped)
    return ImageFolderDataset(files, np.asarray(labels, dtype=np.int64), classes, decode)
