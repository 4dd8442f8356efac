"""Tiny envs for pinning the runtime's contract by hand.

COUNTING: state ``count``; action ``a`` in {0, 1} adds ``1 + a``; reward is the new
count; terminated when the count reaches 4; obs ``[count]``; reset sets the count to 0.
With ``max_episode_steps=3`` an env that always plays 0 is truncated after 3 steps and
one that always plays 1 terminates after 2.

BOX_COUNTING: the same with a ``Box(-1, 1, (2,))`` action adding ``1 + sum(clip(a))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import EnvDefinition, StateField


@dataclass(frozen=True)
class CountingParams:
    terminate_at: float = 4.0


def _reset(params, u):
    return {"count": torch.zeros(u.shape[0], dtype=torch.float32, device=u.device)}


def _step_discrete(params, state, action):
    count = state["count"] + 1.0 + action.to(torch.float32)
    return {"count": count}, count.clone(), count >= params.terminate_at


def _step_box(params, state, action):
    count = state["count"] + 1.0 + action.clamp(-1.0, 1.0).sum(dim=1)
    return {"count": count}, count.clone(), count >= params.terminate_at


def _observe(params, state):
    return state["count"][:, None].clone()


def _obs_space(params):
    return gym.spaces.Box(0.0, np.inf, (1,), np.float32)


COUNTING = EnvDefinition(
    name="counting", params_type=CountingParams, state_fields=(StateField("count"),),
    observation_space=_obs_space, action_space=lambda p: gym.spaces.Discrete(2),
    num_reset_draws=lambda p: 1, reset=_reset, step=_step_discrete, observe=_observe,
    max_episode_steps=3,
)

BOX_COUNTING = EnvDefinition(
    name="box_counting", params_type=CountingParams, state_fields=(StateField("count"),),
    observation_space=_obs_space,
    action_space=lambda p: gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
    num_reset_draws=lambda p: 1, reset=_reset, step=_step_box, observe=_observe,
    max_episode_steps=3,
)
