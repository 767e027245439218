"""Monte Carlo simulation of learners on instances: seeded repetitions, two drivers, local or Dask.

``simulate(learner, instance, reps=..., seed=...)`` returns a :class:`SimResult`; see
:mod:`purebandits.simulate.engine` for the seeding and driver rules and
:mod:`purebandits.simulate.executors` for where repetitions run and
:mod:`purebandits.simulate.journal` for resuming a killed run.
"""

from purebandits.simulate.engine import DEFAULT_MAX_PULLS, SimResult, rep_seeds, simulate
from purebandits.simulate.journal import Journal

__all__ = ["simulate", "SimResult", "DEFAULT_MAX_PULLS", "rep_seeds", "Journal"]
