"""PyTorch adapters: tensors without a copy, a device prefetcher, a drop-in DataLoader.

``import stoker`` never imports PyTorch; ``import stoker.torch`` does (install it with
``pip install 'stoker[torch]'``).

* :func:`to_torch` turns a stoker loader's batches into tensors that share its
  buffers and moves them to a device ahead of time, keeping ``state_dict()`` exact.
* :class:`DataLoader` takes ``torch.utils.data.DataLoader``'s arguments and yields
  its batches, and resumes exactly with ``state_dict()`` / ``load_state_dict()``.
* :func:`as_tensors` converts one batch.
* :func:`prepare_for_accelerate` and :func:`skip_first_batches` let Accelerate prepare
  the drop-in as its own while stoker's engine keeps loading (``accelerate`` is
  imported only when they run).

Example:
    >>> import stoker as sk
    >>> from stoker.torch import to_torch
    >>> loader = sk.DataLoader(sk.range(0, 4), batch_size=2)
    >>> [batch for batch in to_torch(loader)]
    [tensor([0, 1]), tensor([2, 3])]
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without torch
    raise ImportError("stoker.torch needs PyTorch: pip install 'stoker[torch]'") from exc

from ._accelerate import prepare_for_accelerate as prepare_for_accelerate
from ._accelerate import skip_first_batches as skip_first_batches
from ._device import to_torch as to_torch
from ._loader import DataLoader as DataLoader
from ._tensors import as_tensors as as_tensors

__all__ = [
    "DataLoader",
    "as_tensors",
    "prepare_for_accelerate",
    "skip_first_batches",
    "to_torch",
]
