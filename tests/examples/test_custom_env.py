"""The custom-env tutorial's env (examples/custom_env): conformance, registration, its .cu
builds for sm_90, and its kernel math equals the torch reference by state injection (run on
the CPU through examples/custom_env/host_check.cu)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from gpu_vecenv.backends.compiler import CUDA_SRC, build_command, find_nvcc
from gpu_vecenv.checks import check_env
from gpu_vecenv.vector_env import GpuVectorEnv

HERE = Path(__file__).resolve().parents[2] / "examples" / "custom_env"
sys.path.insert(0, str(HERE))
import point_reach  # noqa: E402

nvcc_required = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def test_check_env_passes():
    report = check_env(point_reach.DEFINITION, num_envs=8, steps=32)
    assert {"reference", "api", "autoreset", "state", "seeding"} <= set(report.passed)


def test_registered_with_gymnasium():
    point_reach.register("PointReach-v0")
    envs = gym.make_vec("PointReach-v0", num_envs=4, device="cpu")
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 3) and bool((obs[:, 1] == 0).all())


@nvcc_required
def test_kernel_compiles_for_sm90(tmp_path):
    command = build_command(find_nvcc(), HERE / "point_reach.cu", tmp_path / "pr.cubin", (9, 0),
                            extra_flags=("-Werror", "all-warnings"))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    assert (tmp_path / "pr.cubin").stat().st_size > 0


def _hex(values) -> str:
    return " ".join(float(np.float32(v)).hex() for v in values)


@nvcc_required
def test_kernel_math_equals_reference_by_state_injection(tmp_path):
    exe = tmp_path / "host_check"
    command = [find_nvcc(), "-arch=sm_90", "-O2", "-std=c++17", "-fmad=false",
               "-Xcompiler", "-ffp-contract=off", "-I", str(CUDA_SRC), "-I", str(HERE),
               "-o", str(exe), str(HERE / "host_check.cu")]
    built = subprocess.run(command, capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr + built.stdout

    # the states the reference visits, under random actions (terminal ones included)
    env = GpuVectorEnv(point_reach.DEFINITION, 64, device="cpu", max_episode_steps=50)
    env.reset(seed=3)
    generator = torch.Generator().manual_seed(0)
    states, actions = [], []
    for _ in range(60):
        action = torch.randint(3, (64,), generator=generator)
        states.append({k: v.clone() for k, v in env.buffers.state.items()})
        actions.append(action)
        env.step(action)
    state = {k: torch.cat([s[k] for s in states]) for k in states[0]}
    action = torch.cat(actions)
    params = env.params
    new_state, reward, terminated = point_reach.step(params, state, action)
    obs = point_reach.observe(params, new_state)

    lines = [str(len(action))] + [
        f"{_hex([state['position'][i], state['velocity'][i], state['target'][i]])} "
        f"{int(action[i])}" for i in range(len(action))]
    consts = [value for _, value in point_reach.kernel_consts(params)]
    run = subprocess.run([str(exe), *(_hex([v]) for v in consts)], input="\n".join(lines),
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    rows = [line.split() for line in run.stdout.splitlines()]
    host = torch.tensor([[float.fromhex(v) for v in row] for row in rows], dtype=torch.float32)
    assert host.shape == (len(action), 8)
    expected = torch.stack([new_state["position"], new_state["velocity"], new_state["target"],
                            reward, terminated.float(), obs[:, 0], obs[:, 1], obs[:, 2]], dim=1)
    assert bool(terminated.any())  # the comparison covers terminal steps
    assert torch.equal(host, expected)  # bit for bit


@pytest.mark.gpu
def test_kernel_runs_through_the_cuda_backend_and_matches_the_reference():
    report = check_env(point_reach.DEFINITION, num_envs=4096, steps=300, device="cuda",
                       check_kernel=True)
    assert "kernel" in report.passed


def test_definition_points_the_cuda_backend_at_its_own_kernel_file():
    binding = point_reach.DEFINITION.kernel_binding
    assert Path(binding.path) == HERE / "point_reach.cu" and Path(binding.path).is_file()
    names = [name for name, _ in binding.consts(point_reach.PointReachParams())]
    assert names == ["force", "dt", "max_speed", "goal_tolerance", "speed_tolerance"]
