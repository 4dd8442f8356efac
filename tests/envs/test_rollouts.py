"""Whole episodes under our runtime: time limits, termination, rewards and autoreset of
every classic env, and roll-outs compared step by step with Gymnasium's env started
from the same states and driven by the same actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from tests.envs.gymnasium_cases import CASES, Case, set_gym_state

PENDULUM_MIN_REWARD = -(np.pi**2 + 0.1 * 8**2 + 0.001 * 2**2)  # -16.2736044


def _run(env, policy, steps: int):
    """Step ``env`` ``steps`` times with ``policy(obs)``; stack the outputs."""
    obs, _ = env.reset(seed=123)
    record = {"obs": [], "reward": [], "terminated": [], "truncated": [], "info": []}
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        for key, value in zip(record, (obs, reward, terminated, truncated, info), strict=True):
            record[key].append(value)
    out = {k: torch.stack(v).numpy() for k, v in record.items() if k != "info"}
    out["info"] = record["info"]
    return out


def _constant(case: Case, n: int, value):
    if case.discrete:
        return lambda obs: torch.full((n,), value, dtype=torch.int64)
    return lambda obs: torch.full((n, 1), float(value))


@pytest.mark.parametrize(
    ("name", "action", "reward"),
    [
        ("mountain_car", 1, -1.0),  # no push: the car never leaves the valley
        ("mountain_car_continuous", 0.0, 0.0),
        ("acrobot", 1, -1.0),  # no torque: the arm never rises
        ("pendulum", 0.0, None),
    ],
)
def test_passive_policy_truncates_at_the_time_limit(name, action, reward):
    """NEXT_STEP autoreset: truncated exactly at Gymnasium's limit, never terminated;
    the following step is the reset step (reward 0, not done, a starting state)."""
    case = CASES[name]
    limit = case.definition.max_episode_steps
    n = 16
    env = gym.make_vec(case.env_id, num_envs=n, device="cpu")
    out = _run(env, _constant(case, n, action), limit + 2)
    assert not out["terminated"].any()
    assert out["truncated"][limit - 1].all()
    assert not np.delete(out["truncated"], limit - 1, axis=0).any()
    rewards = out["reward"][:limit]
    if reward is not None:
        assert (rewards == reward).all()
        assert (rewards.sum(0) == reward * limit).all()  # e.g. -200 for MountainCar
    else:
        assert (rewards <= 0).all() and (rewards >= PENDULUM_MIN_REWARD).all()
    assert (out["reward"][limit] == 0).all()
    first = out["obs"][limit]
    space = env.single_observation_space
    assert (first >= space.low).all() and (first <= space.high).all()
    if name.startswith("mountain_car"):
        assert ((first[:, 0] >= -0.6) & (first[:, 0] <= -0.4) & (first[:, 1] == 0)).all()


def test_pendulum_never_terminates_under_any_torque():
    case = CASES["pendulum"]
    n = 32
    rng = np.random.default_rng(0)
    env = case.make_ours(n)
    out = _run(env, lambda obs: torch.from_numpy(case.sample_actions(rng, n)), 401)
    assert not out["terminated"].any()
    assert out["truncated"][199].all() and out["truncated"][400].all()
    assert out["truncated"].sum() == 2 * n
    stepped = np.delete(out["reward"], 200, axis=0)  # step 201 is the reset step
    assert (stepped <= 0).all() and (stepped >= np.float32(PENDULUM_MIN_REWARD)).all()
    assert (np.abs(out["obs"][:, :, 2]) <= 8).all()


def _pump(name: str, n: int):
    """Energy-pumping policies that reach the goal well within the time limit."""
    if name == "acrobot":
        return lambda obs: torch.where(obs[:, 5] > 0, 2, 0)
    if name == "mountain_car":
        return lambda obs: torch.where(obs[:, 1] >= 0, 2, 0)
    return lambda obs: torch.where(obs[:, 1:2] >= 0, 1.0, -1.0)  # continuous


def _goal_reached(name: str, obs: np.ndarray) -> np.ndarray:
    if name == "acrobot":  # -cos(t1) - cos(t1 + t2) > 1 from cos/sin observations
        c1, s1, c2, s2 = obs[:, 0], obs[:, 1], obs[:, 2], obs[:, 3]
        return -c1 - (c1 * c2 - s1 * s2) > 1.0 - 1e-5
    goal = CASES[name].make_params().goal_position
    return (obs[:, 0] >= goal) & (obs[:, 1] >= 0)


@pytest.mark.parametrize("name", ["acrobot", "mountain_car", "mountain_car_continuous"])
def test_pumping_reaches_the_goal(name):
    """SAME_STEP autoreset: every env terminates before the time limit with
    Gymnasium's terminal reward; ``final_obs`` is at the goal, ``obs`` a new start."""
    case = CASES[name]
    n = 32
    env = case.make_ours(n, autoreset_mode="same_step")
    steps = 250 if name == "acrobot" else 200
    out = _run(env, _pump(name, n), steps)
    terminated = out["terminated"]
    assert not out["truncated"].any()
    first_end = terminated.argmax(axis=0)
    assert terminated.any(axis=0).all(), "every env reaches the goal"
    for t in np.unique(first_end):
        envs = first_end == t
        info = out["info"][t]
        final_obs = info["final_obs"].numpy()[envs]
        assert info["_final_obs"].numpy()[envs].all()
        assert _goal_reached(name, final_obs).all()
        starts = out["obs"][t][envs]
        if name == "acrobot":
            assert (np.abs(starts[:, 4:]) <= 0.1).all()
        else:
            assert ((starts[:, 0] >= -0.6) & (starts[:, 0] <= -0.4)).all()
    columns = np.arange(n)
    final_reward = out["reward"][first_end, columns]
    before = np.arange(steps)[:, None] < first_end[None, :]
    if name == "acrobot":
        assert (final_reward == 0).all() and (out["reward"][before] == -1).all()
    elif name == "mountain_car":
        assert (final_reward == -1).all() and (out["reward"][before] == -1).all()
    else:  # |action| = 1 every step
        assert np.allclose(final_reward, 100 - 0.1) and np.allclose(out["reward"][before], -0.1)


def test_cartpole_terminates_with_reward_one():
    case = CASES["cartpole"]
    n = 32
    env = gym.make_vec(case.env_id, num_envs=n, device="cpu")
    out = _run(env, _constant(case, n, 1), 40)  # always push right: falls within ~10 steps
    terminated = out["terminated"]
    first_end = terminated.argmax(axis=0)
    assert terminated.any(axis=0).all() and (first_end < 20).all()
    assert (out["reward"][first_end, np.arange(n)] == 1).all()
    assert (out["reward"][first_end + 1, np.arange(n)] == 0).all()  # NEXT_STEP reset step
    assert not out["terminated"][first_end + 1, np.arange(n)].any()


def test_single_env_view_truncates_through_gymnasium_time_limit():
    """``gymnasium.make`` wraps our one-env view in TimeLimit from the registry."""
    env = gym.make("GPUMountainCar-v0")
    env.reset(seed=0)
    for t in range(1, 201):
        _, reward, terminated, truncated, _ = env.step(1)
        assert reward == -1.0 and not terminated
        assert truncated == (t == 200)


# -- roll-outs against Gymnasium --

HORIZONS = {
    "cartpole": 60,
    "acrobot": 100,
    "mountain_car": 200,
    "mountain_car_continuous": 200,
    "pendulum": 50,  # swinging through the top amplifies float32 rounding quickly
}
ROLLOUT_ATOL = 1e-4


@pytest.mark.parametrize("name", list(CASES))
def test_rollouts_match_gymnasium_step_by_step(name):
    """Our runtime (DISABLED autoreset, no time limit) and Gymnasium's env started from
    our initial states, driven by identical random actions (closed-loop policies would
    hide nothing more and could branch on rounding): observations agree within
    ``ROLLOUT_ATOL`` along the whole horizon, termination at the same step."""
    case = CASES[name]
    n, horizon = 8, HORIZONS[name]
    rng = np.random.default_rng(5)
    ours = case.make_ours(n, autoreset_mode="disabled", max_episode_steps=None)
    ours.reset(seed=99)
    start = np.stack([ours.buffers.state[f.name].numpy() for f in case.definition.state_fields], 1)
    theirs = []
    for i in range(n):
        env = case.make_gym()
        env.reset(seed=0)
        set_gym_state(case, env, start[i])
        theirs.append(env)
    alive = np.ones(n, dtype=bool)
    for t in range(horizon):
        actions = case.sample_actions(rng, n)
        obs, reward, terminated, _, _ = ours.step(actions)
        for i in np.nonzero(alive)[0]:
            o, r, te, _, _ = theirs[i].step(case.gym_action(actions[i]))
            np.testing.assert_allclose(
                obs[i].numpy(), o, rtol=0, atol=ROLLOUT_ATOL, err_msg=f"env {i} step {t}"
            )
            assert bool(terminated[i]) == te, f"env {i} step {t}"
            np.testing.assert_allclose(float(reward[i]), r, rtol=1e-5, atol=1e-5)
            alive[i] = not te
        if not alive.any():
            break
    if name == "cartpole":
        assert alive.sum() <= n // 2  # terminations were compared too
