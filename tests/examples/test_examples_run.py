"""Every example runs on the CPU with tiny sizes, as a user would run it (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

RUNS = {
    "random_rollout": ["random_rollout.py", "--num-envs", "32", "--steps", "200",
                       "--device", "cpu"],
    "random_rollout_box": ["random_rollout.py", "--env-id", "GPUPendulum-v1", "--num-envs",
                           "8", "--steps", "210", "--device", "cpu"],
    "sb3_ppo": ["sb3_ppo.py", "--num-envs", "4", "--total-timesteps", "256",
                "--eval-episodes", "2", "--device", "cpu"],
    "torchrl_collector": ["torchrl_collector.py", "--num-envs", "16", "--frames-per-batch",
                          "256", "--batches", "2", "--device", "cpu"],
    "cleanrl_ppo": ["cleanrl_ppo.py", "--device", "cpu", "--num-envs", "16", "--num-steps",
                    "16", "--total-timesteps", "1024", "--log-every", "2"],
    "tag_pettingzoo_batched": ["tag_pettingzoo_batched.py", "--num-games", "4", "--steps",
                               "30", "--device", "cpu"],
    "tag_quickstart": ["tag_quickstart.py", "--device", "cpu", "--games", "2"],
}

EXPECTED = {
    "random_rollout": "episodes, mean return",
    "random_rollout_box": "GPUPendulum-v1: 8 envs x 210 steps",
    "sb3_ppo": "PPO after 256 steps",
    "torchrl_collector": "batch 1: (16, 16)",
    "cleanrl_ppo": "iteration 4/4",
    "tag_pettingzoo_batched": "agent-steps/s",
    "tag_quickstart": "runners tagged in 100 steps",
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_example_runs(name):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, str(EXAMPLES / RUNS[name][0]), *RUNS[name][1:]],
                            capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    assert EXPECTED[name] in result.stdout, result.stdout
