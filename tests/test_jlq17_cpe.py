"""JLQ17 CPE experiment (Thm 4.2, App. E): the oracle judge, the diagonal instances, and the assessment's logic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from purebandits.algorithms.cpe import Matchings, TopKSets
from purebandits.experiments import jlq17_cpe as E
from purebandits.experiments.base import Context
from purebandits.experiments.jlq17 import CPE_LEARNERS, cpe_correct, cpe_gaps, cpe_learner, on_diagonal


def test_a_wrong_matching_is_counted_wrong() -> None:
    """Oracle(mu) on K_{3,3} with the diagonal best: any other perfect matching, a partial or padded one, or one with
    a repeated arm is wrong; the optimum in any order (or padded after it) is right."""
    mu = E.cpe_instance("0.3-exponential", 3).means
    dec = Matchings([3, 3])
    rec = [[0, 4, 8], [8, 0, 4], [0, 5, 7], [1, 3, 8], [0, 4, -1], [0, 4, 4], [2, 4, 6]]
    assert cpe_correct(dec, mu, rec).tolist() == [True, True, False, False, False, False, False]
    # the wrong matchings are worse in value, not just different sets
    assert mu[[0, 5, 7]].sum() < mu[[0, 4, 8]].sum()
    # top-K with K = 3 on the same arms has the same optimum; a 3-set that is not a matching is judged as a set
    assert cpe_correct(TopKSets(9, 3), mu, [[4, 8, 0], [0, 1, 8]]).tolist() == [True, False]


def test_diagonal_instances_have_a_unique_optimum() -> None:
    for family in E.FAMILIES:
        for r in (2, 3, 5):
            mu = E.cpe_instance(family, r).means
            diag = set(range(0, r * r, r + 1))
            for dec in (Matchings([r, r]), TopKSets(r * r, r)):
                assert set(np.flatnonzero(dec.oracle(mu)).tolist()) == diag
                assert (cpe_gaps(dec, mu) > 0).all()
    # 1-sparse on K_{r,r}: leaving out a diagonal cell or taking an off-diagonal one costs 1/2 + 1/2
    np.testing.assert_allclose(cpe_gaps(Matchings([4, 4]), E.cpe_instance("1-sparse", 4).means), 1.0)
    with pytest.raises(ValueError):
        on_diagonal(np.zeros(8), 3)


def test_the_simulator_keeps_the_whole_matching() -> None:
    """With k = r the simulator's recommendation holds the full matching, which the oracle judge accepts."""
    inst = E.cpe_instance("1-sparse", 3)
    learner = cpe_learner("lil'CLUCB (heuristic)", {"class": "matching", "shape": [3, 3]}, 3)
    res = Context(jobs=1, progress=False).simulate(learner, inst, 3, seed=5, driver="reference")
    assert res.recommended.shape == (3, 3) and res.stopped.all()
    assert cpe_correct(Matchings([3, 3]), inst.means, res.recommended).all()


def test_compute_runs_every_learner_with_common_seeds() -> None:
    df = E.compute(Context(jobs=1, progress=False), {"sizes": [2], "reps": 2, "max_pulls": 10**6})
    assert len(df) == len(E.FAMILIES) * len(E.CLASSES) * len(CPE_LEARNERS) * 2
    assert df["correct"].all() and df["stopped"].all() and (df["value_gap"] == 0).all()


def _synthetic(ratio_faithful: dict[int, float], ratio_heuristic: float = 3.0, wrong: int = 0,
               reps: int = 60) -> pd.DataFrame:
    """Raw rows as :func:`E.compute` writes them: CLUCB / lil'CLUCB mean pulls = the given ratios per N."""
    rng = np.random.default_rng(0)
    rows = []
    for cls in E.CLASSES:
        for family in E.FAMILIES:
            for n, rf in ratio_faithful.items():
                base = 1000.0 * n * (1.0 + 0.1 * rng.standard_normal(reps))
                pulls = {E.BASE: base, E.FAITHFUL: base / rf, E.HEURISTIC: base / ratio_heuristic}
                for label, p in pulls.items():
                    for rep in range(reps):
                        rows.append({"decision": cls, "instance": family, "r": int(n**0.5), "N": n, "K": int(n**0.5),
                                     "width": 2, "H": 1.0, "learner": label, "rep": rep,
                                     "pulls": int(p[rep] * (1.0 + 0.05 * rng.standard_normal())), "stopped": True,
                                     "correct": not (label == E.FAITHFUL and rep < wrong), "value_gap": 0.0})
    return pd.DataFrame(rows)


def test_assess_holds_when_lil_clucb_is_better_and_more_so_with_n() -> None:
    verdict = E.assess(_synthetic({9: 1.2, 100: 1.6}))
    assert verdict.status == "holds", verdict.summary
    assert set(verdict.table["decision"]) == set(E.CLASSES)


@pytest.mark.parametrize("ratio", [1.0, 0.8])
def test_assess_fails_when_lil_clucb_is_not_better(ratio: float) -> None:
    verdict = E.assess(_synthetic({9: ratio, 100: ratio}, ratio_heuristic=ratio))
    assert verdict.status == "does not hold", verdict.summary
    assert "in 0/8 (class, instance, N) cells (faithful) and 0/8 (heuristic)" in verdict.summary


def test_assess_partly_without_growth_or_with_errors() -> None:
    assert E.assess(_synthetic({9: 1.4, 100: 1.4})).status == "partly"  # better, but not more so with N
    assert E.assess(_synthetic({9: 1.5, 100: 1.5 + 1e-3})).status == "partly"  # growth within the noise
    assert E.assess(_synthetic({9: 1.2, 100: 1.6}, wrong=5)).status == "partly"  # 5/60 wrong >> nu
    # the heuristic version no better, or better only within the noise (1% with 5% per-run noise): not "fewer"
    verdict = E.assess(_synthetic({9: 1.2, 100: 1.6}, ratio_heuristic=1.0))
    assert verdict.status == "partly" and "8/8 (class, instance, N) cells (faithful) and 0/8" in verdict.summary
    assert E.assess(_synthetic({9: 1.2, 100: 1.6}, ratio_heuristic=1.01)).status == "partly"


def test_auto_driver_falls_back_when_the_kernel_does_not_cover_the_decision_class():
    """lil'CLUCB's kernel covers top-k only: driver='auto' runs a matching class on the reference loop,
    driver='compiled' is refused with a clear message."""
    from purebandits.instances import Gaussian
    from purebandits.simulate import simulate

    learner = cpe_learner("lil'CLUCB (heuristic)", {"class": "matching", "shape": [2, 2]}, 2)
    model = Gaussian([0.9, 0.1, 0.1, 0.9], 0.5)
    res = simulate(learner, model, reps=2, seed=0, jobs=1, max_pulls=20_000, progress=False)
    assert res.reps == 2 and res.stopped.all()
    assert sorted(res.recommended[0][:2]) == [0, 3]
    with pytest.raises(ValueError, match="top_k"):
        simulate(learner, model, reps=1, seed=0, jobs=1, max_pulls=1000, driver="compiled", progress=False)
