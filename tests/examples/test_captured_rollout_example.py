"""examples/captured_rollout.py runs on the CPU with tiny sizes (its eager loop there), as a
user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "captured_rollout.py"


def test_captured_rollout_example_runs():
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    result = subprocess.run([sys.executable, str(EXAMPLE), "--device", "cpu", "--num-envs",
                             "16", "--num-steps", "8", "--calls", "5"], capture_output=True,
                            text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "16 envs x 8 steps x 5 calls on cpu (eager: the env's device is cpu" in result.stdout
