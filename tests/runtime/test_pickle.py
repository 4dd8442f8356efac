"""Pickling an env (or deep-copying it) gives an env that continues bit for bit as the
original does: same observations, rewards, flags and autoresets (RNG streams included),
same action-space samples. See gpu_vecenv/pickling.py for what is stored."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_vecenv
from gpu_vecenv.adapters.pettingzoo import OneGameParallelEnv
from gpu_vecenv.entry_points import make_vec


def _assert_same_future(env, twin, steps: int) -> None:
    for _ in range(steps):
        action, twin_action = env.action_space.sample(), twin.action_space.sample()
        np.testing.assert_array_equal(action, twin_action)
        ours, theirs = env.step(action), twin.step(twin_action)
        for mine, other in zip(ours[:4], theirs[:4], strict=True):
            assert torch.equal(mine, other)
        if "final_obs" in ours[4]:
            assert torch.equal(ours[4]["final_obs"], theirs[4]["final_obs"])


@pytest.mark.parametrize(
    "env_id, kwargs",
    [
        ("GPUCartPole-v1", {}),
        ("GPUMountainCarContinuous-v0", {"autoreset_mode": "SameStep", "max_episode_steps": 7}),
        ("GPUAcrobot-v1", {"copy": False, "max_episode_steps": 5}),
        ("GPUTag-v0", {"num_runners": 3, "episode_length": 9}),
        ("GPUTagGrid-v0", {"autoreset_mode": "SameStep", "episode_length": 6}),
    ],
)
def test_unpickled_env_continues_bit_for_bit(env_id, kwargs):
    env = make_vec(env_id, 3, device="cpu", **kwargs)
    env.reset(seed=11)
    env.action_space.seed(4)
    for _ in range(12):  # past some autoresets: the RNG counters have moved
        env.step(env.action_space.sample())
    twin = pickle.loads(pickle.dumps(env))
    assert type(twin) is type(env) and twin.env_id == env_id
    assert twin.params == env.params and twin.autoreset_mode == env.autoreset_mode
    for name, value in env.get_state().items():
        assert torch.equal(twin.get_state()[name], value), name
    _assert_same_future(env, twin, 40)


def test_deepcopy_and_gymnasium_made_envs():
    vec = gym.make_vec("GPUPendulum-v1", 2, device="cpu")
    vec.reset(seed=3)
    vec.action_space.seed(0)
    twin = copy.deepcopy(vec)
    assert twin.spec.id == "GPUPendulum-v1" and twin.buffers.seed is not vec.buffers.seed
    _assert_same_future(vec, twin, 5)

    single = gym.make("GPUCartPole-v1")  # the one-env numpy view inside Gymnasium's wrappers
    single.reset(seed=5)
    copied = pickle.loads(pickle.dumps(single))
    for action in (0, 1, 1, 0, 1):
        ours, theirs = single.step(action), copied.step(action)
        np.testing.assert_array_equal(ours[0], theirs[0])
        assert ours[1:4] == theirs[1:4]


def test_before_reset_after_close_and_pettingzoo_views():
    fresh = pickle.loads(pickle.dumps(make_vec("GPUCartPole-v1", 2, device="cpu")))
    with pytest.raises(gym.error.ResetNeeded):
        fresh.step(np.zeros(2, dtype=np.int64))
    closed = make_vec("GPUCartPole-v1", 2, device="cpu")
    closed.close()
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed env cannot be pickled"):
        pickle.dumps(closed)

    batched = gpu_vecenv.parallel_env("GPUTag-v0", 2, device="cpu")
    batched.reset(seed=1)
    assert torch.equal(
        pickle.loads(pickle.dumps(batched)).vec.get_state()["x"], batched.vec.get_state()["x"]
    )
    one_game = OneGameParallelEnv(num_runners=2)
    obs, _ = one_game.reset(seed=2)
    copied = pickle.loads(pickle.dumps(one_game))
    actions = {agent: np.array([3, 7]) for agent in one_game.agents}
    np.testing.assert_array_equal(
        one_game.step(actions)[0]["runner_0"], copied.step(actions)[0]["runner_0"]
    )
