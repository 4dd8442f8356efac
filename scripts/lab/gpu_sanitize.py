#!/usr/bin/env python3
"""Run compute-sanitizer (memcheck and racecheck by default) over every classic-env kernel.

    python scripts/lab/gpu_sanitize.py [--tools memcheck racecheck] [--log-dir DIR]

Each tool runs this script again under ``compute-sanitizer`` with ``--drive``: every
classic env, in all three autoreset modes, at sizes that are not multiples of the block
(1, 1000), with both step kernels (``_step_small`` and ``_step``): full and masked resets,
30 steps with 5% invalid actions (so the autoreset, time limit and error-count paths all
run), state injection, observe and ``sample_actions()`` (``sample_actions.cu``). Exit
status 0 only if
every tool reports "ERROR SUMMARY: 0 errors".
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import subprocess
import sys
import time

CLASSIC_IDS = ["GPUCartPole-v1", "GPUAcrobot-v1", "GPUMountainCar-v0",
               "GPUMountainCarContinuous-v0", "GPUPendulum-v1"]


def drive() -> None:
    import torch
    from gymnasium.vector import AutoresetMode

    from gpu_vecenv.actions import InvalidActionError
    from gpu_vecenv.backends import cuda as cuda_backend
    from gpu_vecenv.entry_points import make_vec

    gen = torch.Generator(device="cuda").manual_seed(0)
    small_max = cuda_backend.SMALL_STEP_MAX_ENVS
    for env_id in CLASSIC_IDS:
        for mode, small in itertools.product(AutoresetMode, (True, False)):
            # both step kernels: <name>_step_small and <name>_step
            cuda_backend.SMALL_STEP_MAX_ENVS = small_max if small else 0
            for n in (1, 1000):
                env = make_vec(env_id, n, device="cuda", backend="cuda", autoreset_mode=mode,
                               strict=False, max_episode_steps=7)
                env.reset(seed=1)
                space = env.single_action_space
                for t in range(30):
                    if t % 3 == 0:
                        env.sample_actions()
                    if env.actions.kind == "discrete":
                        action = torch.randint(-1, int(space.n) + 1, (n,), device="cuda",
                                               generator=gen)
                    else:
                        action = torch.randn((n, 1), device="cuda", generator=gen) * 3
                        action[torch.rand(n, device="cuda", generator=gen) < 0.05] = float("nan")
                    try:
                        env.step(action)
                    except InvalidActionError:
                        pass
                    if t % 10 == 5:
                        mask = torch.rand(n, device="cuda", generator=gen) < 0.5
                        mask[0] = True
                        try:
                            env.check_errors()  # reset() would raise the deferred error
                        except InvalidActionError:
                            pass
                        env.reset(options={"reset_mask": mask})
                env.set_state(env.get_state())
                try:
                    env.check_errors()
                except InvalidActionError:
                    pass
                torch.cuda.synchronize()
        print(f"drove {env_id}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", nargs="+", default=["memcheck", "racecheck"])
    parser.add_argument("--log-dir", default=None)
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        drive()
        return 0
    failed = []
    for tool in args.tools:
        command = ["compute-sanitizer", "--tool", tool, "--error-exitcode", "9",
                   "--print-limit", "20", sys.executable, os.path.abspath(__file__), "--drive"]
        begin = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        output = result.stdout + result.stderr
        if args.log_dir:
            with open(os.path.join(args.log_dir, f"sanitize_{tool}.log"), "w") as f:
                f.write(output)
        summary = re.findall(r"=+ (?:RACECHECK SUMMARY|ERROR SUMMARY):.*", output)
        print(f"{tool}: exit {result.returncode} in {time.perf_counter() - begin:.0f} s; "
              f"{' | '.join(summary) or 'no summary line'}")
        if result.returncode != 0 or not summary or any(
                not re.search(r": 0 (errors|hazards)", s) for s in summary):
            failed.append(tool)
            print(output[-3000:])
    print("sanitizer: " + ("FAILED " + " ".join(failed) if failed else "all clean"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
