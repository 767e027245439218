"""What the caption-contest experiments share: contest instances restricted to their best captions.

A shared module (no ``EXPERIMENT``), so an experiment can build the same instance without
importing a sibling experiment module.
"""

from __future__ import annotations

import numpy as np

from purebandits.instances import Categorical, Instance, caption

__all__ = ["top_m_contest"]


def top_m_contest(contest: str, m: int, k: int) -> Instance:
    """Contest ``contest`` restricted to its ``m`` best captions (by true mean), categorical arms.

    Rewards are graded: unfunny 0, somewhat funny 1/2, funny 1, drawn with each caption's vote
    frequencies (``caption(contest)``'s default). The restriction keeps the hardest part of a
    contest, the near-ties at the top; ties in the mean are broken by the lower caption index.
    """
    full = caption(contest)
    model = full.model
    keep = np.sort(np.lexsort((np.arange(full.n_arms), -full.means))[:m])
    sub = Categorical(model.probabilities[keep], model.values)
    return Instance(f"caption:{contest},top{m}", sub, k, f"caption contest {contest}, top {m} of {full.n_arms}")
