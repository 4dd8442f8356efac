"""The allowed range of every numeric config key, checked when a config is loaded.

A learning rate of 0 or below, a negative clip coefficient or a discount above 1 is not
a setting a run can learn with; each is refused by name before anything is built, e.g.
``ppo.learning_rate must be > 0, got -0.001``. That a float is finite is checked earlier,
where it is read (:func:`gpu_vecenv.train.config_loading.build_section`). ``null`` (where
a key allows it) and ``auto`` are not numbers and are not range-checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpu_vecenv.train.config import A2CConfig, DDPGConfig, PPOConfig, TrainerConfig


@dataclass(frozen=True)
class Range:
    """An interval of allowed values; ``low_open``/``high_open`` exclude the end."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")


POSITIVE = Range(0.0, low_open=True)
NON_NEGATIVE = Range(0.0)
AT_LEAST_ONE = Range(1.0)
UNIT = Range(0.0, 1.0)
"""[0, 1]: discounts and GAE's lambda."""
FRACTION = Range(0.0, 1.0, low_open=True)
"""(0, 1]: a share that cannot be zero (soft-update rate, memory fraction)."""

_SHARED = {"gamma": UNIT, "reward_scale": POSITIVE, "max_grad_norm": POSITIVE}
_ON_POLICY = {**_SHARED, "num_steps": AT_LEAST_ONE, "learning_rate": POSITIVE,
              "gae_lambda": UNIT, "ent_coef": NON_NEGATIVE, "vf_coef": NON_NEGATIVE}

RANGES: dict[type, dict[str, Range]] = {
    TrainerConfig: {
        "num_envs": AT_LEAST_ONE, "num_envs_global": AT_LEAST_ONE, "total_steps": AT_LEAST_ONE,
        "autoscale_max_envs": AT_LEAST_ONE, "autoscale_memory_fraction": FRACTION,
        "log_interval": AT_LEAST_ONE, "checkpoint_interval": NON_NEGATIVE,
        "eval_episodes": NON_NEGATIVE, "stop_check_episodes": NON_NEGATIVE,
        "progress_interval": NON_NEGATIVE, "torch_threads": NON_NEGATIVE,
    },
    PPOConfig: {**_ON_POLICY, "update_epochs": AT_LEAST_ONE,
                "num_minibatches": AT_LEAST_ONE, "clip_coef": POSITIVE,
                "target_kl": NON_NEGATIVE},  # 0: stop after the first minibatch step
    A2CConfig: _ON_POLICY,
    DDPGConfig: {
        **_SHARED, "actor_learning_rate": POSITIVE, "critic_learning_rate": POSITIVE,
        "tau": FRACTION, "buffer_size": AT_LEAST_ONE, "batch_size": AT_LEAST_ONE,
        "learning_starts": NON_NEGATIVE, "train_frequency": AT_LEAST_ONE,
        "gradient_steps": NON_NEGATIVE, "policy_delay": AT_LEAST_ONE,
        "noise_std": NON_NEGATIVE, "ou_theta": NON_NEGATIVE,
    },
}
"""config class -> key -> allowed range (keys not listed: any value of their type)."""


def check_ranges(section: Any, where: str) -> None:
    """``ValueError`` naming the first key of ``section`` (a config dataclass instance,
    called ``where`` in messages: ``ppo``, ``policies.tagger.ppo``) outside its range."""
    for key, allowed in RANGES.get(type(section), {}).items():
        value = getattr(section, key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # null or auto
        if value not in allowed:
            raise ValueError(f"{where}.{key} must be {allowed}, got {value}")
