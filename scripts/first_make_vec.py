#!/usr/bin/env python3
"""Time a user's first ``gymnasium.make_vec`` in a fresh process: imports, CUDA start-up,
then make_vec + reset (which compiles the kernels when the cache lacks them).

    python scripts/first_make_vec.py GPUCartPole-v1 1048576
    python scripts/first_make_vec.py GPUTag-v0 2000 '{"preset": "warpdrive_training"}'
"""

import json
import sys
import time

t0 = time.perf_counter()
import gymnasium as gym  # noqa: E402
import torch  # noqa: E402

t1 = time.perf_counter()
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
t2 = time.perf_counter()
env_id, num_envs = sys.argv[1], int(sys.argv[2])
kwargs = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
env = gym.make_vec(env_id, num_envs=num_envs, **kwargs)
env.reset(seed=0)
torch.cuda.synchronize()
t3 = time.perf_counter()
print(f"{env_id} x {num_envs} {kwargs or ''}: backend {env.unwrapped.backend_name}; imports "
      f"{t1 - t0:.2f} s, CUDA start {t2 - t1:.2f} s, make_vec + reset {t3 - t2:.2f} s")
