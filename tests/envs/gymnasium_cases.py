"""The five classic-control envs paired with Gymnasium's own classes, for the tests here.

Each :class:`Case` knows how to build the Gymnasium env with the same parameters, read
and write its ``state``, visit states with a policy, produce edge states around every
threshold and clip, and measure how close Gymnasium's next state lies to a threshold
whose comparison float32 rounding could flip.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.continuous_mountain_car import Continuous_MountainCarEnv
from gymnasium.envs.classic_control.mountain_car import MountainCarEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv

from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.envs import acrobot, cartpole, mountain_car, mountain_car_continuous, pendulum
from gpu_vecenv.vector_env import GpuVectorEnv

Policy = Callable[[np.random.Generator, np.ndarray], Any]


@dataclass(frozen=True)
class Case:
    """One env of ours and its Gymnasium counterpart."""

    name: str
    env_id: str
    """Our registered id."""
    gym_id: str
    """Gymnasium's registered id."""
    definition: EnvDefinition
    make_gym: Callable[[], gym.Env]
    """Gymnasium's env class with the parameters of ``params`` (no wrappers)."""
    policy: Policy
    """Picks Gymnasium actions while visiting states: ``(rng, obs) -> action``."""
    edge_states: Callable[[Any, np.random.Generator], np.ndarray]
    """``(params, rng) -> (m, k)`` float64 states next to every threshold and clip."""
    threshold_distance: Callable[[Any, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    """``(params, state, action, gymnasium_next_state) -> (n,)`` distance to the nearest
    threshold that float32 rounding could flip (``inf`` where there is none)."""
    margin: float
    """States closer than this to a threshold are excluded from exact comparison."""
    params: dict[str, Any] = field(default_factory=dict)
    gym_state_dtype: type = np.float64
    """The dtype Gymnasium itself keeps ``state`` in between steps."""

    @functools.cached_property
    def discrete(self) -> bool:
        return isinstance(self.definition.action_space(self.make_params()), gym.spaces.Discrete)

    def make_params(self):
        return self.definition.make_params(**self.params)

    def make_ours(self, num_envs: int, **kwargs: Any) -> GpuVectorEnv:
        kwargs.setdefault("device", "cpu")
        return GpuVectorEnv(self.definition, num_envs, **kwargs, **self.params)

    def gym_action(self, action: Any) -> Any:
        if self.discrete:
            return int(action)
        return np.asarray(action, dtype=np.float32).reshape(1)

    def sample_actions(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """``n`` actions; Box actions include out-of-range values and the exact bounds."""
        space = self.definition.action_space(self.make_params())
        if self.discrete:
            return rng.integers(0, space.n, size=n)
        low, high = float(space.low[0]), float(space.high[0])
        values = rng.uniform(low, high, size=n)
        wide = rng.random(n) < 0.25
        values[wide] = rng.uniform(3 * low, 3 * high, size=int(wide.sum()))
        values[:4] = [low, high, 0.0, 10 * high][: min(4, n)]
        return values.astype(np.float32).reshape(n, 1)


def get_gym_state(env: gym.Env) -> np.ndarray:
    return np.array(env.unwrapped.state, dtype=np.float64)


def set_gym_state(case: Case, env: gym.Env, state: np.ndarray) -> None:
    env.unwrapped.state = np.array(state, dtype=case.gym_state_dtype)
    if isinstance(env.unwrapped, CartPoleEnv):
        env.unwrapped.steps_beyond_terminated = None  # every injected state is fresh


def visit_states(case: Case, num_states: int, seeds: tuple[int, ...]) -> np.ndarray:
    """``(num_states, k)`` float64 states Gymnasium's env visits under ``case.policy``,
    resetting (unseeded after the first reset of each seed) on termination and at the
    time limit."""
    env = case.make_gym()
    limit = case.definition.max_episode_steps
    rng = np.random.default_rng(list(seeds))
    per_seed = -(-num_states // len(seeds))
    states = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        t = 0
        for _ in range(per_seed):
            states.append(get_gym_state(env))
            obs, _, terminated, _, _ = env.step(case.policy(rng, obs))
            t += 1
            if terminated or t >= limit:
                obs, _ = env.reset()
                t = 0
    return np.array(states[:num_states])


@dataclass
class Transitions:
    """One step from each of ``n`` states, by Gymnasium or by us."""

    obs: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    next_state: np.ndarray | None = None


def gym_transitions(case: Case, states: np.ndarray, actions: np.ndarray) -> Transitions:
    """Gymnasium's env stepped once from each state (written into its ``state``)."""
    env = case.make_gym()
    env.reset(seed=0)
    n = len(states)
    obs = np.zeros(
        (n, case.definition.observation_space(case.make_params()).shape[0]), dtype=np.float32
    )
    reward = np.zeros(n, dtype=np.float64)
    terminated = np.zeros(n, dtype=bool)
    next_state = np.zeros_like(states, dtype=np.float64)
    for i in range(n):
        set_gym_state(case, env, states[i])
        o, r, te, tr, _ = env.step(case.gym_action(actions[i]))
        assert not tr
        obs[i], reward[i], terminated[i] = o, r, te
        next_state[i] = get_gym_state(env)
    return Transitions(obs, reward, terminated, next_state)


def our_transitions(case: Case, states: np.ndarray, actions: np.ndarray) -> Transitions:
    """Our runtime (torch backend, CPU) stepped once from each state via ``set_state``."""
    env = case.make_ours(len(states), max_episode_steps=None)
    env.set_state(
        {
            f.name: torch.from_numpy(np.ascontiguousarray(states[:, j]))
            for j, f in enumerate(case.definition.state_fields)
        }
    )
    obs, reward, terminated, truncated, _ = env.step(actions)
    assert not truncated.any()
    next_state = np.stack(
        [env.buffers.state[f.name].numpy() for f in case.definition.state_fields], axis=1
    )
    return Transitions(obs.numpy(), reward.numpy(), terminated.numpy(), next_state)


def reference_float64(case: Case, states: np.ndarray, actions: np.ndarray) -> Transitions:
    """Our torch reference called directly on float64 state tensors (the action keeps
    its runtime dtype), to compare the formulas with Gymnasium's float64 arithmetic."""
    params = case.make_params()
    state = {
        f.name: torch.from_numpy(np.ascontiguousarray(states[:, j], dtype=np.float64))
        for j, f in enumerate(case.definition.state_fields)
    }
    action = torch.from_numpy(actions)
    new_state, reward, terminated = case.definition.step(params, state, action)
    obs = case.definition.observe(params, new_state)
    next_state = np.stack([new_state[f.name].numpy() for f in case.definition.state_fields], axis=1)
    return Transitions(obs.numpy(), reward.numpy(), terminated.numpy(), next_state)


# -- CartPole --


def _cartpole_edges(params, rng: np.random.Generator) -> np.ndarray:
    """States whose next x or theta lands just inside or outside a threshold (Euler:
    ``x' = x + tau * x_dot``), and states already beyond one."""
    rows = []
    offsets = np.array([-1e-2, -1e-3, -1e-4, -3e-5, 3e-5, 1e-4, 1e-3, 1e-2])
    for sign in (-1.0, 1.0):
        for d in offsets:
            x_dot, theta_dot = rng.uniform(-2, 2), rng.uniform(-2, 2)
            x_next = sign * params.x_threshold + d
            rows.append([x_next - params.tau * x_dot, x_dot, rng.uniform(-0.1, 0.1), theta_dot])
            th_next = sign * params.theta_threshold_radians + d
            rows.append([rng.uniform(-2, 2), x_dot, th_next - params.tau * theta_dot, theta_dot])
    rows += [[3.0, 1.0, 0.0, 0.0], [-3.0, -1.0, 0.3, 2.0], [0.0, 0.0, -0.3, -2.0]]
    box = rng.uniform([-2.6, -3, -0.25, -3.5], [2.6, 3, 0.25, 3.5], size=(500, 4))
    return np.concatenate([np.array(rows), box])


def _cartpole_distance(params, state, action, next_state):
    x, theta = next_state[:, 0], next_state[:, 2]
    return np.minimum(
        np.abs(np.abs(x) - params.x_threshold),
        np.abs(np.abs(theta) - params.theta_threshold_radians),
    )


# -- Acrobot --


def _acrobot_edges(params, rng: np.random.Generator) -> np.ndarray:
    """The whole state box (high velocities included: RK4 is worst conditioned there),
    its corners and faces (angles at ±pi, velocities at their bounds)."""
    high = np.array([math.pi, math.pi, params.max_vel_1, params.max_vel_2])
    box = rng.uniform(-high, high, size=(1000, 4))
    faces = rng.uniform(-high, high, size=(200, 4))
    which = rng.integers(0, 4, size=200)
    faces[np.arange(200), which] = np.where(rng.random(200) < 0.5, -1, 1) * high[which]
    corners = np.array(np.meshgrid(*[[-h, h] for h in high])).reshape(4, -1).T
    return np.concatenate([box, faces, corners])


def _acrobot_distance(params, state, action, next_state):
    height = -np.cos(next_state[:, 0]) - np.cos(next_state[:, 1] + next_state[:, 0])
    return np.abs(height - 1.0)


def _acrobot_policy(rng, obs):
    if rng.random() < 0.5:  # pump energy into the swing: reaches the goal height often
        return 2 if obs[5] > 0 else 0
    return int(rng.integers(3))


# -- MountainCar (both) --


def _mountain_car_edges(params, rng: np.random.Generator) -> np.ndarray:
    """Near the left wall moving left (the inelastic collision), on it, near the goal
    with tiny velocities of either sign, at the speed limits and the right end."""
    goal_position = params.goal_position
    rows = []
    for v in (-0.07, -0.05, -0.01, -1e-3, -1e-5, 0.0, 1e-5):
        for p in (-1.2, -1.19, -1.199, -1.1999, -1.15):
            rows.append([p, v])
    for p in (
        goal_position - 0.01,
        goal_position - 1e-3,
        goal_position - 1e-4,
        goal_position + 1e-4,
        goal_position + 1e-3,
        0.55,
        0.6,
    ):
        for v in (-0.07, -1e-3, -1e-4, 0.0, 1e-4, 1e-3, 0.07):
            rows.append([p, v])
    for v in (-0.07, 0.07, -0.0695, 0.0695):
        for p in (-0.9, -0.5, 0.0, 0.3):
            rows.append([p, v])
    box = rng.uniform([-1.2, -0.07], [0.6, 0.07], size=(1000, 2))
    return np.concatenate([np.array(rows), box])


def _mountain_car_distance(
    position_change: Callable[[Any, np.ndarray, np.ndarray], np.ndarray], margin: float
):
    """Distance to the goal test (position, or velocity where the position passes) and,
    for leftward moves, to the wall's clamp, which decides whether the velocity is
    zeroed. Recomputes the unclipped position in float64 from the state."""

    def distance(params, state, action, next_state):
        position, velocity = next_state[:, 0], next_state[:, 1]
        goal_position, goal_velocity = params.goal_position, params.goal_velocity
        goal = np.minimum(
            np.where(velocity >= goal_velocity - margin, np.abs(position - goal_position), np.inf),
            np.where(position >= goal_position - margin, np.abs(velocity - goal_velocity), np.inf),
        )
        change = position_change(params, state, action)
        wall = np.where(change < 0, np.abs(state[:, 0] + change - params.min_position), np.inf)
        return np.minimum(goal, wall)

    return distance


def _mc_position_change(params, state, action):
    velocity = state[:, 1] + (action - 1) * params.force + np.cos(3 * state[:, 0]) * -params.gravity
    return np.clip(velocity, -params.max_speed, params.max_speed)


def _mcc_position_change(params, state, action):
    force = np.clip(action[:, 0].astype(np.float64), params.min_action, params.max_action)
    velocity = state[:, 1] + force * params.power - params.gravity * np.cos(3 * state[:, 0])
    return np.clip(velocity, -params.max_speed, params.max_speed)


def _mc_policy(rng, obs):
    if rng.random() < 0.75:  # push along the velocity: climbs both hills
        return 2 if obs[1] >= 0 else 0
    return int(rng.integers(3))


def _mcc_policy(rng, obs):
    if rng.random() < 0.75:
        return np.array([np.sign(obs[1]) * rng.uniform(0.3, 1.5)], dtype=np.float32)
    return np.array([rng.uniform(-2, 2)], dtype=np.float32)


# -- Pendulum --


def _pendulum_edges(params, rng: np.random.Generator) -> np.ndarray:
    """Angles far from [-pi, pi] (theta is never wrapped), odd multiples of pi (where
    the cost's normalized angle jumps), speeds at and next to the clip."""
    rows = [
        [k * math.pi + d, v]
        for k in (-5, -3, -1, 1, 3, 5)
        for d in (-1e-4, 0.0, 1e-4)
        for v in (-8.0, 0.0, 8.0)
    ]
    box = rng.uniform([-40, -8], [40, 8], size=(1000, 2))
    return np.concatenate([np.array(rows), box])


def _no_threshold(params, state, action, next_state):
    return np.full(len(state), np.inf)


def _pendulum_policy(rng, obs):
    if rng.random() < 0.5:  # keep swinging: high speeds, growing angles
        return np.array([2.0 if obs[2] >= 0 else -2.0], dtype=np.float32)
    return np.array([rng.uniform(-2.5, 2.5)], dtype=np.float32)


CASES: dict[str, Case] = {
    c.name: c
    for c in (
        Case(
            name="cartpole",
            env_id="GPUCartPole-v1",
            gym_id="CartPole-v1",
            definition=cartpole.DEFINITION,
            make_gym=CartPoleEnv,
            policy=lambda rng, obs: int(rng.integers(2)),
            edge_states=_cartpole_edges,
            threshold_distance=_cartpole_distance,
            margin=1e-5,
        ),
        Case(
            name="acrobot",
            env_id="GPUAcrobot-v1",
            gym_id="Acrobot-v1",
            definition=acrobot.DEFINITION,
            make_gym=AcrobotEnv,
            policy=_acrobot_policy,
            edge_states=_acrobot_edges,
            threshold_distance=_acrobot_distance,
            margin=1e-4,
        ),
        Case(
            name="mountain_car",
            env_id="GPUMountainCar-v0",
            gym_id="MountainCar-v0",
            definition=mountain_car.DEFINITION,
            make_gym=MountainCarEnv,
            policy=_mc_policy,
            edge_states=_mountain_car_edges,
            threshold_distance=_mountain_car_distance(_mc_position_change, 1e-6),
            margin=1e-6,
        ),
        Case(
            name="mountain_car_continuous",
            env_id="GPUMountainCarContinuous-v0",
            gym_id="MountainCarContinuous-v0",
            definition=mountain_car_continuous.DEFINITION,
            make_gym=Continuous_MountainCarEnv,
            policy=_mcc_policy,
            edge_states=_mountain_car_edges,
            threshold_distance=_mountain_car_distance(_mcc_position_change, 1e-6),
            margin=1e-6,
            gym_state_dtype=np.float32,
        ),
        Case(
            name="pendulum",
            env_id="GPUPendulum-v1",
            gym_id="Pendulum-v1",
            definition=pendulum.DEFINITION,
            make_gym=PendulumEnv,
            policy=_pendulum_policy,
            edge_states=_pendulum_edges,
            threshold_distance=_no_threshold,
            margin=0.0,
        ),
    )
}
