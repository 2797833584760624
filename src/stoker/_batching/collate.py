from typing import Any
def default_collate(*a: Any, **k: Any) -> Any: raise NotImplementedError
def pad_collate(*a: Any, **k: Any) -> Any: raise NotImplementedError
