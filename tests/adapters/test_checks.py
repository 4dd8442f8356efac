"""gpu_vecenv.checks.check_env passes good envs and catches each kind of broken one."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gpu_vecenv import make_vec
from gpu_vecenv.checks import EnvCheckError, check_env
from gpu_vecenv.envs import cartpole

GOOD = cartpole.DEFINITION


def test_passes_on_a_definition_and_reports_the_kernel_skip():
    report = check_env(GOOD, num_envs=8, steps=16)
    assert report.passed == ["reference", "api", "autoreset", "state", "seeding"]
    assert "kernel" in report.skipped and "CUDA" in report.skipped["kernel"]
    assert "passed: reference" in str(report)


def test_passes_on_a_made_env_and_on_multi_agent_ids():
    env = make_vec("GPUPendulum-v1", 4, device="cpu", autoreset_mode="SAME_STEP")
    assert check_env(env, steps=8).passed == ["api", "state", "seeding"]
    assert "seeding" in check_env("GPUTag-v0", num_envs=2, steps=8).passed


def test_kernel_check_demanded_without_cuda_fails():
    with pytest.raises(EnvCheckError, match="kernel"):
        check_env(GOOD, num_envs=4, steps=4, check_kernel=True)


def _broken(**changes):
    return dataclasses.replace(GOOD, **changes)


def _in_place_step(p, state, action):
    new_state, reward, terminated = cartpole.step(p, state, action)
    state["x"].add_(1.0)
    return new_state, reward, terminated


def _seed_blind_reset(p, u):
    return cartpole.reset(p, torch.full_like(u, 0.5))


def _float64_reward(p, state, action):
    new_state, reward, terminated = cartpole.step(p, state, action)
    return new_state, reward.double(), terminated


def _escaping_observe(p, state):
    return cartpole.observe(p, state) * 100.0


def _stateful_reset():
    calls = []

    def reset(p, u):
        calls.append(1)
        return cartpole.reset(p, u + 0.01 * len(calls) % 1.0)

    return reset


@pytest.mark.parametrize(("broken", "match"), [
    (_broken(step=_in_place_step), r"\[reference\].*in place"),
    (_broken(step=_float64_reward), r"\[reference\].*reward must be"),
    (_broken(reset=_stateful_reset()), r"\[reference\].*pure function"),
    (_broken(observe=_escaping_observe), r"\[api\].*outside the observation space"),
    (_broken(reset=_seed_blind_reset), r"\[seeding\]"),
])
def test_catches_broken_envs(broken, match):
    with pytest.raises(EnvCheckError, match=match):
        check_env(broken, num_envs=8, steps=16)


def test_seed_sensitive_false_accepts_a_deterministic_start():
    report = check_env(_broken(reset=_seed_blind_reset), num_envs=8, steps=8,
                       seed_sensitive=False)
    assert "seeding" in report.passed


def _same_step(definition, **params):
    from gpu_vecenv.vector_env import GpuVectorEnv

    return GpuVectorEnv(definition, 16, device="cpu", backend="torch",
                        autoreset_mode="SAME_STEP", max_episode_steps=25, **params)


def test_compare_backends_accepts_equal_and_catches_different_dynamics():
    from gpu_vecenv.checks import compare_backends

    compare_backends(_same_step(GOOD), _same_step(GOOD), steps=40)
    with pytest.raises(EnvCheckError, match=r"\[kernel\] roll-out step 0: obs"):
        compare_backends(_same_step(GOOD), _same_step(GOOD, gravity=12.0), steps=40)
    with pytest.raises(EnvCheckError, match=r"\[kernel\] reset: obs"):
        compare_backends(_same_step(GOOD), _same_step(GOOD, reset_bound=0.04), steps=4)
