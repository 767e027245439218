"""purebandits: find the best items among many with the fewest noisy evaluations.

The learners, :class:`Learner` and the registry are loaded on first use (PEP 562), so that
``import purebandits`` (and with it the command line and each service worker) does not pay for
NumPy, SciPy, Numba and every learner's kernels until something needs them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public names that are not learners, by the module that defines them
_NAMES = {
    "Learner": "purebandits.base",
    "NotStartedError": "purebandits.exceptions",
    "PureBanditsError": "purebandits.exceptions",
    "all_learners": "purebandits.registry",
    "get_learner_class": "purebandits.registry",
    "make_learner": "purebandits.registry",
}

#: submodules ``purebandits.<name>`` reaches without an import of its own
_SUBMODULES = ("algorithms", "base", "exceptions", "kernel_cache", "registry")


def _algorithm_names() -> list[str]:
    return list(importlib.import_module("purebandits.algorithms").__all__)


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return [*_NAMES, "__version__", *_algorithm_names()]
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _SUBMODULES:  # loaded by ``import purebandits`` before the learners were loaded lazily
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        algorithms = importlib.import_module("purebandits.algorithms")
        if name not in algorithms.__all__:
            raise AttributeError(f"module 'purebandits' has no attribute {name!r}")
        value = getattr(algorithms, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_algorithm_names()})
