"""MountainCarContinuous, batched: Gymnasium's MountainCarContinuous-v0 in float32.

## Description
A car sits at the bottom of a sinusoidal valley (Moore 1990) and must rock back and
forth to reach the flag on top of the right hill, here with a continuous engine force
and a penalty on the force used.

## Action Space
``Box(-1, 1, (1,))`` float32: the directional force, multiplied by ``power``. Values
outside ``[min_action, max_action]`` are clipped inside the step, as in Gymnasium
(the reward's penalty uses the unclipped value, as Gymnasium's does; in float32 it is
-inf beyond about 1.8e19); NaN and ±inf are rejected by the runtime.

## Observation Space
``Box(2,)`` float32: the car's position in ``[-1.2, 0.6]`` and velocity in
``[-0.07, 0.07]``.

## Rewards
``-0.1 * action**2`` every step, plus 100 on the step that reaches the goal.

## Starting State
Position uniform in ``[reset_low, reset_high)`` (``[-0.6, -0.4)``), drawn from the
seeded counter-based RNG (:mod:`gpu_vecenv.seeding`); velocity 0.

## Episode End
Terminated when the position is ``>= goal_position`` (0.45) and the velocity
``>= goal_velocity`` (0); truncated after ``max_episode_steps`` (999 for
GPUMountainCarContinuous-v0).

## Arguments
The fields of :class:`MountainCarContinuousParams`, as keyword arguments of
``gymnasium.make_vec("GPUMountainCarContinuous-v0", num_envs=..., **params)``;
``goal_velocity`` is Gymnasium's argument of the same name.

## Version History
- v0: Gymnasium MountainCarContinuous-v0 dynamics, float32 state.
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
class MountainCarContinuousParams:
    """Physical constants of MountainCarContinuous (Gymnasium's values)."""

    min_action: float = -1.0
    max_action: float = 1.0
    min_position: float = -1.2
    max_position: float = 0.6
    max_speed: float = 0.07
    goal_position: float = 0.45
    goal_velocity: float = 0.0
    power: float = 0.0015
    """Velocity change per step per unit of (clipped) action."""
    gravity: float = 0.0025
    """Scale of the slope's pull, ``gravity * cos(3 * position)`` per step."""
    goal_reward: float = 100.0
    """Added to the reward of the step that reaches the goal."""
    action_cost: float = 0.1
    """The reward of every step is reduced by ``action_cost * action**2``."""
    reset_low: float = -0.6
    reset_high: float = -0.4
    """The initial position is uniform in [reset_low, reset_high)."""


STATE_FIELDS = (StateField("position"), StateField("velocity"))


def observation_space(params: MountainCarContinuousParams) -> gym.spaces.Box:
    low = np.array([params.min_position, -params.max_speed], dtype=np.float32)
    high = np.array([params.max_position, params.max_speed], dtype=np.float32)
    return gym.spaces.Box(low, high, dtype=np.float32)


def action_space(params: MountainCarContinuousParams) -> gym.spaces.Box:
    return gym.spaces.Box(
        low=params.min_action, high=params.max_action, shape=(1,), dtype=np.float32
    )


def num_reset_draws(params: MountainCarContinuousParams) -> int:
    return 1


def reset(params: MountainCarContinuousParams, u: torch.Tensor) -> State:
    """Initial states from uniforms ``u`` of shape ``(n, 1)``."""
    position = uniform(u[:, 0], params.reset_low, params.reset_high).contiguous()
    return {"position": position, "velocity": torch.zeros_like(position)}


def step(
    params: MountainCarContinuousParams, state: State, action: torch.Tensor
) -> tuple[State, torch.Tensor, torch.Tensor]:
    """One step. ``action``: ``(n, 1)`` float32, finite, any magnitude."""
    position, velocity = state["position"], state["velocity"]
    raw = action[:, 0]
    force = torch.clamp(raw, params.min_action, params.max_action)
    velocity = velocity + (force * params.power - params.gravity * torch.cos(3 * position))
    velocity = torch.clamp(velocity, -params.max_speed, params.max_speed)
    position = position + velocity
    position = torch.clamp(position, params.min_position, params.max_position)
    # Inelastic collision with the left wall (the float compares as float32).
    at_wall = (position == params.min_position) & (velocity < 0)
    velocity = torch.where(at_wall, torch.zeros_like(velocity), velocity)
    terminated = (position >= params.goal_position) & (velocity >= params.goal_velocity)
    bonus = torch.where(terminated, params.goal_reward, 0.0).to(torch.float32)
    reward = bonus - (raw * raw) * params.action_cost
    return {"position": position, "velocity": velocity}, reward, terminated


def observe(params: MountainCarContinuousParams, state: State) -> torch.Tensor:
    """``(n, 2)`` float32: position, velocity."""
    return torch.stack([state["position"], state["velocity"]], dim=-1)


def kernel_consts(p: MountainCarContinuousParams) -> Consts:
    """The ``Consts`` of ``cuda_src/mountain_car_continuous.cu``
    (``MOUNTAIN_CAR_CONTINUOUS_CONSTS``), in its order, float32."""
    return [
        ("min_action", f32(p.min_action)),
        ("max_action", f32(p.max_action)),
        ("min_position", f32(p.min_position)),
        ("max_position", f32(p.max_position)),
        ("max_speed", f32(p.max_speed)),
        ("goal_position", f32(p.goal_position)),
        ("goal_velocity", f32(p.goal_velocity)),
        ("power", f32(p.power)),
        ("gravity", f32(p.gravity)),
        ("goal_reward", f32(p.goal_reward)),
        ("action_cost", f32(p.action_cost)),
        ("reset_low", f32(p.reset_low)),
        ("reset_high", f32(p.reset_high)),
    ]


DEFINITION = EnvDefinition(
    name="mountain_car_continuous",
    params_type=MountainCarContinuousParams,
    state_fields=STATE_FIELDS,
    observation_space=observation_space,
    action_space=action_space,
    num_reset_draws=num_reset_draws,
    reset=reset,
    step=step,
    observe=observe,
    max_episode_steps=999,
    kernel_binding=KernelBinding("mountain_car_continuous", kernel_consts),
    render_fps=30,
    render_frame=gymnasium_renderer(
        "gymnasium.envs.classic_control.continuous_mountain_car:Continuous_MountainCarEnv",
        [f.name for f in STATE_FIELDS],
    ),
)
