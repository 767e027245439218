"""Fill numba's on-disk cache with some learners' kernels (run by tests/conftest.py before the xdist workers start).

:func:`main` (in a worker of conftest's process pool, or ``python tests/_prewarm_kernels.py '[["kl_lucb", {}], ...]'``):
each learner goes through the calls the service makes (:func:`purebandits.service.warmup.warm_learners`) and, when it
has a compiled driver, through ``run_compiled`` on Bernoulli and Gaussian rewards, as the common checks
(``purebandits.testing.checks``) and the simulator run it.
"""

import json
import os
import sys

import numpy as np

from purebandits.instances.rewards import Bernoulli, Gaussian
from purebandits.registry import all_learners
from purebandits.service.warmup import warm_learners
from purebandits.testing.checks import _k_for, make_test_learner


def _compiled_drivers(name: str) -> None:
    cls = all_learners()[name]
    if not cls.has_kernel():
        return
    n = 5
    means = np.array([0.8, 0.8, 0.2, 0.2, 0.2])
    models = [Bernoulli(means)] + ([] if cls.tags.get("bounded_rewards") else [Gaussian(means, 0.25)])
    for model in models:
        learner = make_test_learner(cls, **_k_for(cls, n)).start(n, seed=0)
        learner.run_compiled(model.stream(1), 200)


#: the learners whose kernels take longest to compile, heaviest first, in seconds of a core on a fresh cache, each
#: measured after the ones before it in one process: KL-LUCB 117 (then LUCB1, lil'LUCB, lil'RandLUCB, LUCB++ and
#: lil'KL-UCB cost nothing: they run its kernels), KL-RandLUCB 31, CLUCB 36 (then lil'CLUCB nothing), top-two 16,
#: AT-LUCB 15; the other 20 learners about 60 in all
_HEAVY_TO_COMPILE = ["kl_lucb", "kl_rand_lucb", "clucb", "top_two", "at_lucb"]


def compile_families(learners: dict) -> list[list[str]]:
    """The learners (name -> class) grouped by their class's module, the heaviest to compile first.

    Learners of one module share kernels: compiled one after another in one process, the second loads what the first
    compiled. Dealt to two processes one learner at a time, KL-LUCB and LUCB1 compiled the same kernels side by side:
    the pre-warm took 462 s of CPU that way, 318 s by families (on the same two cores, one run after the other)."""
    rank = {name: i for i, name in enumerate(_HEAVY_TO_COMPILE)}
    families: dict[str, list[str]] = {}
    for name, cls in learners.items():
        families.setdefault(cls.__module__, []).append(name)
    for names in families.values():
        names.sort(key=lambda n: rank.get(n, len(rank)))  # stable: the registry's order after the heavy ones
    return sorted(families.values(), key=lambda names: rank.get(names[0], len(rank)))


def quiet() -> None:
    """The pool workers' initializer: their output (numba's notes on functions it cannot cache) goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)


def main(specs: list[tuple[str, dict]]) -> int:
    warm_learners(specs)
    for name, _ in specs:
        _compiled_drivers(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
