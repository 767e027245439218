"""Test-wide settings.

Hypothesis' per-example deadline is off: the first example of a property test often triggers a
Numba compilation (seconds on a fresh cache, as in CI), which says nothing about the code's speed.
Speed is measured by ``benchmarks/``, never by tests.
"""

from hypothesis import settings

settings.register_profile("purebandits", deadline=None)
settings.load_profile("purebandits")
