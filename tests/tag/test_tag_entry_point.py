"""``gymnasium.make_vec("GPUTag-v0", num_games=4096)`` in a fresh interpreter, without
importing gpu_vecenv first (the installed start-up hook registers the ids)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import gymnasium
assert "gpu_vecenv.envs.tag" not in sys.modules
env = gymnasium.make_vec("GPUTag-v0", num_games=4096, device="cpu")
obs, info = env.reset(seed=0)
obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
grid = gymnasium.make_vec("GPUTagGrid-v0", num_games=8, device="cpu")
print(type(env).__name__, env.num_envs, *obs.shape, grid.num_envs)
"""


def test_make_vec_in_a_fresh_interpreter():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["MultiAgentVectorEnv", str(4096 * 11), str(4096 * 11),
                                     "72", "88"]
