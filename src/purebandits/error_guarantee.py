"""What a learner's ``delta`` promises about its answer, in the terms of the person who asked for it.

An experiment's owner asks for an error probability ("wrong with probability at most 0.05"). A
learner's parameter ``delta`` is not always that number: lil-KLUCB's proof (Tanczos, Nowak,
Mankoff 2017, Thm 1) bounds the error by ``2 delta``, so the service runs it with
``delta = 0.05 / 2`` (:meth:`purebandits.base.Learner.error_factor`; with ``stop="kinf"`` its stop is the
K_inf GLR test, proven for an error of at most delta). And some learners promise
nothing: heuristic presets drop the proof's constants, the practical GLR threshold is not proven,
fixed-budget learners stop after a number of answers whatever the evidence, and the contest
systems never stop. :func:`error_guarantee` says which case a learner is in, from its class and
parameters only (no state), in one sentence an owner can read.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from purebandits.base import Learner

__all__ = ["ErrorGuarantee", "error_guarantee"]

#: the proof behind ``error_per_delta = 2`` (the only learners whose factor is not 1)
_TWO_DELTA_SOURCE = "Tanczos, Nowak and Mankoff 2017, Thm 1"


@dataclasses.dataclass(frozen=True)
class ErrorGuarantee:
    """A learner's error probability as the owner reads it, and the parameter it runs with.

    Attributes
    ----------
    error_probability : float or None
        The error probability the owner asked for, ``learner_delta * error_per_delta``; None for
        a learner that takes no ``delta`` (it cannot be asked one).
    learner_delta : float or None
        The learner's own parameter ``delta`` (None if it has none or it is switched off).
    error_per_delta : float
        The learner's proven error is at most ``error_per_delta * delta`` (1 for most; 2 for lil-KLUCB and
        KL-RandLUCB with their bounds' stop).
    proven : bool
        True when a published proof bounds the error of this learner, with these parameters, by
        ``error_probability``.
    note : str
        One or two sentences for the owner: why the parameter differs from the asked value, or why the
        asked value is not guaranteed.
    """

    error_probability: float | None
    learner_delta: float | None
    error_per_delta: float
    proven: bool
    note: str

    def as_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict, ``note`` as ``delta_note`` (the service's field name)."""
        out = dataclasses.asdict(self)
        out["delta_note"] = out.pop("note")
        return out


def _source(learner: Learner) -> str:
    """Where the proof of the learner's stop is: the GLR learners' proven thresholds have their own source;
    otherwise the paper the learner follows, without the equation details in parentheses."""
    if getattr(learner, "stop", None) == "kinf" and getattr(learner, "threshold", "theory") == "theory":
        return "its K_inf GLR statistic against the Krichevsky-Trofimov threshold, proven whatever the sampling, and " \
               "for the KL learners their bounds on the pairs it does not settle; docs/glr_stopping.md"
    if getattr(learner, "threshold", None) == "theory":
        return "GK16's threshold log(2 t (n-1)/delta), Garivier and Kaufmann 2016, Thm 10"
    paper = type(learner).paper or type(learner).__name__
    return "its paper: " + paper.split(" (", 1)[0]


def _pac_epsilon(learner: Learner) -> float:
    """The PAC tolerance of the learner's stop (0 for exact identification); the LIL learners' ``epsilon`` is a
    constant of their bound, not a tolerance, which the LUCB family's ``_eps_stop`` tells apart."""
    from purebandits.algorithms.elimination import MedianElimination
    from purebandits.algorithms.lucb import _LUCBFamily

    if isinstance(learner, _LUCBFamily):
        return float(learner._eps_stop())
    if isinstance(learner, MedianElimination):
        return float(learner.epsilon)
    return 0.0


def _unproven_reason(learner: Learner) -> str | None:
    """Why this learner's stop carries no proven error bound, or None when it does."""
    cls = type(learner)
    if cls.tags.get("never_stops"):
        return ("it never stops by itself (it keeps ranking until the owner stops the experiment), so no error "
                "probability applies to its answer")
    if cls.kind == "fixed_budget":
        return ("it stops after a fixed budget of answers whatever the evidence; its chance of being wrong depends "
                "on the budget and on how close the items are, not on an asked error probability")
    delta = getattr(learner, "delta", None)
    if delta is None:
        return ("it runs without an error probability (delta = None): it stops at its budget or when the owner "
                "stops it")
    if getattr(learner, "preset", None) == "heuristic":
        return ("it runs the heuristic preset, which drops constants the proof needs to stop sooner, so nothing "
                "bounds its error by delta (preset=faithful is the proven form)")
    threshold = getattr(learner, "threshold", None)
    if threshold == "practical" and getattr(learner, "stop", "glr") == "kinf":
        return ("its K_inf GLR statistic is tested against the practical threshold log((log t + 1)/delta), not a "
                "proven one (threshold=theory is the proven threshold for that statistic)")
    if threshold == "practical":
        return ("its GLR threshold log((log t + 1)/delta) is the one used in practice, not a proven one "
                "(threshold=theory is Garivier and Kaufmann 2016's proven log(2 t (n-1)/delta))")
    if threshold == "theory" and getattr(learner, "stop", "glr") == "glr" \
            and getattr(learner, "cost", "bernoulli") != "bernoulli":
        return ("Garivier and Kaufmann 2016 (Thm 10) prove the threshold log(2 t (n-1)/delta) for the Bernoulli "
                f"statistic; this learner tests it with the {learner.cost} statistic, for which it is not proven")
    return None


def error_guarantee(learner: Learner) -> ErrorGuarantee:
    """What ``learner``'s ``delta`` promises (from its class and parameters; it need not be started).

    Raises ValueError if ``learner`` is not a :class:`~purebandits.base.Learner`.
    """
    if not isinstance(learner, Learner):
        raise ValueError(f"error_guarantee needs a Learner, got {type(learner).__name__}")
    cls = type(learner)
    factor = float(cls.error_factor(learner.get_params()))
    raw = getattr(learner, "delta", None)
    delta = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
    asked = None if delta is None else delta * factor
    why_not = _unproven_reason(learner)
    if why_not is not None:
        if asked is None:
            note = f"No error probability is guaranteed: {why_not}."
        else:
            note = (f"The asked error probability {asked:g} is not guaranteed: {why_not}. It runs with its "
                    f"parameter delta = {delta:g}.")
        return ErrorGuarantee(asked, delta, factor, False, note)
    assert asked is not None and delta is not None  # _unproven_reason covers delta = None
    if factor != 1.0:
        note = (f"Wrong with probability at most {asked:g}. It runs with its parameter delta = {delta:g} "
                f"because its proof bounds the error by {factor:g} x delta ({_TWO_DELTA_SOURCE}).")
    else:
        note = (f"Wrong with probability at most {asked:g}: the proof of its stopping rule bounds the error by "
                f"delta, so it runs with delta = {delta:g} ({_source(learner)}).")
    eps = _pac_epsilon(learner)
    if eps > 0:
        note += f" With epsilon = {eps:g} the promise is an answer within {eps:g} of the best (PAC)."
    return ErrorGuarantee(asked, delta, factor, True, note)
