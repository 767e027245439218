"""A bounded least-recently-used mapping for the per-process caches of :class:`~purebandits.service.study.Study`.

Everything cached is rebuilt from the database on a miss (experiment settings, learners by
snapshot + log, known participant ids), so a bound only costs a reload, while an unbounded
cache let memory grow with every experiment and participant a server ever saw.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["LRU"]


class LRU(OrderedDict):
    """``dict`` that keeps at most ``maxsize`` entries, dropping the least recently read or written.

    With ``max_weight`` and ``weight`` (a function of the value, e.g. an experiment's number of
    items) it also keeps the total weight at most ``max_weight`` (the newest entry always stays),
    so a few huge experiments cannot fill memory while the count is still small.
    """

    def __init__(self, maxsize: int, max_weight: float | None = None,
                 weight: Callable[[Any], float] | None = None) -> None:
        super().__init__()
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = int(maxsize)
        self.max_weight = max_weight
        self._weigh = weight
        self._weights: dict[Hashable, float] = {}
        self.weight = 0.0

    def get(self, key: Hashable, default: Any = None) -> Any:
        if key in self:
            self.move_to_end(key)
            return super().__getitem__(key)
        return default

    def __setitem__(self, key: Hashable, value: Any) -> None:
        if self._weigh is not None:
            w = float(self._weigh(value))
            self.weight += w - self._weights.get(key, 0.0)
            self._weights[key] = w
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.maxsize or (self.max_weight is not None and self.weight > self.max_weight
                                           and len(self) > 1):
            self.popitem(last=False)

    def __delitem__(self, key: Hashable) -> None:
        super().__delitem__(key)
        self.weight -= self._weights.pop(key, 0.0)

    def pop(self, key: Hashable, *default: Any) -> Any:
        if key in self:
            self.weight -= self._weights.pop(key, 0.0)
        return super().pop(key, *default)

    def popitem(self, last: bool = True) -> tuple[Hashable, Any]:
        key, value = super().popitem(last=last)
        self.weight -= self._weights.pop(key, 0.0)
        return key, value

    def clear(self) -> None:
        super().clear()
        self._weights.clear()
        self.weight = 0.0

    def add(self, key: Hashable) -> None:
        """Set semantics: remember ``key``."""
        self[key] = True
