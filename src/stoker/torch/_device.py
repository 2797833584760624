"""``to_torch``: batches as tensors, on their way to the device before they are asked for.

Each batch pulled from the source becomes tensors sharing stoker's buffers
(``torch.from_numpy``), is pinned if asked, and is copied to the device with
``non_blocking=True``. On a GPU the copies run on a side CUDA stream, so they
overlap the step running on the current stream; before a batch is yielded, the
current stream waits for the side stream (``wait_stream``) and the batch's tensors
are marked as used by the current stream (``record_stream``), so the caching
allocator does not hand their memory to another tensor while the step reads them.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from typing import Any, overload

import torch

from .._ahead import PlacedIterator, PlacedLoader, check_depth, placed
from ..errors import ConfigError
from ._tensors import as_tensors, map_leaves, pinned, tensors_in

__all__ = ["Placer", "pinning_available", "to_torch"]


def pinning_available() -> bool:
    """True when pinned (page-locked) host memory helps: a CUDA device is present."""
    return bool(torch.cuda.is_available())


def warn_no_pinning(stacklevel: int) -> None:
    """Say, as PyTorch does, that ``pin_memory=True`` does nothing without CUDA."""
    warnings.warn(
        "pin_memory=True, but no CUDA device is available: batches are not pinned "
        "(pinned memory only speeds up copies to a GPU)",
        UserWarning,
        stacklevel=stacklevel + 1,
    )


def _device(device: object) -> torch.device | None:
    if device is None:
        return None
    if not isinstance(device, torch.device | str | int):
        raise ConfigError(f"device must be a torch.device or a device string, got {device!r}")
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(
            f"device must be a torch.device or a device string, got {device!r}"
        ) from exc
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"device {str(parsed)!r} is not available: torch.cuda.is_available() is False; "
            "use device='cpu' (or None) on a machine without a GPU"
        )
    return parsed


class Placer:
    """Turns a batch into tensors on ``device``: ``place`` when pulled, ``finish`` when yielded.

    Resources:
        On a CUDA device, one side stream (created here) for the copies.
    """

    def __init__(
        self, device: object = None, pin_memory: bool = False, stacklevel: int = 2
    ) -> None:
        self.device = _device(device)
        self.pin = bool(pin_memory) and pinning_available()
        if pin_memory and not self.pin:
            warn_no_pinning(stacklevel + 1)
        cuda = self.device is not None and self.device.type == "cuda"
        self._stream = torch.cuda.Stream(device=self.device) if cuda else None  # type: ignore[no-untyped-call]

    def place(self, batch: Any) -> Any:
        """Tensors sharing the batch's buffers, pinned if asked, copies to the device started."""
        tensors = as_tensors(batch)
        if self.pin:
            tensors = pinned(tensors)
        device = self.device
        if device is None:
            return tensors

        def move(leaf: Any) -> Any:
            if isinstance(leaf, torch.Tensor):
                return leaf.to(device, non_blocking=True)
            return leaf

        if self._stream is None:
            return map_leaves(tensors, move)
        with torch.cuda.stream(self._stream):
            return map_leaves(tensors, move)

    def finish(self, batch: Any) -> Any:
        """Make the current CUDA stream wait for the batch's copies (a no-op elsewhere)."""
        if self._stream is None:
            return batch
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(self._stream)
        for tensor in tensors_in(batch):
            if tensor.is_cuda:
                tensor.record_stream(current)
        return batch


@overload
def to_torch(  # type: ignore[overload-overlap]
    iterable: Iterator[Any],
    device: torch.device | str | None = None,
    pin_memory: bool = False,
    prefetch: int = 2,
) -> PlacedIterator[Any, Any]: ...
@overload
def to_torch(
    iterable: Iterable[Any],
    device: torch.device | str | None = None,
    pin_memory: bool = False,
    prefetch: int = 2,
) -> PlacedLoader[Any, Any]: ...
def to_torch(
    iterable: Iterable[Any],
    device: torch.device | str | None = None,
    pin_memory: bool = False,
    prefetch: int = 2,
) -> PlacedLoader[Any, Any] | PlacedIterator[Any, Any]:
    """Batches as PyTorch tensors, moved to ``device`` ``prefetch`` batches ahead.

    NumPy arrays in each batch become tensors that share stoker's buffers (no copy;
    a tensor you hold keeps its buffer from being reused). With a ``device``, the
    next ``prefetch`` batches are copied there with ``non_blocking=True`` while the
    current step runs, on a side CUDA stream for a GPU. ``state_dict()`` is that of
    the last batch *yielded*, never of the batches held ahead, so a checkpoint
    resumes right after the step that took it.

    Args:
        iterable: a :class:`stoker.DataLoader` (or any re-iterable of batches): the
            result is re-iterable, one pass per ``iter()``; or an iterator (a
            loader's iterator): the result is an iterator.
        device: where the tensors go (``"cuda"``, ``"cuda:1"``, ``"cpu"``); None keeps
            them in host memory, sharing stoker's buffers.
        pin_memory: copy each batch into pinned host memory first, which makes the
            copy to a GPU asynchronous. Without CUDA it warns (as PyTorch does) and
            does not pin.
        prefetch: batches converted and sent ahead (at least one is pulled ahead).

    Returns:
        A re-iterable (``PlacedLoader``) or an iterator (``PlacedIterator``), each
        with ``state_dict()``; the re-iterable also has ``load_state_dict()`` and
        ``len()``.

    Example:
        >>> import stoker as sk
        >>> from stoker.torch import to_torch
        >>> loader = to_torch(sk.DataLoader(sk.range(0, 6), batch_size=2), prefetch=2)
        >>> it = iter(loader)
        >>> next(it)
        tensor([0, 1])
        >>> it.state_dict()["batches"]  # 2 batches are held ahead; 1 was yielded
        1
        >>> [b.tolist() for b in it]
        [[2, 3], [4, 5]]

    Errors:
        ConfigError: a device that is not a device, CUDA asked for where there is
            none, ``prefetch`` not an int >= 0. Errors of the source are raised
            after the batches already placed ahead were yielded.
    """
    depth = check_depth(prefetch)
    placer = Placer(device, pin_memory, stacklevel=3)
    return placed(iterable, placer.place, depth, placer.finish)
