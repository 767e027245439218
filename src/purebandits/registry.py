"""Learners by name: ``make_learner("lil_ucb", delta=0.05)`` for the CLI, simulator and service."""

from __future__ import annotations

from typing import Any

from purebandits.base import Learner

__all__ = ["all_learners", "get_learner_class", "make_learner"]


def all_learners() -> dict[str, type[Learner]]:
    """All registered learners, ``{name: class}``, sorted by name."""
    import purebandits.algorithms as algorithms

    found: dict[str, type[Learner]] = {}
    for cls_name in algorithms.__all__:
        cls = getattr(algorithms, cls_name)
        if not cls.name:
            raise TypeError(f"{cls_name} has no registry name")
        if cls.name in found:
            raise TypeError(f"duplicate learner name {cls.name!r}: {found[cls.name].__name__} and {cls_name}")
        found[cls.name] = cls
    return dict(sorted(found.items()))


def get_learner_class(name: str) -> type[Learner]:
    """The learner class registered under ``name``; ValueError listing the names otherwise."""
    learners = all_learners()
    if name not in learners:
        raise ValueError(f"unknown algorithm {name!r}; known: {', '.join(learners)}")
    return learners[name]


def make_learner(name: str, **params: Any) -> Learner:
    """Construct a learner by name. Unknown parameter names raise ValueError naming them."""
    cls = get_learner_class(name)
    allowed = cls._param_names()
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown} for {name}; allowed: {allowed}")
    return cls(**params)
