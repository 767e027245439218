"""Comparing two learners' states without serialising them.

The equality tests that hold a fast path to its rule compare the two learners after every event. Comparing
``state_json()`` strings does that exactly, but it encodes every array to JSON twice per event (two thirds of
those tests' time). :func:`state_difference` compares the same content directly: it reports a difference
whenever ``state_json()`` would (and also on differing NaN payloads, which JSON cannot show).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from purebandits.base import Learner

__all__ = ["state_difference", "assert_same_state"]


def _plain(value: Any) -> Any:
    """NumPy scalars as the Python scalars JSON writes them as; tuples as lists (JSON has only arrays)."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, tuple):
        return list(value)
    return value


_EXACT = (int, str, bool, type(None))


def _difference(x: Any, y: Any, path: str) -> str | None:
    tx = type(x)
    if tx is type(y):  # the common cases first: the per-event comparisons are hot loops of the tests
        if tx is np.ndarray and x.dtype != object:
            if x.dtype != y.dtype or x.shape != y.shape:
                return f"{path}: array {x.dtype}{x.shape} against {y.dtype}{y.shape}"
            if x.tobytes() == y.tobytes():
                return None
            return f"{path}: arrays differ at {np.argwhere(x != y)[:3].tolist()}"
        if tx in _EXACT:
            return None if x == y else f"{path}: {x!r} against {y!r}"
        if tx is float and x == y and x != 0.0:
            return None
    x, y = _plain(x), _plain(y)
    if type(x) is not type(y):
        return f"{path}: {type(x).__name__} against {type(y).__name__}"
    if isinstance(x, np.ndarray):
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{path}: array {x.dtype}{x.shape} against {y.dtype}{y.shape}"
        same = x.tolist() == y.tolist() if x.dtype == object else x.tobytes() == y.tobytes()
        return None if same else f"{path}: arrays differ at {np.argwhere(x != y)[:3].tolist()}"
    if isinstance(x, np.random.Generator):
        return None if x.bit_generator.state == y.bit_generator.state else f"{path}: generator states differ"
    if isinstance(x, list):
        if len(x) != len(y):
            return f"{path}: lengths {len(x)} and {len(y)}"
        for i, (a, b) in enumerate(zip(x, y, strict=True)):
            if (d := _difference(a, b, f"{path}[{i}]")) is not None:
                return d
        return None
    if isinstance(x, dict):
        if set(map(str, x)) != set(map(str, y)):
            return f"{path}: keys {sorted(map(str, x))} against {sorted(map(str, y))}"
        ys = {str(k): v for k, v in y.items()}
        for k, v in x.items():
            if (d := _difference(v, ys[str(k)], f"{path}[{k!r}]")) is not None:
                return d
        return None
    if isinstance(x, float):
        same = (x == y and math.copysign(1, x) == math.copysign(1, y)) or (math.isnan(x) and math.isnan(y))
        return None if same else f"{path}: {x!r} against {y!r}"
    return None if x == y else f"{path}: {x!r} against {y!r}"


#: ``_state_names()`` by (class, attribute names): it is a function of those, and the per-event comparisons ask it of
#: the same few layouts millions of times (a sorted scan of ``vars()`` each time otherwise)
_NAMES: dict[tuple, list[str]] = {}


def _state_names(learner: Learner) -> list[str]:
    key = (type(learner), *learner.__dict__)
    names = _NAMES.get(key)
    if names is None:
        if len(_NAMES) > 256:
            _NAMES.clear()
        names = _NAMES[key] = learner._state_names()
    return names


def state_difference(a: Learner, b: Learner) -> str | None:
    """Where two started learners' states differ (the first difference found), or None when ``a.state_json()``
    equals ``b.state_json()``: the same class name, parameters and ``*_`` attributes."""
    if (a.name or type(a).__name__) != (b.name or type(b).__name__):
        return f"learner {a.name or type(a).__name__} against {b.name or type(b).__name__}"
    pa, pb = a.get_params(), b.get_params()
    # the parameters are almost always equal plain values: one dict comparison (types checked too, as JSON would)
    try:
        same = pa.keys() == pb.keys() and all(type(v) is type(pb[k]) for k, v in pa.items()) and bool(pa == pb)
    except ValueError:  # an array-valued parameter: compared below
        same = False
    if not same and (d := _difference(pa, pb, "params")) is not None:
        return d
    names, other = _state_names(a), _state_names(b)
    if names != other:
        return f"state attributes {names} against {other}"
    for k in names:
        if (d := _difference(getattr(a, k), getattr(b, k), k)) is not None:
            return d
    return None


def assert_same_state(a: Learner, b: Learner, context: object = "") -> None:
    """Fail with the first differing attribute unless ``a`` and ``b`` have the same state (see
    :func:`state_difference`)."""
    a._require_started()
    b._require_started()
    d = state_difference(a, b)
    assert d is None, f"{context}: {d}" if context != "" else d
