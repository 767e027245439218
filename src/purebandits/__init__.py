"""purebandits: find the best items among many with the fewest noisy evaluations."""

from __future__ import annotations

from pathlib import Path

from purebandits.kernel_cache import stamp_package_kernels

# before any compiled module is imported: cached kernels are stamped with all their sources
stamp_package_kernels(Path(__file__).parent)

from purebandits.algorithms import *  # noqa: F403
from purebandits.algorithms import __all__ as _algorithms_all
from purebandits.base import Learner
from purebandits.exceptions import NotStartedError, PureBanditsError
from purebandits.registry import all_learners, get_learner_class, make_learner

__version__ = "0.1.0"

__all__ = [
    "Learner",
    "NotStartedError",
    "PureBanditsError",
    "all_learners",
    "get_learner_class",
    "make_learner",
    "__version__",
    *_algorithms_all,
]
