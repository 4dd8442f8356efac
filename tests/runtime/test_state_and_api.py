"""get_state / set_state, spaces, and the Gymnasium plugin entry points."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils.env_checker import check_env

from gpu_vecenv import list_envs, make_vec
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING


def test_get_set_state_round_trip_reproduces_the_future():
    env = make_vec("GPUCartPole-v1", 16, device="cpu")
    env.reset(seed=1)
    actions = np.arange(16) % 2
    for _ in range(30):
        env.step(actions)
    saved = env.get_state()
    future = [env.step(actions)[0] for _ in range(40)]
    obs = env.set_state(saved)
    assert torch.equal(obs, env.definition.observe(env.params, env.buffers.state))
    replay = [env.step(actions)[0] for _ in range(40)]
    for a, b in zip(future, replay, strict=True):
        assert torch.equal(a, b)


def test_set_state_subset_and_observation():
    env = GpuVectorEnv(COUNTING, 3, device="cpu")
    env.reset(seed=0)
    obs = env.set_state({"count": np.array([1.0, 2.0, 3.0], dtype=np.float32)})
    assert obs.flatten().tolist() == [1.0, 2.0, 3.0]
    assert env.get_state()["elapsed_steps"].tolist() == [0, 0, 0]


def test_batched_spaces():
    env = make_vec("GPUCartPole-v1", 5, device="cpu")
    assert env.num_envs == 5
    assert env.observation_space.shape == (5, 4)
    assert env.observation_space.dtype == np.float32
    assert isinstance(env.action_space, gym.spaces.MultiDiscrete)
    assert env.action_space.shape == (5,)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == torch.float32 and obs.shape == (5, 4)
    _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    assert reward.dtype == torch.float32 and reward.shape == (5,)
    assert terminated.dtype == torch.bool and truncated.dtype == torch.bool


def test_registered_ids():
    assert {"GPUCartPole-v1", "GPUAcrobot-v1", "GPUMountainCar-v0",
            "GPUMountainCarContinuous-v0", "GPUPendulum-v1"} <= set(list_envs())
    for env_id in list_envs():
        assert env_id in gym.registry


def test_make_vec_in_a_fresh_interpreter_without_our_import():
    code = textwrap.dedent("""
        import sys
        import gymnasium
        assert "torch" not in sys.modules, "registering must not import torch"
        env = gymnasium.make_vec("GPUCartPole-v1", num_envs=64, device="cpu")
        obs, info = env.reset(seed=0)
        assert tuple(obs.shape) == (64, 4), obs.shape
        assert env.num_envs == 64
        assert env.spec.id == "GPUCartPole-v1"
        assert env.max_episode_steps == 500
        print("ok", type(env).__name__)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "ok GpuVectorEnv" in out.stdout


def _installed_pth_file() -> Path:
    import site
    import sysconfig
    dirs = [*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_path("purelib")]
    for directory in dirs:
        candidate = Path(directory) / "gpu_vecenv-gymnasium.pth"
        if candidate.is_file():
            return candidate
    raise AssertionError(f"gpu_vecenv-gymnasium.pth is not installed in any of {dirs}")


def test_pth_line_is_silent_when_the_package_is_gone(tmp_path):
    """A moved or half-removed install must not print a traceback at every start."""
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "gpu_vecenv-gymnasium.pth").write_text(_installed_pth_file().read_text())
    code = ("import site, sys; sys.modules['gpu_vecenv'] = None; "
            f"site.addsitedir({str(site_dir)!r}); print('clean')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "clean", out
    assert out.stderr == "", out.stderr


def test_gymnasium_make_single_env_passes_check_env():
    env = gym.make("GPUCartPole-v1")
    assert env.spec.max_episode_steps == 500
    check_env(env.unwrapped)
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, np.ndarray) and obs.dtype == np.float32
    steps = 0
    while True:
        obs, reward, terminated, truncated, _ = env.step(0)
        steps += 1
        if terminated or truncated:
            break
    assert terminated and steps < 100


def test_default_device_is_cpu_without_cuda():
    if not torch.cuda.is_available():
        env = make_vec("GPUCartPole-v1", 2)
        assert env.device.type == "cpu" and env.backend_name == "torch"
