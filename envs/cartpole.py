"""CartPole, batched: Gymnasium's CartPole-v1 dynamics in float32.

## Description
A pole is attached by an un-actuated joint to a cart moving along a frictionless track
(Barto, Sutton & Anderson, 1983). Push the cart left or right to keep the pole upright.

## Action Space
``Discrete(2)``: 0 pushes the cart to the left, 1 to the right, with ``force_mag``.

## Observation Space
``Box(4,)`` float32: cart position (±4.8), cart velocity (±inf), pole angle
(±0.418 rad), pole angular velocity (±inf).

## Rewards
+1 for every step, the terminating one included. With ``sutton_barto_reward=True``:
0 every step and -1 on the terminating step.

## Starting State
All four state variables uniform in ``[-0.05, 0.05)``, drawn from the seeded
counter-based RNG (:mod:`gpu_vecenv.seeding`).

## Episode End
Terminated when the pole angle leaves ±12° or the cart position leaves ±2.4;
truncated after ``max_episode_steps`` (500 for GPUCartPole-v1).

## Arguments
The fields of :class:`CartPoleParams`, as keyword arguments of
``gymnasium.make_vec("GPUCartPole-v1", num_envs=..., **params)``.

## Version History
- v1: Gymnasium CartPole-v1 dynamics, float32 state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import EnvDefinition, State, StateField
from gpu_vecenv.kernel_binding import Consts, KernelBinding, f32, reciprocal
from gpu_vecenv.rendering import gymnasium_renderer
from gpu_vecenv.seeding import uniform


@dataclass(frozen=True)
class CartPoleParams:
    """Physical constants of CartPole (Gymnasium's values)."""

    gravity: float = 9.8
    masscart: float = 1.0
    masspole: float = 0.1
    length: float = 0.5
    """Half the pole's length."""
    force_mag: float = 10.0
    tau: float = 0.02
    """Seconds between state updates."""
    euler: bool = True
    """Explicit Euler (Gymnasium's default); False: semi-implicit Euler."""
    theta_threshold_radians: float = 12 * 2 * math.pi / 360
    x_threshold: float = 2.4
    reset_bound: float = 0.05
    """Initial state variables are uniform in [-reset_bound, reset_bound)."""
    sutton_barto_reward: bool = False

    @property
    def total_mass(self) -> float:
        return self.masspole + self.masscart

    @property
    def polemass_length(self) -> float:
        return self.masspole * self.length


STATE_FIELDS = tuple(StateField(n) for n in ("x", "x_dot", "theta", "theta_dot"))


def observation_space(params: CartPoleParams) -> gym.spaces.Box:
    high = np.array(
        [params.x_threshold * 2, np.inf, params.theta_threshold_radians * 2, np.inf],
        dtype=np.float32,
    )
    return gym.spaces.Box(-high, high, dtype=np.float32)


def action_space(params: CartPoleParams) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(2)


def num_reset_draws(params: CartPoleParams) -> int:
    return 4


def reset(params: CartPoleParams, u: torch.Tensor) -> State:
    """Initial states from uniforms ``u`` of shape ``(n, 4)``."""
    values = uniform(u, -params.reset_bound, params.reset_bound)
    return {f.name: values[:, i].contiguous() for i, f in enumerate(STATE_FIELDS)}


def step(
    params: CartPoleParams, state: State, action: torch.Tensor
) -> tuple[State, torch.Tensor, torch.Tensor]:
    """One Euler step. ``action``: ``(n,)`` int64 in {0, 1}."""
    x, x_dot, theta, theta_dot = (state[f.name] for f in STATE_FIELDS)
    f32 = torch.float32
    force = torch.where(action == 1, params.force_mag, -params.force_mag).to(f32)
    costheta = torch.cos(theta)
    sintheta = torch.sin(theta)
    total_mass = params.total_mass
    polemass_length = params.polemass_length
    temp = (force + polemass_length * (theta_dot * theta_dot) * sintheta) / total_mass
    thetaacc = (params.gravity * sintheta - costheta * temp) / (
        params.length * (4.0 / 3.0 - params.masspole * (costheta * costheta) / total_mass)
    )
    xacc = temp - polemass_length * thetaacc * costheta / total_mass
    tau = params.tau
    if params.euler:
        x_new = x + tau * x_dot
        x_dot_new = x_dot + tau * xacc
        theta_new = theta + tau * theta_dot
        theta_dot_new = theta_dot + tau * thetaacc
    else:
        x_dot_new = x_dot + tau * xacc
        x_new = x + tau * x_dot_new
        theta_dot_new = theta_dot + tau * thetaacc
        theta_new = theta + tau * theta_dot_new
    terminated = (
        (x_new < -params.x_threshold)
        | (x_new > params.x_threshold)
        | (theta_new < -params.theta_threshold_radians)
        | (theta_new > params.theta_threshold_radians)
    )
    if params.sutton_barto_reward:
        reward = torch.where(terminated, -1.0, 0.0).to(f32)
    else:
        reward = torch.ones_like(x_new)
    new_state = {"x": x_new, "x_dot": x_dot_new, "theta": theta_new, "theta_dot": theta_dot_new}
    return new_state, reward, terminated


def observe(params: CartPoleParams, state: State) -> torch.Tensor:
    """``(n, 4)`` float32: the state itself."""
    return torch.stack([state[f.name] for f in STATE_FIELDS], dim=-1)


def kernel_consts(p: CartPoleParams) -> Consts:
    """The ``Consts`` of ``cuda_src/cartpole.cu`` (``CARTPOLE_CONSTS``), in its order: float32,
    the total mass as torch's CUDA reciprocal (the kernel multiplies where :func:`step`
    divides)."""
    return [
        ("gravity", f32(p.gravity)),
        ("masspole", f32(p.masspole)),
        ("length", f32(p.length)),
        ("force_mag", f32(p.force_mag)),
        ("tau", f32(p.tau)),
        ("polemass_length", f32(p.polemass_length)),
        ("inv_total_mass", reciprocal(p.total_mass)),
        ("four_thirds", f32(4.0 / 3.0)),
        ("theta_threshold_radians", f32(p.theta_threshold_radians)),
        ("x_threshold", f32(p.x_threshold)),
        ("reset_low", f32(-p.reset_bound)),
        ("reset_high", f32(p.reset_bound)),
        ("euler", int(bool(p.euler))),
        ("sutton_barto_reward", int(bool(p.sutton_barto_reward))),
    ]


DEFINITION = EnvDefinition(
    name="cartpole",
    params_type=CartPoleParams,
    state_fields=STATE_FIELDS,
    observation_space=observation_space,
    action_space=action_space,
    num_reset_draws=num_reset_draws,
    reset=reset,
    step=step,
    observe=observe,
    max_episode_steps=500,
    kernel_binding=KernelBinding("cartpole", kernel_consts),
    render_frame=gymnasium_renderer(
        "gymnasium.envs.classic_control.cartpole:CartPoleEnv", [f.name for f in STATE_FIELDS]
    ),
)
