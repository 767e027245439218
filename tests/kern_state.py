"""A quicker :func:`~purebandits.testing.state.assert_same_state` for equality tests that compare after every event.

:func:`same_state` gives assert_same_state's verdict and message: its quick check passes only where
:func:`~purebandits.testing.state.state_difference` would return None (the same class and name, parameters equal
with equal types, the same attribute names, and every ``*_`` attribute equal by the module's own ``_difference``);
anything else goes to assert_same_state itself. It saves two of the three ``_state_names`` scans per comparison
(the names are a function of the class and the instance's attribute names, so they are looked up by those).
"""

from __future__ import annotations

from purebandits.testing.state import _difference, assert_same_state

_NAMES: dict[tuple, list[str]] = {}


def _state_names(learner) -> list[str]:
    """``learner._state_names()``, a function of its attribute names (the same for a class), looked up by them."""
    keys = (type(learner), *learner.__dict__)
    names = _NAMES.get(keys)
    if names is None:
        if len(_NAMES) > 256:
            _NAMES.clear()
        names = _NAMES[keys] = learner._state_names()
    return names


def _quick_same(a, b) -> bool:
    if type(a) is not type(b) or a.name != b.name or not hasattr(a, "n_arms_") or not hasattr(b, "n_arms_"):
        return False
    names = _state_names(a)
    if names != _state_names(b):
        return False
    pa, pb = a.get_params(), b.get_params()
    try:
        same = pa.keys() == pb.keys() and all(type(v) is type(pb[k]) for k, v in pa.items()) and bool(pa == pb)
    except ValueError:
        return False
    if not same:
        return False
    for k in names:
        if _difference(getattr(a, k), getattr(b, k), k) is not None:
            return False
    return True


def same_state(a, b, context: object = "") -> None:
    """assert_same_state(a, b, context), quicker when the states are equal."""
    if not _quick_same(a, b):
        assert_same_state(a, b, context)
