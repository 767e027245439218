"""Problem instances: reward models, the papers' instance families and real crowd data.

:func:`make_instance` builds any named instance from a string ``NAME[:ARGS]`` where ``ARGS``
is a comma-separated list of ``key=value`` pairs; a bare value is the family's first
parameter. Lists use ``/`` (``custom:means=0.9/0.5/0.5``). Examples::

    make_instance("one_sparse:n=1000")            # JMNB14 1-sparse, Gaussian variance 1/4
    make_instance("lil_exp:n=1000,alpha=0.6")     # JMNB14 alpha = 0.6 scenario
    make_instance("lil_exp:n=1000,alpha=1,model=bernoulli")   # TNM17 Fig. 1
    make_instance("alpha_exp:n=100,k=50")         # JLQ17 best-K alpha-exponential
    make_instance("nsar:setup=3,m=4")             # ST17 setup 3
    make_instance("caption:558")                  # bundled caption contest, categorical {0, .5, 1}
    make_instance("caption:558,reward=binary")    # the same, funny or somewhat = 1 (TNM17's means)
    make_instance("caption:my/559_summary.csv")   # any caption-contest summary CSV, by path
    make_instance("means:arms.csv,model=gaussian")  # the 'mean' column of a CSV
    make_instance("rte:k=10")                     # the 164 RTE workers, Bernoulli accuracies

``instance_names()`` lists the names with a one-line description each.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian, RewardModel, RewardStream
from purebandits.instances.synthetic import (
    Hardness,
    Instance,
    alpha_exponential,
    custom,
    hardness,
    lil_exponential,
    nsar_setup,
    one_sparse,
    optmai_uniform,
    two_point,
)

__all__ = [
    "RewardModel",
    "Bernoulli",
    "Gaussian",
    "Categorical",
    "RewardStream",
    "Instance",
    "Hardness",
    "hardness",
    "make_instance",
    "instance_names",
    "caption",
    "rte",
]


def caption(contest: str = "558", k: int = 1, reward: str = "graded") -> Instance:
    """A caption contest with each caption's arm bootstrapped from its votes: a bundled one ("512", "558", "559") or
    a summary CSV by path (the public format, or any CSV with the columns ``funny``, ``somewhat_funny``,
    ``unfunny`` and ``caption``, e.g. the service's ``summary.csv``; see
    :func:`purebandits.instances.real.load_caption_summary`).

    ``reward="graded"`` (default) gives categorical arms on {unfunny 0, somewhat 1/2, funny 1}; ``reward="binary"``
    Bernoulli arms with p = (funny + somewhat funny) / votes, the mapping that gives TNM17 Sec. 5's best-caption
    means exactly (558: 0.536, 512: 0.8). Spec: ``caption:558,reward=binary``."""
    from dataclasses import replace

    from purebandits.instances.real import CAPTION_CONTESTS, caption_contest, load_caption_summary

    key = str(contest)
    if key in CAPTION_CONTESTS:
        c, what = caption_contest(key), f"caption contest {key}"
    elif Path(key).is_file():
        c, what = load_caption_summary(key), f"caption contest {key!r} (file)"
    else:
        raise ValueError(f"unknown caption contest {key!r}: neither bundled ({', '.join(sorted(CAPTION_CONTESTS))}) "
                         "nor a summary CSV file that exists")
    c = replace(c, reward=reward)
    name = f"caption:{contest}" + (f",k={k}" if k != 1 else "") + (f",reward={reward}" if reward != "graded" else "")
    votes = "funny or somewhat = 1, unfunny = 0" if reward == "binary" else "{0, 1/2, 1}"
    return Instance(name, c.model(), k, f"{what} ({c.n_arms} captions), bootstrapped votes, {votes}")


def means_file(path: str, k: int = 1, model: str = "bernoulli", variance: float = 0.25) -> Instance:
    """Arms with the means in a CSV file's ``mean`` column (Bernoulli by default, or Gaussian with ``variance``;
    see :func:`purebandits.instances.real.load_means`)."""
    from purebandits.instances.real import load_means

    try:
        inst = custom(load_means(str(path)), k=k, model=model, variance=variance)
    except ValueError as exc:
        if "Bernoulli" in str(exc):
            raise ValueError(f"{path}: {exc} (model=gaussian takes any means)") from None
        raise
    name = f"means:{path}" + "".join(f",{key}={v}" for key, v, d in (("k", k, 1), ("model", model, "bernoulli"),
                                                                      ("variance", variance, 0.25)) if v != d)
    return Instance(name, inst.model, inst.k, f"means from {path}")


def rte(k: int = 1) -> Instance:
    """The 164 RTE crowd workers (Snow et al. 2008) as Bernoulli arms with their accuracies (ZCL14 Sec. 6)."""
    from purebandits.instances.real import load_rte_workers

    w = load_rte_workers()
    return Instance("rte" + (f":k={k}" if k != 1 else ""), w.model(), k, "RTE crowd workers, accuracy vs gold")


#: name -> (factory, description)
_FAMILIES: dict[str, tuple[Callable[..., Instance], str]] = {
    "one_sparse": (one_sparse, "k arms at 1/2, the rest 0, Gaussian var 1/4 (JMNB14, JLQ17)"),
    "lil_exp": (lil_exponential, "mu_1 = 1, mu_i = 1 - ((i-1)/n)^alpha (JMNB14 alpha=0.3/0.6, JLQ17, TNM17)"),
    "alpha_exp": (alpha_exponential, "JLQ17 best-K alpha-exponential"),
    "uniform": (optmai_uniform, "Bernoulli theta_i ~ U[0,1] (ZCL14 instance 1)"),
    "two_point": (two_point, "Bernoulli 0.6 for the top K, 0.5 otherwise (ZCL14 instance 2)"),
    "nsar": (nsar_setup, "ST17 setups 1-6, K = 50 Bernoulli arms"),
    "custom": (custom, "user-given means, e.g. custom:means=0.9/0.5/0.4"),
    "caption": (caption, "caption contest 512, 558, 559 or a summary CSV by path (categorical {0, 1/2, 1}; "
                           "reward=binary: funny or somewhat = 1)"),
    "means": (means_file, "the means in a CSV file's 'mean' column, e.g. means:arms.csv (Bernoulli, or "
                          "model=gaussian)"),
    "rte": (rte, "164 RTE crowd workers, Bernoulli accuracies"),
}
_ALIASES = {"lil_exponential": "lil_exp", "alpha_exponential": "alpha_exp", "1-sparse": "one_sparse",
            "one-sparse": "one_sparse", "optmai_uniform": "uniform"}


def instance_names() -> dict[str, str]:
    """Known instance families, ``{name: description}``."""
    return {name: desc for name, (_, desc) in _FAMILIES.items()}


def _value(text: str) -> Any:
    if "/" in text:
        return [_value(t) for t in text.split("/") if t]
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def make_instance(spec: str | Instance) -> Instance:
    """Build an :class:`Instance` from ``"NAME[:key=value,...]"`` (see the module docstring).

    Raises
    ------
    ValueError
        For an unknown name or parameter (the message lists the allowed ones) or a bad value.
    """
    if isinstance(spec, Instance):
        return spec
    name, _, args = str(spec).strip().partition(":")
    name = _ALIASES.get(name.strip(), name.strip())
    if name not in _FAMILIES:
        raise ValueError(f"unknown instance {name!r}; known: {', '.join(_FAMILIES)}")
    factory = _FAMILIES[name][0]
    params = [p for p in inspect.signature(factory).parameters.values()
              if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    allowed = [p.name for p in params]
    kwargs: dict[str, Any] = {}
    for item in (a.strip() for a in args.split(",")) if args.strip() else ():
        if not item:
            continue
        key, eq, raw = item.partition("=")
        if not eq:
            key, raw = allowed[0], item
            if name in ("caption", "means"):
                raw = item  # contest ids and paths stay strings ("558")
        key = key.strip()
        if key not in allowed:
            raise ValueError(f"unknown parameter {key!r} for instance {name}; allowed: {allowed}")
        if key in kwargs:
            raise ValueError(f"parameter {key!r} given twice in {spec!r}")
        as_text = (name, key) in (("caption", "contest"), ("means", "path"))
        kwargs[key] = raw.strip() if as_text else _value(raw.strip())
    try:
        return factory(**kwargs)
    except TypeError as exc:  # e.g. a list where a number is needed
        raise ValueError(f"bad parameters for instance {name}: {exc}") from None
