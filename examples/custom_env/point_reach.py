"""PointReach: push a point mass along a line onto a target. The custom-env tutorial's env
(docs/custom_env.md); every part of a gpu_vecenv env in one screen.

## Action Space
``Discrete(3)``: 0 pushes left, 1 does nothing, 2 pushes right (force ``force``).

## Observation Space
``Box(3,)`` float32: position (±1), velocity (±``max_speed``), target minus position (±2).

## Rewards
``-|position - target|`` every step.

## Starting State
Position and target uniform in ``[-1, 1)``, velocity 0.

## Episode End
Terminated within ``goal_tolerance`` of the target at a speed below ``speed_tolerance``;
truncated after 200 steps.

## Registration
Importing this module registers ``PointReach-v0``; ``"point_reach:PointReach-v0"`` imports
it and names the env (run from this folder, or put it on ``PYTHONPATH``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

import gpu_vecenv
from gpu_vecenv.definition import EnvDefinition, State, StateField
from gpu_vecenv.kernel_binding import KernelBinding
from gpu_vecenv.seeding import uniform


@dataclass(frozen=True)
class PointReachParams:
    """Constants only; anything derived from them is computed where it is used."""

    force: float = 1.0
    dt: float = 0.05
    max_speed: float = 1.0
    goal_tolerance: float = 0.05
    speed_tolerance: float = 0.1


STATE_FIELDS = (StateField("position"), StateField("velocity"), StateField("target"))


def observation_space(p: PointReachParams) -> gym.spaces.Box:
    high = np.array([1.0, p.max_speed, 2.0], dtype=np.float32)
    return gym.spaces.Box(-high, high, dtype=np.float32)


def action_space(p: PointReachParams) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(3)


def num_reset_draws(p: PointReachParams) -> int:
    return 2  # position and target; the velocity starts at 0


def reset(p: PointReachParams, u: torch.Tensor) -> State:
    """Initial states from uniforms ``u`` of shape ``(n, 2)``."""
    return {"position": uniform(u[:, 0], -1.0, 1.0),
            "velocity": torch.zeros_like(u[:, 0]),
            "target": uniform(u[:, 1], -1.0, 1.0)}


def step(p: PointReachParams, state: State, action: torch.Tensor):
    """One step. ``action``: ``(n,)`` int64 in {0, 1, 2}. Returns new tensors (never
    writes into ``state``)."""
    push = (action - 1).to(torch.float32) * p.force
    velocity = torch.clamp(state["velocity"] + push * p.dt, -p.max_speed, p.max_speed)
    position = torch.clamp(state["position"] + velocity * p.dt, -1.0, 1.0)
    distance = torch.abs(position - state["target"])
    terminated = (distance < p.goal_tolerance) & (torch.abs(velocity) < p.speed_tolerance)
    new_state = {"position": position, "velocity": velocity, "target": state["target"]}
    return new_state, -distance, terminated


def observe(p: PointReachParams, state: State) -> torch.Tensor:
    """``(n, 3)`` float32: position, velocity, target - position."""
    return torch.stack([state["position"], state["velocity"],
                        state["target"] - state["position"]], dim=-1)


def kernel_consts(p: PointReachParams) -> list[tuple[str, np.float32]]:
    """The ``Consts`` of point_reach.cu (``POINT_REACH_CONSTS``), field by field in its
    order, rounded to float32; the CUDA backend checks the two lists match when it loads."""
    return [(name, np.float32(getattr(p, name)))
            for name in ("force", "dt", "max_speed", "goal_tolerance", "speed_tolerance")]


DEFINITION = EnvDefinition(
    name="point_reach",
    params_type=PointReachParams,
    state_fields=STATE_FIELDS,
    observation_space=observation_space,
    action_space=action_space,
    num_reset_draws=num_reset_draws,
    reset=reset,
    step=step,
    observe=observe,
    max_episode_steps=200,
    # The CUDA backend compiles this file (cuda_src/common/ headers on the include path).
    kernel_binding=KernelBinding(
        "point_reach", kernel_consts, path=str(Path(__file__).with_name("point_reach.cu"))
    ),
)


# Importing this module registers the env (as Gymnasium's own env modules do), so that
# "point_reach:PointReach-v0" names it anywhere an id goes: gpu_vecenv.make_vec,
# gymnasium.make_vec, the trainer's config, `gpu-vecenv train --env point_reach:PointReach-v0`.
gpu_vecenv.register("PointReach-v0", DEFINITION)
