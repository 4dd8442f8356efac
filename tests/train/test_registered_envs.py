"""The trainer on envs registered at run time: by id, and given an env instance
(``train(envs, PPOConfig())``), single- and multi-agent; the instance's clear errors."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest
import torch
import yaml

import gpu_vecenv
from gpu_vecenv.envs import tag_grid
from gpu_vecenv.train.config import PPOConfig
from gpu_vecenv.train.train_function import train
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING

QUIET = dict(progress=False, tensorboard=False)


def test_train_by_a_registered_id(tmp_path):
    gpu_vecenv.register("Counting-v0", COUNTING, kwargs={"terminate_at": 6.0})
    result = train(
        "Counting-v0",
        PPOConfig(num_steps=4),
        num_envs=4,
        total_steps=32,
        device="cpu",
        run_dir=str(tmp_path / "run"),
        eval_episodes=2,
        **QUIET,
    )
    assert result.global_step == 32 and result.evaluation["episodes"] == 2


def test_train_an_env_instance_then_resume_it(tmp_path):
    gpu_vecenv.register("Counting-v0", COUNTING, kwargs={"terminate_at": 6.0})
    envs = gpu_vecenv.make_vec(
        "Counting-v0",
        4,
        device="cpu",
        autoreset_mode="SameStep",
        terminate_at=9.0,
        max_episode_steps=7,
    )
    run_dir = tmp_path / "run"
    result = train(
        envs, PPOConfig(num_steps=4), total_steps=32, run_dir=str(run_dir), eval_episodes=2, **QUIET
    )
    assert result.global_step == 32
    # evaluation made the same env again by id: 9 steps to the end, cut at 7
    assert result.evaluation["mean_length"] == 7
    trainer = yaml.safe_load((run_dir / "config.yaml").read_text())["trainer"]
    assert (trainer["env"], trainer["num_envs"], trainer["device"], trainer["backend"]) == (
        "Counting-v0",
        4,
        "cpu",
        "torch",
    )
    assert trainer["env_kwargs"] == {"terminate_at": 9.0, "max_episode_steps": 7}

    again = gpu_vecenv.make_vec(
        "Counting-v0",
        4,
        device="cpu",
        autoreset_mode="SameStep",
        terminate_at=9.0,
        max_episode_steps=7,
    )
    resumed = train(
        again, PPOConfig(num_steps=4), total_steps=64, run_dir=str(run_dir), resume=True, **QUIET
    )
    assert resumed.global_step == 64


def test_train_a_multi_agent_instance(tmp_path):
    gpu_vecenv.register("SmallGrid-v0", tag_grid.DEFINITION, kwargs={"grid_length": 4})
    envs = gpu_vecenv.make_vec(
        "SmallGrid-v0", 2, device="cpu", autoreset_mode="SameStep", num_taggers=2
    )
    result = train(
        envs,
        PPOConfig(num_steps=4),
        total_steps=48,
        run_dir=str(tmp_path / "r"),
        eval_episodes=0,
        **QUIET,
    )
    assert result.global_step == 48  # 2 games x 3 agents x 4 steps x 2 iterations
    assert {"tagger/policy_loss", "runner/policy_loss"} <= set(result.metrics[-1])


def test_an_env_instance_the_trainer_cannot_use_is_a_clear_error(tmp_path):
    gpu_vecenv.register("Counting-v0", COUNTING)
    same_step = dict(device="cpu", autoreset_mode="SameStep")
    with pytest.raises(ValueError, match="autoreset_mode='SameStep'"):
        train(gpu_vecenv.make_vec("Counting-v0", 2, device="cpu"), PPOConfig(), **QUIET)
    with pytest.raises(TypeError, match="num_envs come"):
        train(gpu_vecenv.make_vec("Counting-v0", 2, **same_step), PPOConfig(), num_envs=8)
    with pytest.raises(TypeError, match="not a wrapper"):
        wrapped = gym.vector.VectorWrapper(gpu_vecenv.make_vec("Counting-v0", 2, **same_step))
        train(wrapped, PPOConfig())
    unregistered = GpuVectorEnv(dataclasses.replace(COUNTING, name="other"), 2, **same_step)
    with pytest.raises(ValueError, match=r"not registered.*gpu_vecenv.register"):
        train(unregistered, PPOConfig())
    # made without make_vec, but from a registered definition: found by its definition
    plain = GpuVectorEnv(COUNTING, 2, **same_step)
    result = train(
        plain,
        PPOConfig(num_steps=4, num_minibatches=1),
        total_steps=8,
        run_dir=str(tmp_path / "run"),
        eval_episodes=0,
        **QUIET,
    )
    assert result.global_step == 8
    assert torch.is_tensor(plain.get_state()["count"])


def test_default_run_directory_of_a_namespaced_id_is_one_portable_folder(tmp_path, monkeypatch):
    """'ns/Name-v0' and 'module:Name-v0' ids: no nested folder, no ':' (not valid on Windows)."""
    monkeypatch.chdir(tmp_path)
    gpu_vecenv.register("testns/Counting-v0", COUNTING, kwargs={"terminate_at": 6.0})
    train("testns/Counting-v0", PPOConfig(num_steps=4), num_envs=4, total_steps=16,
          device="cpu", eval_episodes=1, **QUIET)
    (run,) = (tmp_path / "runs").iterdir()
    assert run.name.startswith("testns_Counting-v0__ppo__") and ":" not in run.name
