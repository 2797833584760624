from typing import Any
class Sampler:
    def __init__(self, *a: Any, **k: Any): raise NotImplementedError
