"""Types of the extension module behind the kiln package (private: use `import kiln`)."""
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

def version() -> str: ...
def set_error_types(classes: Dict[str, type]) -> None: ...

class Session:
    def __init__(
        self,
        source: Any,
        from_bytes: bool,
        *,
        threads: int,
        log_level: Optional[str],
        batch: int,
        cache_dir: Optional[str],
        tune: Optional[str],
        max_isa: Optional[str],
        strategy: Optional[str],
        disable_cache: bool,
        profile_budget_ms: float,
        accuracy: Optional[str],
    ) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def io(self, input: bool) -> List[Tuple[str, Tuple[int, ...], np.dtype]]: ...
    def isa(self) -> str: ...
    def run(self, feeds: Any, out: Any = None) -> Dict[str, np.ndarray]: ...
    def time_runs(self, feeds: Sequence[np.ndarray], runs: int, warmup: int) -> List[float]: ...
