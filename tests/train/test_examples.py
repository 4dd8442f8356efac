"""The trainer examples run as a user would run them (subprocesses, tiny sizes, CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_train_examples_run(tmp_path):
    runs = {
        "train_cartpole.py": (["--device", "cpu", "--num-envs", "8", "--total-steps", "512",
                               "--eval-episodes", "2"], "mean return over 2 episodes"),
        "train_tag.py": (["--device", "cpu", "--games", "1", "--total-steps", "3520",
                          "--eval-games", "1"], "random taggers vs random runners"),
    }
    for script, (args, expected) in runs.items():
        proc = subprocess.run([sys.executable, str(EXAMPLES / script), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stderr
        assert expected in proc.stdout, proc.stdout
