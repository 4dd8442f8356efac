"""Pendulum, batched: Gymnasium's Pendulum-v1 dynamics in float32.

## Description
The inverted-pendulum swing-up: a pendulum hangs from a fixed pivot, its free end
driven by a torque. Swing it up and keep it upright (angle 0), centre of gravity right
above the pivot.

## Action Space
``Box(-2, 2, (1,))`` float32: the torque (N m, positive counter-clockwise). Values
outside ``[-max_torque, max_torque]`` are clipped inside the step, as in Gymnasium;
NaN and ±inf are rejected by the runtime.

## Observation Space
``Box(3,)`` float32: ``cos(theta)``, ``sin(theta)`` (±1) and the angular velocity
(±8).

## Rewards
``-(theta**2 + 0.1 * theta_dot**2 + 0.001 * torque**2)`` with ``theta`` normalized to
``[-pi, pi)`` and the clipped torque, both taken before the step: between
-16.2736044 and 0.

## Starting State
``theta`` uniform in ``[-reset_angle_bound, reset_angle_bound)`` (±pi) and
``theta_dot`` uniform in ``[-reset_speed_bound, reset_speed_bound)`` (±1), drawn from
the seeded counter-based RNG (:mod:`gpu_vecenv.seeding`).

## Episode End
Never terminated; truncated after ``max_episode_steps`` (200 for GPUPendulum-v1).

## Arguments
The fields of :class:`PendulumParams`, as keyword arguments of
``gymnasium.make_vec("GPUPendulum-v1", num_envs=..., **params)``; ``g`` is
Gymnasium's argument of the same name (10.0; WarpDrive's 9.81 is not the default).

## Version History
- v1: Gymnasium Pendulum-v1 dynamics, float32 state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import EnvDefinition, State, StateField
from gpu_vecenv.kernel_binding import Consts, KernelBinding, f32
from gpu_vecenv.rendering import gymnasium_renderer
from gpu_vecenv.seeding import uniform


@dataclass(frozen=True)
class PendulumParams:
    """Physical constants of Pendulum (Gymnasium's values)."""

    g: float = 10.0
    """Acceleration of gravity (Gymnasium's ``g``)."""
    mass: float = 1.0
    length: float = 1.0
    dt: float = 0.05
    max_speed: float = 8.0
    max_torque: float = 2.0
    reset_angle_bound: float = math.pi
    """The initial angle is uniform in [-reset_angle_bound, reset_angle_bound)."""
    reset_speed_bound: float = 1.0
    """The initial angular velocity is uniform in [-reset_speed_bound, reset_speed_bound)."""


STATE_FIELDS = (StateField("theta"), StateField("theta_dot"))


def observation_space(params: PendulumParams) -> gym.spaces.Box:
    high = np.array([1.0, 1.0, params.max_speed], dtype=np.float32)
    return gym.spaces.Box(low=-high, high=high, dtype=np.float32)


def action_space(params: PendulumParams) -> gym.spaces.Box:
    return gym.spaces.Box(
        low=-params.max_torque, high=params.max_torque, shape=(1,), dtype=np.float32
    )


def num_reset_draws(params: PendulumParams) -> int:
    return 2


def reset(params: PendulumParams, u: torch.Tensor) -> State:
    """Initial states from uniforms ``u`` of shape ``(n, 2)``."""
    theta = uniform(u[:, 0], -params.reset_angle_bound, params.reset_angle_bound)
    theta_dot = uniform(u[:, 1], -params.reset_speed_bound, params.reset_speed_bound)
    return {"theta": theta.contiguous(), "theta_dot": theta_dot.contiguous()}


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """``((x + pi) mod 2pi) - pi`` with the floored modulo of Python and NumPy (result
    has the divisor's sign; in CUDA: ``fmodf`` plus ``2pi`` where it is negative)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


def step(
    params: PendulumParams, state: State, action: torch.Tensor
) -> tuple[State, torch.Tensor, torch.Tensor]:
    """One step. ``action``: ``(n, 1)`` float32, finite, any magnitude."""
    theta, theta_dot = state["theta"], state["theta_dot"]
    g, m, length, dt = params.g, params.mass, params.length, params.dt
    u = torch.clamp(action[:, 0], -params.max_torque, params.max_torque)
    angle = angle_normalize(theta)
    costs = angle * angle + 0.1 * (theta_dot * theta_dot) + 0.001 * (u * u)
    new_theta_dot = (
        theta_dot + (3 * g / (2 * length) * torch.sin(theta) + 3.0 / (m * length**2) * u) * dt
    )
    new_theta_dot = torch.clamp(new_theta_dot, -params.max_speed, params.max_speed)
    new_theta = theta + new_theta_dot * dt
    terminated = torch.zeros_like(theta, dtype=torch.bool)
    return {"theta": new_theta, "theta_dot": new_theta_dot}, -costs, terminated


def observe(params: PendulumParams, state: State) -> torch.Tensor:
    """``(n, 3)`` float32: ``cos(theta), sin(theta), theta_dot``."""
    theta = state["theta"]
    return torch.stack([torch.cos(theta), torch.sin(theta), state["theta_dot"]], dim=-1)


def kernel_consts(p: PendulumParams) -> Consts:
    """The ``Consts`` of ``cuda_src/pendulum.cu`` (``PENDULUM_CONSTS``), in its order: the
    constant factors of :func:`step` folded in double, then rounded to float32."""
    return [
        ("max_torque", f32(p.max_torque)),
        ("max_speed", f32(p.max_speed)),
        ("dt", f32(p.dt)),
        ("pi", f32(math.pi)),
        ("two_pi", f32(2 * math.pi)),
        ("speed_cost", f32(0.1)),
        ("action_cost", f32(0.001)),
        ("gravity_k", f32(3 * p.g / (2 * p.length))),
        ("torque_k", f32(3.0 / (p.mass * p.length**2))),
        ("reset_angle_low", f32(-p.reset_angle_bound)),
        ("reset_angle_high", f32(p.reset_angle_bound)),
        ("reset_speed_low", f32(-p.reset_speed_bound)),
        ("reset_speed_high", f32(p.reset_speed_bound)),
    ]


DEFINITION = EnvDefinition(
    name="pendulum",
    params_type=PendulumParams,
    state_fields=STATE_FIELDS,
    observation_space=observation_space,
    action_space=action_space,
    num_reset_draws=num_reset_draws,
    reset=reset,
    step=step,
    observe=observe,
    max_episode_steps=200,
    kernel_binding=KernelBinding("pendulum", kernel_consts),
    render_fps=30,
    render_frame=gymnasium_renderer(
        "gymnasium.envs.classic_control.pendulum:PendulumEnv", [f.name for f in STATE_FIELDS]
    ),
)
