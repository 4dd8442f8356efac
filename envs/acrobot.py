"""Acrobot, batched: Gymnasium's Acrobot-v1 dynamics in float32.

## Description
Two links hang in a chain from a fixed pivot; the joint between them is actuated
(Sutton 1996; Sutton & Barto's book). Apply torque at that joint to swing the free end
of the outer link above a target height, starting from hanging straight down.

## Action Space
``Discrete(3)``: the torque on the actuated joint, ``avail_torque[action]``
(-1, 0 or +1 N m).

## Observation Space
``Box(6,)`` float32: ``cos(theta1), sin(theta1), cos(theta2), sin(theta2)`` (±1),
the angular velocity of ``theta1`` (±4π) and of ``theta2`` (±9π). ``theta1 = 0`` is
the first link pointing down; ``theta2`` is relative to the first link.

## Rewards
-1 for every step that does not reach the target height, 0 on the step that does.

## Starting State
All four state variables (``theta1, theta2, dtheta1, dtheta2``) uniform in
``[-reset_bound, reset_bound)`` (0.1), drawn from the seeded counter-based RNG
(:mod:`gpu_vecenv.seeding`).

## Episode End
Terminated when ``-cos(theta1) - cos(theta2 + theta1) > 1.0``; truncated after
``max_episode_steps`` (500 for GPUAcrobot-v1).

## Arguments
The fields of :class:`AcrobotParams`, as keyword arguments of
``gymnasium.make_vec("GPUAcrobot-v1", num_envs=..., **params)``; e.g.
``book_or_nips="nips"`` selects the paper's equations, ``dt=0.05`` a finer step.
Gymnasium's ``torque_noise_max`` (0 there) is not modelled: the step draws no random
numbers.

## Version History
- v1: Gymnasium Acrobot-v1 dynamics (book equations, one RK4 step of ``dt`` per step),
  float32 state.
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
class AcrobotParams:
    """Physical constants of Acrobot (Gymnasium's values)."""

    dt: float = 0.2
    """Seconds integrated by the one RK4 step of every env step."""
    link_length_1: float = 1.0
    link_mass_1: float = 1.0
    link_mass_2: float = 1.0
    link_com_pos_1: float = 0.5
    """Distance from the pivot to the centre of mass of link 1."""
    link_com_pos_2: float = 0.5
    """Distance from the middle joint to the centre of mass of link 2."""
    link_moi: float = 1.0
    """Moment of inertia of each link."""
    gravity: float = 9.8
    max_vel_1: float = 4 * math.pi
    max_vel_2: float = 9 * math.pi
    avail_torque: tuple[float, float, float] = (-1.0, 0.0, 1.0)
    """Torque of actions 0, 1, 2."""
    book_or_nips: str = "book"
    """``"book"``: Sutton & Barto's equations (Gymnasium's default); ``"nips"``: the
    NeurIPS paper's, which lack one term."""
    reset_bound: float = 0.1
    """Initial state variables are uniform in [-reset_bound, reset_bound)."""

    def __post_init__(self) -> None:
        if self.book_or_nips not in ("book", "nips"):
            raise ValueError(f"book_or_nips must be 'book' or 'nips', got {self.book_or_nips!r}")
        if len(self.avail_torque) != 3:
            raise ValueError(f"avail_torque needs 3 values, got {self.avail_torque!r}")


STATE_FIELDS = tuple(StateField(n) for n in ("theta1", "theta2", "dtheta1", "dtheta2"))


def observation_space(params: AcrobotParams) -> gym.spaces.Box:
    high = np.array([1.0, 1.0, 1.0, 1.0, params.max_vel_1, params.max_vel_2], dtype=np.float32)
    return gym.spaces.Box(low=-high, high=high, dtype=np.float32)


def action_space(params: AcrobotParams) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(3)


def num_reset_draws(params: AcrobotParams) -> int:
    return 4


def reset(params: AcrobotParams, u: torch.Tensor) -> State:
    """Initial states from uniforms ``u`` of shape ``(n, 4)``."""
    values = uniform(u, -params.reset_bound, params.reset_bound)
    return {f.name: values[:, i].contiguous() for i, f in enumerate(STATE_FIELDS)}


def _derivatives(
    p: AcrobotParams,
    theta1: torch.Tensor,
    theta2: torch.Tensor,
    dtheta1: torch.Tensor,
    dtheta2: torch.Tensor,
    torque: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gymnasium's ``AcrobotEnv._dsdt``, term for term in the same order. Python-float
    sub-expressions of constants are folded in double and meet the tensors as float32.
    The torque's own derivative (0) is left out: it stays constant over the step."""
    m1, m2 = p.link_mass_1, p.link_mass_2
    l1 = p.link_length_1
    lc1, lc2 = p.link_com_pos_1, p.link_com_pos_2
    i1 = i2 = p.link_moi
    g = p.gravity
    pi = math.pi
    cos_theta2 = torch.cos(theta2)
    sin_theta2 = torch.sin(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos_theta2) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos_theta2) + i2
    phi2 = m2 * lc2 * g * torch.cos(theta1 + theta2 - pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin_theta2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_theta2
        + (m1 * lc1 + m2 * l1) * g * torch.cos(theta1 - pi / 2)
        + phi2
    )
    if p.book_or_nips == "nips":
        ddtheta2 = (torque + d2 / d1 * phi1 - phi2) / (m2 * lc2**2 + i2 - (d2 * d2) / d1)
    else:
        ddtheta2 = (
            torque + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin_theta2 - phi2
        ) / (m2 * lc2**2 + i2 - (d2 * d2) / d1)
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _wrap(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Gymnasium's ``wrap`` (``while x > high: x -= high - low``, then ``while x < low:
    x += high - low``) in closed form: the loops run ``ceil(excess / span)`` times."""
    span = high - low
    over = torch.clamp(torch.ceil((x - high) / span), min=0.0)
    x = x - over * span
    under = torch.clamp(torch.ceil((low - x) / span), min=0.0)
    return x + under * span


def step(
    params: AcrobotParams, state: State, action: torch.Tensor
) -> tuple[State, torch.Tensor, torch.Tensor]:
    """One RK4 step of ``dt`` (Gymnasium's ``rk4`` over ``[0, dt]``), then angles
    wrapped to ``[-pi, pi]`` and velocities bounded. ``action``: ``(n,)`` int64 in
    {0, 1, 2}."""
    f32 = torch.float32
    theta1, theta2, dtheta1, dtheta2 = (state[f.name] for f in STATE_FIELDS)
    # A select rather than indexing a tensor of the torques: no host-to-device copy.
    torque_0, torque_1, torque_2 = params.avail_torque
    torque = torch.where(
        action == 0, torque_0, torch.where(action == 1, torque_1, torch.full_like(theta1, torque_2))
    )
    dt = params.dt
    dt2 = dt / 2.0

    k1_t1, k1_t2, k1_v1, k1_v2 = _derivatives(params, theta1, theta2, dtheta1, dtheta2, torque)
    k2_t1, k2_t2, k2_v1, k2_v2 = _derivatives(
        params,
        theta1 + dt2 * k1_t1,
        theta2 + dt2 * k1_t2,
        dtheta1 + dt2 * k1_v1,
        dtheta2 + dt2 * k1_v2,
        torque,
    )
    k3_t1, k3_t2, k3_v1, k3_v2 = _derivatives(
        params,
        theta1 + dt2 * k2_t1,
        theta2 + dt2 * k2_t2,
        dtheta1 + dt2 * k2_v1,
        dtheta2 + dt2 * k2_v2,
        torque,
    )
    k4_t1, k4_t2, k4_v1, k4_v2 = _derivatives(
        params,
        theta1 + dt * k3_t1,
        theta2 + dt * k3_t2,
        dtheta1 + dt * k3_v1,
        dtheta2 + dt * k3_v2,
        torque,
    )
    w = dt / 6.0
    theta1_new = theta1 + w * (k1_t1 + 2 * k2_t1 + 2 * k3_t1 + k4_t1)
    theta2_new = theta2 + w * (k1_t2 + 2 * k2_t2 + 2 * k3_t2 + k4_t2)
    dtheta1_new = dtheta1 + w * (k1_v1 + 2 * k2_v1 + 2 * k3_v1 + k4_v1)
    dtheta2_new = dtheta2 + w * (k1_v2 + 2 * k2_v2 + 2 * k3_v2 + k4_v2)

    theta1_new = _wrap(theta1_new, -math.pi, math.pi)
    theta2_new = _wrap(theta2_new, -math.pi, math.pi)
    dtheta1_new = torch.clamp(dtheta1_new, -params.max_vel_1, params.max_vel_1)
    dtheta2_new = torch.clamp(dtheta2_new, -params.max_vel_2, params.max_vel_2)

    terminated = -torch.cos(theta1_new) - torch.cos(theta2_new + theta1_new) > 1.0
    reward = torch.where(terminated, 0.0, -1.0).to(f32)
    new_state = {
        "theta1": theta1_new,
        "theta2": theta2_new,
        "dtheta1": dtheta1_new,
        "dtheta2": dtheta2_new,
    }
    return new_state, reward, terminated


def observe(params: AcrobotParams, state: State) -> torch.Tensor:
    """``(n, 6)`` float32: ``cos t1, sin t1, cos t2, sin t2, dt1, dt2``."""
    theta1, theta2 = state["theta1"], state["theta2"]
    return torch.stack(
        [
            torch.cos(theta1),
            torch.sin(theta1),
            torch.cos(theta2),
            torch.sin(theta2),
            state["dtheta1"],
            state["dtheta2"],
        ],
        dim=-1,
    )


def kernel_consts(p: AcrobotParams) -> Consts:
    """The ``Consts`` of ``cuda_src/acrobot.cu`` (``ACROBOT_CONSTS``), in its order: the
    constant sub-expressions of :func:`step` folded in double, as the reference folds them,
    then rounded to float32; the wrap's span as torch's CUDA reciprocal."""
    m1, m2 = p.link_mass_1, p.link_mass_2
    l1, lc1, lc2 = p.link_length_1, p.link_com_pos_1, p.link_com_pos_2
    i1 = i2 = p.link_moi
    g, pi = p.gravity, math.pi
    span = pi - -pi
    return [
        *((f"torque[{k}]", f32(t)) for k, t in enumerate(p.avail_torque)),
        ("dt", f32(p.dt)),
        ("dt2", f32(p.dt / 2.0)),
        ("w", f32(p.dt / 6.0)),
        ("d1_a", f32(m1 * lc1**2)),
        ("d1_c", f32(l1**2 + lc2**2)),
        ("d1_b", f32(2 * l1 * lc2)),
        ("m2", f32(m2)),
        ("i1", f32(i1)),
        ("i2", f32(i2)),
        ("d2_c", f32(lc2**2)),
        ("l1_lc2", f32(l1 * lc2)),
        ("phi2_k", f32(m2 * lc2 * g)),
        ("half_pi", f32(pi / 2.0)),
        ("phi1_a", f32(-m2 * l1 * lc2)),
        ("phi1_b", f32(2 * m2 * l1 * lc2)),
        ("phi1_c", f32((m1 * lc1 + m2 * l1) * g)),
        ("m2_l1_lc2", f32(m2 * l1 * lc2)),
        ("den_c", f32(m2 * lc2**2 + i2)),
        ("pi", f32(pi)),
        ("neg_pi", f32(-pi)),
        ("span", f32(span)),
        ("inv_span", reciprocal(span)),
        ("max_vel_1", f32(p.max_vel_1)),
        ("max_vel_2", f32(p.max_vel_2)),
        ("reset_low", f32(-p.reset_bound)),
        ("reset_high", f32(p.reset_bound)),
        ("book", int(p.book_or_nips == "book")),
    ]


DEFINITION = EnvDefinition(
    name="acrobot",
    params_type=AcrobotParams,
    state_fields=STATE_FIELDS,
    observation_space=observation_space,
    action_space=action_space,
    num_reset_draws=num_reset_draws,
    reset=reset,
    step=step,
    observe=observe,
    max_episode_steps=500,
    kernel_binding=KernelBinding("acrobot", kernel_consts),
    render_fps=15,
    render_frame=gymnasium_renderer(
        "gymnasium.envs.classic_control.acrobot:AcrobotEnv", [f.name for f in STATE_FIELDS]
    ),
)
