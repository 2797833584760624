from typing import Any
class BatchedStream:
    def __init__(self, *a: Any, **k: Any): raise NotImplementedError
MappedStream = FilteredStream = BatchedStream
def open_user_stream(*a: Any) -> Any: raise NotImplementedError
