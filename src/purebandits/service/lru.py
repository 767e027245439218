"""A bounded least-recently-used mapping for the per-process caches of :class:`~purebandits.service.study.Study`.

Everything cached is rebuilt from the database on a miss (experiment settings, learners by
snapshot + log, known participant ids), so a bound only costs a reload, while an unbounded
cache let memory grow with every experiment and participant a server ever saw.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["LRU"]


class LRU(OrderedDict):
    """``dict`` that keeps at most ``maxsize`` entries, dropping the least recently read or written."""

    def __init__(self, maxsize: int) -> None:
        super().__init__()
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = int(maxsize)

    def get(self, key: Hashable, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return super().__getitem__(key)
        return default

    def __setitem__(self, key: Hashable, value: Any) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize:
            self.popitem(last=False)

    def add(self, key: Hashable) -> None:
        """Set semantics: remember ``key``."""
        self[key] = True
