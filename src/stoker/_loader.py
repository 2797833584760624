from typing import Any
class DataLoader:
    def __init__(self, *a: Any, **k: Any): raise NotImplementedError
LoaderIterator = DataLoader
