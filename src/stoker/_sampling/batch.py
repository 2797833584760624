from typing import Any
class BatchSampler:
    def __init__(self, *a: Any, **k: Any): raise NotImplementedError
