from typing import Any
def from_iterable(*a: Any, **k: Any) -> Any: raise NotImplementedError
