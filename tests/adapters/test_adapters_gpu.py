"""GPU runs of the adapters and of check_env's kernel comparison (``-m gpu``, H200 machine)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu_vecenv.checks import check_env
from gpu_vecenv.envs import cartpole

pytestmark = pytest.mark.gpu


def test_sb3_adapter_on_cuda_matches_the_cpu_reference():
    from gpu_vecenv.adapters.sb3 import SB3VecEnv

    gpu = SB3VecEnv("GPUCartPole-v1", num_envs=256, device="cuda", max_episode_steps=40)
    cpu = SB3VecEnv("GPUCartPole-v1", num_envs=256, device="cpu", max_episode_steps=40)
    gpu.seed(0)
    cpu.seed(0)
    np.testing.assert_allclose(gpu.reset(), cpu.reset(), atol=1e-5)
    rng = np.random.default_rng(0)
    for _ in range(20):
        actions = rng.integers(0, 2, size=256)
        a, b = gpu.step(actions), cpu.step(actions)
        np.testing.assert_allclose(a[0], b[0], atol=1e-4)
        np.testing.assert_array_equal(a[2], b[2])


def test_torchrl_adapter_on_cuda_keeps_tensors_on_the_device():
    from torchrl.envs.utils import check_env_specs

    from gpu_vecenv.adapters.torchrl import TorchRLEnv, TorchRLTagEnv

    env = TorchRLEnv("GPUCartPole-v1", num_envs=1024, device="cuda")
    check_env_specs(env, seed=0)
    td = env.rollout(50, break_when_any_done=False)
    assert td.device.type == "cuda" and td["next", "observation"].is_cuda
    tag = TorchRLTagEnv("GPUTag-v0", num_games=64, device="cuda")
    check_env_specs(tag, seed=0)


def test_check_env_compares_the_kernels_with_the_reference():
    report = check_env(cartpole.DEFINITION, num_envs=512, steps=64, device="cuda",
                       check_kernel=True)
    assert "kernel" in report.passed
