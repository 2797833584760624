from typing import Any
def range(*a: Any, **k: Any) -> Any: raise NotImplementedError
