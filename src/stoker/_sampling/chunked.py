from typing import Any
class ChunkedShuffleSampler:
    def __init__(self, *a: Any, **k: Any): raise NotImplementedError
