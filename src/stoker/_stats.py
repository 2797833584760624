from typing import Any
class LoaderStats:
    pass
