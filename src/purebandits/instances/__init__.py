"""Problem instances: reward models, the papers' instance families and real crowd data."""

from purebandits.instances.rewards import Bernoulli, Categorical, Gaussian, RewardModel, RewardStream

__all__ = ["RewardModel", "Bernoulli", "Gaussian", "Categorical", "RewardStream"]
