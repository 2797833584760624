from typing import Any
def from_sequence(*a: Any, **k: Any) -> Any: raise NotImplementedError
