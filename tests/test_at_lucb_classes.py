"""AT-LUCB's compiled kernel (classes of tied arms, stage-scale keys, witness stop test) decides as the rule.

Every pull of the kernel is compared with the ask/tell rule's ask (the kernel records its arms), with
and without classes and with the automatic switch, on tie-heavy Bernoulli and categorical instances,
graded rewards and the ST17 instances the reproduction runs, with and without the fixed-confidence
stop; the whole state (counts, sums, sumsq, round, stage, queue, J, stop) must be equal after each
run, which resumes at checkpoints. Long runs at n = 1,000 must leave the state the previous kernel
(commit 18afe47, a heap of one upper key per arm covering both confidences) left.
"""

import hashlib

import numpy as np
import pytest

from purebandits.algorithms import ATLUCB
from purebandits.algorithms.at_lucb import (
    CLASSES_AUTO,
    CLASSES_OFF,
    CLASSES_ON,
    _at_lucb_scale,
    _at_lucb_workspace,
    _rekey,
    _run_kernel,
    _stop_holds,
    at_lucb_pair,
)
from purebandits.algorithms.kernels.lucb_round_incremental import _UHARM, _UKEY
from purebandits.instances import lil_exponential, make_instance, nsar_setup
from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian
from purebandits.testing.state import assert_same_state

MODES = {"off": CLASSES_OFF, "on": CLASSES_ON, "auto": CLASSES_AUTO}


def _deterministic(n: int = 60) -> Bernoulli:
    """Means 0 and 1 only (every reward is certain): arms tie in mean and count all run long, top ones too."""
    return Bernoulli(np.r_[np.ones(3), np.zeros(n - 5), np.ones(2)])


def _categorical(n: int = 80, m: int = 3) -> Categorical:
    """``m`` reward values in [0, 1]: (mean, count) ties are frequent early and rarer later."""
    rng = np.random.default_rng(7)
    return Categorical(rng.dirichlet(np.ones(m), size=n), np.linspace(0.0, 1.0, m))


# name: (model factory, k, pulls); the budgets let most runs jump stages and stop (delta = 0.1 and 0.6)
INSTANCES = {
    "one_sparse_bernoulli": (lambda: make_instance("one_sparse:n=100,model=bernoulli").model, 1, 30_000),
    "one_sparse_bernoulli_k3": (lambda: make_instance("one_sparse:n=60,k=3,model=bernoulli").model, 3, 20_000),
    "deterministic_0_1": (_deterministic, 2, 8_000),
    "categorical": (_categorical, 3, 12_000),
    "graded_bernoulli": (lambda: lil_exponential(40, 0.6, model="bernoulli").model, 1, 22_000),
    "graded_gaussian": (lambda: lil_exponential(40, 0.6).model, 1, 24_000),
    "st17_setup5_m4": (lambda: nsar_setup(5, 4).model, 4, 15_000),
    "st17_setup1_m2": (lambda: nsar_setup(1, 2).model, 2, 90_000),
}
#: stop confidences: none (anytime) and two fixed-confidence targets
DELTAS = [None, 0.1, 0.6]


def _rule(model, k: int, delta: float | None, seed: int, pulls: int) -> tuple[np.ndarray, ATLUCB]:
    """The ask/tell rule's asks, one at a time, until it stops or has made ``pulls`` pulls."""
    lr = ATLUCB(k=k, delta=delta).start(model.n_arms, seed=0)
    stream = model.stream(seed)
    asks = []
    while lr.t_ < pulls and not lr.done:
        (arm,) = lr.ask(1)
        asks.append(arm)
        lr.tell(arm, stream.draw(arm))
    return np.array(asks, dtype=np.int64), lr


def _kernel(model, k: int, delta: float | None, seed: int, pulls: int, mode: int,
            checkpoints: tuple[int, ...]) -> tuple[np.ndarray, ATLUCB, list[dict]]:
    """The kernel's pulls over runs resumed at ``checkpoints`` (odd ones stop inside a pair), and its states."""
    lr = ATLUCB(k=k, delta=delta).start(model.n_arms, seed=0)
    stream = model.stream(seed)
    arms, states = [], []
    for cp in (*checkpoints, pulls):
        if lr.done or cp <= lr.t_:
            continue
        buf = np.full(cp, -1, dtype=np.int64)
        t0 = lr.t_
        states.append(_run_kernel(lr, stream, cp, mode, buf))
        arms.append(buf[:lr.t_ - t0])
    return np.concatenate(arms), lr, states


def _assert_same(rule_arms, rule, arms, fast):
    m = min(len(rule_arms), len(arms))
    diff = np.flatnonzero(rule_arms[:m] != arms[:m])
    assert diff.size == 0, f"first different pull: {diff[0]} (rule {rule_arms[diff[0]]}, kernel {arms[diff[0]]})"
    assert len(arms) == len(rule_arms), (len(arms), len(rule_arms))
    assert fast.done == rule.done and fast.n_pulls == rule.n_pulls
    assert_same_state(fast, rule)


@pytest.mark.slow  # long runs of the compiled kernel against the rules
@pytest.mark.parametrize("delta", DELTAS)
@pytest.mark.parametrize("name", sorted(INSTANCES))
def test_kernel_pulls_the_rules_arms(name, delta):
    """Pull by pull, in each class mode, two stream seeds; the run with delta = 0.6 stops on most instances."""
    make, k, pulls = INSTANCES[name]
    model = make()
    n = model.n_arms
    for seed in (1, 2):
        rule_arms, rule = _rule(model, k, delta, seed, pulls)
        for mode in MODES.values():
            arms, fast, _ = _kernel(model, k, delta, seed, pulls, mode, (n - 3, n + 1, 2 * n + 7, pulls // 3 + 1))
            _assert_same(rule_arms, rule, arms, fast)


def test_the_runs_cover_jumps_stops_and_both_stop_paths():
    """The cases above are not idle: stage jumps (with keys re-built inside them), stops, and the stop tests
    decided by a walk and by a pass."""
    seen = {"jump": 0, "jump-rekey": 0, "stop": 0, "walk-stop": 0, "pass-stop": 0}
    for make, k, pulls in INSTANCES.values():
        model = make()
        for delta in DELTAS:
            _, fast, states = _kernel(model, k, delta, 1, pulls, CLASSES_AUTO, ())
            seen["jump"] += fast.stage_ > 1
            seen["jump-rekey"] += sum(s["jump_rekeys"] for s in states)
            if fast.done:
                seen["stop"] += 1
                seen["pass-stop" if states[-1]["stop_passes"] else "walk-stop"] += 1
    assert all(v > 0 for v in seen.values()), seen


def test_auto_switches_classes_on_and_off_within_a_run():
    """On a categorical instance the automatic mode turns the classes on (early ties) and off again (few ties)."""
    model = _categorical(300, 9)
    rule_arms, rule = _rule(model, 3, None, 5, 60_000)
    arms, fast, states = _kernel(model, 3, None, 5, 60_000, CLASSES_AUTO, ())
    assert states[0]["switches"] >= 2 and states[0]["classes"] == 0
    _assert_same(rule_arms, rule, arms, fast)


def test_ties_inside_the_top_and_across_its_boundary():
    """k-th place inside a group of equal means, equal counts at every level (deterministic rewards), large k."""
    model = Bernoulli(np.r_[np.ones(5), np.full(3, 0.5), np.zeros(32)])
    for k in (3, 5, 6, 20):
        for delta in (None, 0.3):
            rule_arms, rule = _rule(model, k, delta, 3, 6_000)
            for mode in MODES.values():
                arms, fast, _ = _kernel(model, k, delta, 3, 6_000, mode, (41, 1_001))
                _assert_same(rule_arms, rule, arms, fast)


# SHA-256 of state_json() after these runs (learner seed 11, stream seed 12), recorded with the previous
# kernel (commit 18afe47: one upper key per arm covering both confidences, the full heap walk, a scan for
# unpulled arms): instance, k, delta, pulls asked, pulls made, digest
RECORDED = [
    ("one_sparse:n=1000,model=bernoulli", 1, 0.1, 2_000_000, 238_762,
     "f75163b0fd63d53fc523939593c79bfa3bafb3b6e2ff77fc91044749d15f4c39"),
    ("one_sparse:n=1000,model=bernoulli", 1, None, 1_000_000, 1_000_000,
     "4b5aa1015653d902998d713402eeffd901909293a9e4fce351f85208182dcdb8"),
    ("one_sparse:n=1000,k=3,model=bernoulli", 3, 0.05, 1_500_000, 254_238,
     "19afb12071f67ded54980fd60fb8ad5bb85e0bceb028f48afa547a0a32aa122b"),
    ("lil_exp:n=1000,alpha=0.6,model=bernoulli", 1, 0.1, 1_000_000, 1_000_000,
     "0ee0630304d191e70218b4c949edbf3719f4582fa5af7867967c46828d912f45"),
    ("lil_exp:n=1000,alpha=0.6", 1, None, 1_000_000, 1_000_000,
     "9d6ab1290d72983fe3285d4e6243758405736b11a541c2c56cc82e10966b45e5"),
    ("optmai_uniform:n=1000,k=10", 10, None, 600_000, 600_000,
     "d0155cfd6ec8c7be854f67875c2657e0369fb66ccc63658640567f8bab8de054"),
    ("nsar:setup=5,m=4", 4, None, 4_000_000, 4_000_000,
     "0d783458bd2f4e7b118d1e4f60c42bb0bac3f586c9a96a4a357d9a7dee9c99c6"),
    ("nsar:setup=1,m=2", 2, 0.1, 2_000_000, 85_028,
     "827f3a5c4a235625d6ad912c3479c697142ecc0146180d193ba2298322d69dff"),
]


# Gaussian rewards on means computed by np.power: NumPy's power differs in the last bit between CPUs (its AVX-512
# path is SVML's), and Gaussian rewards carry that bit into every sum. These runs use the means rounded to multiples
# of 2**-30 (under 5e-10 away; a 1-ulp difference moves a rounding with probability about 2**-23 per mean), and
# their digest was recorded with the previous kernel (commit 18afe47) on those means.
_CPU_DEPENDENT_MEANS = {"lil_exp:n=1000,alpha=0.6"}


@pytest.mark.slow  # runs of a million pulls
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("name,k,delta,pulls,made,digest", RECORDED)
def test_long_runs_equal_the_previous_kernels(name, k, delta, pulls, made, digest, mode):
    inst = make_instance(name)
    model = inst.model
    if name in _CPU_DEPENDENT_MEANS:
        model = Gaussian(np.ldexp(np.rint(np.ldexp(model.means, 30)), -30), 0.25)
    lr = ATLUCB(k=k, delta=delta).start(inst.n_arms, seed=11)
    _run_kernel(lr, model.stream(12), pulls, MODES[mode])
    assert lr.t_ == made
    assert hashlib.sha256(lr.state_json().encode()).hexdigest() == digest


@pytest.mark.parametrize("mode", [CLASSES_OFF, CLASSES_ON])
def test_stop_test_past_the_keys_scale_checks_every_arm(mode):
    """When the stop test's scale exceeds the keys' (stage 1, delta < delta1) and the witness is separated,
    an arm whose key is below the threshold can still reach it at the stop's scale: the test must find it
    (a walk pruned on those keys would not). Compared with the full pass at_lucb_pair."""
    n, k, t = 5, 1, 10.0
    mu = np.array([0.9, 0.1, 0.0, 0.0, 0.0])
    counts = np.array([10**6, 10**6, 100, 10**6, 10**6])
    u = counts.astype(float)
    top = np.array([True, False, False, False, False])
    ws, _ = _at_lucb_workspace(n, k)
    stack, iw, fw, sc, tab, st = ws[2], ws[3], ws[4], ws[5], ws[6], ws[7]
    st[0] = -1
    _, c1 = _rekey(t, n, k, 1, 0.5, 0.99, 0.5, mode, st, iw, fw, tab, sc, mu, mu.view(np.int64), u, counts, top)
    topl = np.array([0])
    for stop_delta, u2 in ((1e-300, 100.0), (1e-300, 1e4), (0.4, 100.0)):
        u[2] = u2
        counts[2] = int(u2)
        _, c1 = _rekey(t, n, k, 1, 0.5, 0.99, 0.5, mode, st, iw, fw, tab, sc, mu, mu.view(np.int64), u, counts, top)
        c = _at_lucb_scale(t, n, stop_delta, 1, 0.99, 0.5)
        want = at_lucb_pair(mu, u, top, t, stop_delta, 1, 0.99, 0.5)[2] < 0.0
        got = _stop_holds(mu, u, topl, fw[_UKEY], iw[_UHARM], stack, c, 0.0, c1, 1, st)
        assert got == want, (stop_delta, u2, c, c1)
        if stop_delta < 1e-3 and u2 == 100.0:  # the case the test is for
            key2 = mu[2] + np.sqrt(c1 / u2)
            assert c > c1 and not want and key2 < mu[0] - np.sqrt(c / u[0])
