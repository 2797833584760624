"""Recognise PyTorch's data classes by name, so that ``import stoker`` never imports torch."""

from __future__ import annotations

__all__ = ["is_torch_data"]


def is_torch_data(obj: object, class_name: str) -> bool:
    """True when ``obj`` is an instance of ``torch.utils.data.<class_name>`` (or a subclass).

    Example:
        >>> is_torch_data([1, 2], "IterableDataset")
        False
    """
    return any(
        cls.__name__ == class_name and cls.__module__.startswith("torch.utils.data")
        for cls in type(obj).__mro__
    )
