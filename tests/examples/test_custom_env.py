"""The custom-env tutorial's env (examples/custom_env): conformance, registration, the
tutorial's last step (training it with the `gpu-vecenv` CLI), its .cu builds for sm_90, and
its kernel math equals the torch reference by state injection (run on the CPU through
examples/custom_env/host_check.cu)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpu_vecenv
from gpu_vecenv.backends.compiler import CUDA_SRC, build_command, find_nvcc
from gpu_vecenv.checks import check_env
from gpu_vecenv.kernel_binding import check_layout
from gpu_vecenv.vector_env import GpuVectorEnv

HERE = Path(__file__).resolve().parents[2] / "examples" / "custom_env"
sys.path.insert(0, str(HERE))
import point_reach  # noqa: E402

nvcc_required = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def test_check_env_passes():
    report = check_env(point_reach.DEFINITION, num_envs=8, steps=32)
    assert {"reference", "api", "autoreset", "state", "seeding"} <= set(report.passed)


def test_importing_its_module_registers_it():
    importlib.reload(point_reach)  # the import did this; the test set-up undid it
    importlib.reload(point_reach)  # a module run twice (autoreload) is no duplicate id
    envs = gym.make_vec("PointReach-v0", num_envs=4, device="cpu")
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (4, 3) and bool((obs[:, 1] == 0).all())
    assert envs.max_episode_steps == 200
    assert gpu_vecenv.make_vec("PointReach-v0", 4).definition is point_reach.DEFINITION
    single = gym.make("PointReach-v0")
    assert single.spec.max_episode_steps == 200 and single.reset(seed=0)[0].shape == (3,)


def _cli() -> list[str]:
    """The console script a user runs (its sys.path does not hold the working folder)."""
    script = Path(sys.executable).with_name("gpu-vecenv")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "gpu_vecenv.cli"]


def test_the_tutorials_last_step_trains_it_with_the_cli(tmp_path):
    run_dir = tmp_path / "run"
    train = subprocess.run(
        [*_cli(), "train", "--env", "point_reach:PointReach-v0", "--num-envs", "8",
         "--total-steps", "256", "--device", "cpu", "--no-progress", "--run-dir", str(run_dir),
         "--set", "ppo.num_steps=16", "--set", "trainer.eval_episodes=2"],
        cwd=HERE, capture_output=True, text=True, timeout=240, check=False)
    assert train.returncode == 0, train.stderr
    assert "training point_reach:PointReach-v0 with ppo" in train.stdout
    assert "evaluation over 2 episodes" in train.stdout
    assert "env: point_reach:PointReach-v0" in (run_dir / "config.yaml").read_text()
    # a later command in the same folder makes the env again from the run's config
    evaluate = subprocess.run([*_cli(), "eval", str(run_dir), "--episodes", "2", "--device",
                               "cpu"], cwd=HERE, capture_output=True, text=True, timeout=240,
                              check=False)
    assert evaluate.returncode == 0, evaluate.stderr
    assert "evaluation over 2 episodes" in evaluate.stdout


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

    # the layout the kernels export, checked as the CUDA backend checks it at load
    layout = subprocess.run([str(exe), "layout"], capture_output=True, text=True, check=False)
    assert layout.stdout == ("float force;float dt;float max_speed;float goal_tolerance;"
                             "float speed_tolerance;")
    check_layout("point_reach", point_reach.DEFINITION.kernel_binding, params, layout.stdout)


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
