"""Compile the learners' kernels before participants need them.

The learners' hot paths are numba functions compiled on first use (or loaded from numba's on-disk
cache). In a fresh installation the first ask, answer, history point and dashboard poll of a
learner would compile them inside a request, under the learner's lock: about 25 s for KL-RandLUCB's
incremental ask/tell and 4 s more for its stopping progress, during which every participant of
the experiment waits and times out (measured: a contest-size load test on a fresh source tree
answered nothing). :func:`warm_learners` runs each learner through the calls the service makes,
on a small instance, so that this happens at startup and when an experiment is created; with a
warm cache it costs milliseconds, and a learner already warmed in this process costs nothing.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from purebandits.registry import make_learner

__all__ = ["warm_learners"]

log = logging.getLogger("purebandits.service")

_warmed: set[tuple[str, str]] = set()
_lock = threading.Lock()


def warm_learners(specs: Iterable[tuple[str, dict[str, Any]]]) -> int:
    """Run each (algorithm, params) once through start, ask, tell, cancel, stopping progress, intervals,
    a deep copy and a state round trip; returns how many were new to this process.

    Never raises: a learner that cannot run on the small instance (a parameter that needs more items,
    say) is skipped with a debug message and compiles on first use as before.
    """
    new = 0
    for algorithm, params in specs:
        key = (algorithm, json.dumps(params, sort_keys=True, default=str))
        with _lock:
            if key in _warmed:
                continue
            _warmed.add(key)
        new += 1
        try:
            _exercise(algorithm, params)
        except Exception as exc:  # noqa: BLE001 - warming is an optimisation; the request path reports errors
            log.debug("warming %s %s skipped: %s", algorithm, params, exc)
    return new


def _exercise(algorithm: str, params: dict[str, Any]) -> None:
    """The service's calls on a 12-arm (or 2k + 2) instance with graded rewards, until every arm has
    answers and the incremental paths are built."""
    k = params.get("k", 1)
    n = max(12, 2 * int(k) + 2) if isinstance(k, int) else 12
    lrn = make_learner(algorithm, **params).start(n, seed=0)
    rng = np.random.default_rng(0)
    out: list[int] = []
    for step in range(30 * n):
        if lrn.done:
            break
        out += lrn.ask(2 if step % 3 == 0 else 1)
        if len(out) > 3:
            arm = out.pop(0)
            if step % 17 == 0:
                lrn.cancel(arm)
            else:
                lrn.tell(arm, float(rng.integers(3)) / 2)
        if step % 40 == 39:
            lrn.stopping_progress()
            lrn.intervals_of([0, 1])
            copy.deepcopy(lrn).stopping_progress()
    lrn.recommend()
    make_learner(algorithm, **params).load_state_dict(json.loads(lrn.state_json()))
