"""MountainCar, batched: Gymnasium's MountainCar-v0 dynamics in float32.

## Description
A car sits at the bottom of a sinusoidal valley (Moore 1990). Its engine is too weak
to climb the right hill directly: it must rock back and forth to build momentum and
reach the flag on top of the right hill.

## Action Space
``Discrete(3)``: 0 accelerates to the left, 1 does not accelerate, 2 accelerates to
the right.

## Observation Space
``Box(2,)`` float32: the car's position in ``[-1.2, 0.6]`` and velocity in
``[-0.07, 0.07]``.

## Rewards
-1 for every step, the terminating one included.

## Starting State
Position uniform in ``[reset_low, reset_high)`` (``[-0.6, -0.4)``), drawn from the
seeded counter-based RNG (:mod:`gpu_vecenv.seeding`); velocity 0.

## Episode End
Terminated when the position is ``>= goal_position`` (0.5) and the velocity
``>= goal_velocity`` (0); truncated after ``max_episode_steps`` (200 for
GPUMountainCar-v0).

## Arguments
The fields of :class:`MountainCarParams`, as keyword arguments of
``gymnasium.make_vec("GPUMountainCar-v0", num_envs=..., **params)``; ``goal_velocity``
is Gymnasium's argument of the same name.

## Version History
- v0: Gymnasium MountainCar-v0 dynamics, float32 state.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import EnvDefinition, State, StateField
from gpu_vecenv.kernel_binding import Consts, KernelBinding, f32
from gpu_vecenv.rendering import gymnasium_renderer
from gpu_vecenv.seeding import uniform


@dataclass(frozen=True)
class MountainCarParams:
    """Physical constants of MountainCar (Gymnasium's values)."""

    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = 0.07
    goal_position: float = 0.5
    goal_velocity: float = 0.0
    force: float = 0.001
    """Velocity change per step of a push (actions 0 and 2)."""
    gravity: float = 0.0025
    """Scale of the slope's pull, ``cos(3 * position) * gravity`` per step."""
    reset_low: float = -0.6
    reset_high: float = -0.4
    """The initial position is uniform in [reset_low, reset_high)."""


STATE_FIELDS = (StateField("position"), StateField("velocity"))


def observation_space(params: MountainCarParams) -> gym.spaces.Box:
    low = np.array([params.min_position, -params.max_speed], dtype=np.float32)
    high = np.array([params.max_position, params.max_speed], dtype=np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def action_space(params: MountainCarParams) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(3)


def num_reset_draws(params: MountainCarParams) -> int:
    return 1


def reset(params: MountainCarParams, u: torch.Tensor) -> State:
    """Initial states from uniforms ``u`` of shape ``(n, 1)``."""
    position = uniform(u[:, 0], params.reset_low, params.reset_high).contiguous()
    return {"position": position, "velocity": torch.zeros_like(position)}


def step(
    params: MountainCarParams, state: State, action: torch.Tensor
) -> tuple[State, torch.Tensor, torch.Tensor]:
    """One step. ``action``: ``(n,)`` int64 in {0, 1, 2}."""
    position, velocity = state["position"], state["velocity"]
    push = (action - 1).to(position.dtype)
    velocity = velocity + (push * params.force + torch.cos(3 * position) * (-params.gravity))
    velocity = torch.clamp(velocity, -params.max_speed, params.max_speed)
    position = position + velocity
    position = torch.clamp(position, params.min_position, params.max_position)
    # Inelastic collision with the left wall. Comparing float32 with a Python float
    # rounds the float to float32, so the clamped position compares equal.
    at_wall = (position == params.min_position) & (velocity < 0)
    velocity = torch.where(at_wall, torch.zeros_like(velocity), velocity)
    terminated = (position >= params.goal_position) & (velocity >= params.goal_velocity)
    reward = torch.full_like(position, -1.0)
    return {"position": position, "velocity": velocity}, reward, terminated


def observe(params: MountainCarParams, state: State) -> torch.Tensor:
    """``(n, 2)`` float32: position, velocity."""
    return torch.stack([state["position"], state["velocity"]], dim=-1)


def kernel_consts(p: MountainCarParams) -> Consts:
    """The ``Consts`` of ``cuda_src/mountain_car.cu`` (``MOUNTAIN_CAR_CONSTS``), in its
    order, float32."""
    return [
        ("min_position", f32(p.min_position)),
        ("max_position", f32(p.max_position)),
        ("max_speed", f32(p.max_speed)),
        ("goal_position", f32(p.goal_position)),
        ("goal_velocity", f32(p.goal_velocity)),
        ("force", f32(p.force)),
        ("neg_gravity", f32(-p.gravity)),
        ("reset_low", f32(p.reset_low)),
        ("reset_high", f32(p.reset_high)),
    ]


DEFINITION = EnvDefinition(
    name="mountain_car",
    params_type=MountainCarParams,
    state_fields=STATE_FIELDS,
    observation_space=observation_space,
    action_space=action_space,
    num_reset_draws=num_reset_draws,
    reset=reset,
    step=step,
    observe=observe,
    max_episode_steps=200,
    kernel_binding=KernelBinding("mountain_car", kernel_consts),
    render_fps=30,
    render_frame=gymnasium_renderer(
        "gymnasium.envs.classic_control.mountain_car:MountainCarEnv",
        [f.name for f in STATE_FIELDS],
    ),
)
