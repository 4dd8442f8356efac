"""NormalizeObservation and NormalizeReward against Gymnasium's numpy wrappers on the same
numbers, and where ours go further (SAME_STEP final obs, partial resets, Tag's idle
slots, clipping) against statistics worked out with Gymnasium's numpy RunningMeanStd."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.utils import RunningMeanStd as NumpyRunningMeanStd
from gymnasium.wrappers.vector import NormalizeObservation as GymNormalizeObservation
from gymnasium.wrappers.vector import NormalizeReward as GymNormalizeReward

import gpu_vecenv
from gpu_vecenv.wrappers import NormalizeObservation, NormalizeReward, RunningMeanStd
from tests.wrappers.scripted_env import ScriptedVectorEnv, random_script

STEPS, N = 40, 6
ACTIONS = torch.zeros(N, dtype=torch.int64)


def close(ours: torch.Tensor, expected: np.ndarray) -> None:
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_running_mean_std_matches_gymnasium_and_honours_masks():
    rng = np.random.default_rng(0)
    ours, theirs = RunningMeanStd((3,)), NumpyRunningMeanStd(shape=(3,))
    for _ in range(5):
        x = rng.normal(4.0, 2.0, (7, 3))
        mask = rng.random(7) < 0.5
        ours.update(torch.as_tensor(x), mask=torch.as_tensor(mask))
        if mask.any():
            theirs.update(x[mask])
    ours.update(torch.as_tensor(x))  # no mask: every row
    theirs.update(x)
    close(ours.mean, theirs.mean)
    close(ours.var, theirs.var)
    assert ours.count.item() == pytest.approx(theirs.count)
    before = ours.state_dict()
    ours.update(torch.full((2, 3), float("nan")), mask=torch.tensor([False, False]))
    assert all(torch.equal(before[k], v) for k, v in ours.state_dict().items())


def test_observations_as_gymnasium_normalizes_them():
    # Gymnasium's accepts only NEXT_STEP
    script, mode = random_script(STEPS, N, seed=2), AutoresetMode.NEXT_STEP
    ours = NormalizeObservation(ScriptedVectorEnv(script, mode, device="cpu"))
    theirs = GymNormalizeObservation(ScriptedVectorEnv(script, mode))
    close(ours.reset(seed=0)[0], theirs.reset(seed=0)[0])
    for _ in range(STEPS):
        obs = ours.step(ACTIONS)[0]
        assert obs.dtype == torch.float32
        close(obs, theirs.step(ACTIONS.numpy())[0])
    close(ours.obs_rms.mean, theirs.obs_rms.mean)
    close(ours.obs_rms.var, theirs.obs_rms.var)
    ours.update_running_mean = False
    frozen = ours.obs_rms.state_dict()
    ours.reset()
    assert torch.equal(frozen["mean"], ours.obs_rms.mean)


def test_same_step_final_obs_use_the_statistics_of_obs():
    script = random_script(STEPS, N, seed=3)
    envs = NormalizeObservation(ScriptedVectorEnv(script, AutoresetMode.SAME_STEP, device="cpu"))
    rms = NumpyRunningMeanStd(shape=(3,))
    rms.update(script.obs[0])
    envs.reset(seed=0)
    for t in range(STEPS):
        obs, *_, info = envs.step(ACTIONS)
        rms.update(script.obs[t + 1])  # the final observations do not update them
        scale = np.sqrt(rms.var + 1e-8)
        close(obs, (script.obs[t + 1] - rms.mean) / scale)
        close(info["final_obs"], (script.final_obs[t] - rms.mean) / scale)
    assert "final_obs" in info and info["_final_obs"].shape == (N,)


def test_partial_reset_and_idle_slots_leave_rows_out_of_the_statistics():
    script = random_script(3, N, seed=4)
    script.active = np.random.default_rng(5).random((4, N)) < 0.6
    envs = NormalizeObservation(ScriptedVectorEnv(script, AutoresetMode.DISABLED, device="cpu"))
    rms = NumpyRunningMeanStd(shape=(3,))
    envs.reset(seed=0)
    rms.update(script.obs[0][script.active[0]])
    obs, *_ = envs.step(ACTIONS)
    rms.update(script.obs[1][script.active[1]])
    assert (obs[~torch.as_tensor(script.active[1])] == 0).all()  # idle rows stay zero
    mask = np.array([True, False, True, False, False, False])
    obs, _ = envs.reset(options={"reset_mask": mask})
    rms.update(script.obs[1][mask & script.active[1]])
    close(envs.obs_rms.mean, rms.mean)
    close(envs.obs_rms.var, rms.var)
    live = script.active[1]
    close(obs[live], ((script.obs[1] - rms.mean) / np.sqrt(rms.var + 1e-8))[live])


def test_clip_and_bad_arguments():
    env = gpu_vecenv.make_vec("GPUCartPole-v1", 8, device="cpu")
    envs = NormalizeObservation(env, clip=0.5)
    assert envs.single_observation_space == gym.spaces.Box(-0.5, 0.5, (4,), np.float32)
    assert envs.observation_space.shape == (8, 4)
    obs, _ = envs.reset(seed=0)
    assert obs.abs().max() <= 0.5 and (obs.abs() == 0.5).any()
    for kwargs in ({"epsilon": 0.0}, {"clip": -1.0}):
        with pytest.raises(gym.error.InvalidBound):
            NormalizeObservation(env, **kwargs)
    for kwargs in ({"gamma": 1.5}, {"epsilon": -1.0}, {"clip": 0.0}):
        with pytest.raises(gym.error.InvalidBound):
            NormalizeReward(env, **kwargs)
    env.single_observation_space = gym.spaces.Discrete(3)
    with pytest.raises(TypeError, match="Box observations"):
        NormalizeObservation(env)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_rewards_as_gymnasium_normalizes_them(mode):
    script = random_script(STEPS, N, seed=6)
    ours = NormalizeReward(ScriptedVectorEnv(script, mode, device="cpu"), gamma=0.9)
    theirs = GymNormalizeReward(ScriptedVectorEnv(script, mode), gamma=0.9)
    ours.reset(seed=0)
    theirs.reset(seed=0)
    for _ in range(STEPS):
        reward = ours.step(ACTIONS)[1]
        assert reward.dtype == torch.float32
        close(reward, theirs.step(ACTIONS.numpy())[1])
    close(ours.accumulated_reward, theirs.accumulated_reward)
    close(ours.return_rms.var, theirs.return_rms.var)


def test_reward_partial_reset_clip_and_frozen_statistics():
    script = random_script(4, N, seed=7, done_rate=0.0)
    envs = NormalizeReward(
        ScriptedVectorEnv(script, AutoresetMode.DISABLED, device="cpu"), gamma=1.0, clip=0.1
    )
    envs.reset(seed=0)
    for _ in range(2):
        reward = envs.step(ACTIONS)[1]
    assert reward.abs().max() <= 0.1
    close(envs.accumulated_reward, script.reward[:2].sum(axis=0))
    mask = np.array([True, True, False, False, False, False])
    envs.reset(options={"reset_mask": mask})
    expected = np.where(mask, 0.0, script.reward[:2].sum(axis=0))
    close(envs.accumulated_reward, expected)
    envs.update_running_mean = False
    var = envs.return_rms.var.clone()
    envs.step(ACTIONS)
    assert torch.equal(var, envs.return_rms.var)
    close(envs.accumulated_reward, expected + script.reward[2])
