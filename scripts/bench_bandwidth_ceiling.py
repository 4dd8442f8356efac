"""How close the classic step kernels come to what their memory traffic alone attains.

For each env (CartPole: 4 state floats, a 4-float obs row, int64 actions; Pendulum: 2 state
floats, a 3-float obs row, float actions) at ``--size`` envs, three kernels are timed in turn,
round by round (median of ``--repeats`` rounds of ``--launches`` launches between CUDA events):

- ``step``: the env's own step kernel (``env.backend.step`` into the env's outputs, NEXT_STEP,
  ``copy=False``, a pool of 8 random action batches; the kernel the backend picks at this
  size, named in the output);
- ``step, no episode ends`` (CartPole): the same kernel on an env whose episodes never end
  (``x_threshold`` and ``theta_threshold_radians`` 1e9, no time limit), so no step resets
  an env: what the resets cost (a reset's seed and RNG counter are a second round trip to
  memory, taken by most warps at 4M envs);
- ``traffic``: ``step_traffic`` of ``scripts/bandwidth_ceiling.cu``: the same per-env arrays,
  layout, access widths and launch shape (one env per thread, 256-thread blocks), every load
  and store, no arithmetic: the ceiling of this access pattern;
- ``copy``: a float4 copy kernel moving the same bytes per env, half read, half written.

Each as env-steps/s and as a percentage of the device copy bandwidth (1 GiB ``copy_``, as
``gpu-vecenv bench``) that ``bytes_per_env_step`` amounts to.

    python scripts/bench_bandwidth_ceiling.py [--size 4194304] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from gpu_vecenv.backends.compiler import load_module
from gpu_vecenv.backends.cuda import BLOCK_SIZE
from gpu_vecenv.backends.launch import Kernel
from gpu_vecenv.bench import _action_pool, bytes_per_env_step, copy_bandwidth, machine_info
from gpu_vecenv.entry_points import make_vec

SOURCE = Path(__file__).resolve().parent / "bandwidth_ceiling.cu"
ENVS = {  # env id: -D flags of its traffic kernel
    "GPUCartPole-v1": ("-DSTATE_DIM=4", "-DOBS_DIM=4", "-DACTION_T=long long"),
    "GPUPendulum-v1": ("-DSTATE_DIM=2", "-DOBS_DIM=3", "-DACTION_T=float"),
}


def timed(fn, launches: int) -> float:
    """Seconds per launch of ``launches`` calls of ``fn`` between CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / launches


NEVER_ENDING = {"GPUCartPole-v1": dict(x_threshold=1e9, theta_threshold_radians=1e9)}
"""Params under which an env's episodes do not end within a benchmark."""


def stepper(env):
    """``(launch, action pool)``: the env's backend step over a pool of 8 action batches."""
    env.reset(seed=0)
    pool = _action_pool(env, 8)
    calls = {"k": 0}

    def step():
        calls["k"] += 1
        env.backend.step(pool[calls["k"] % 8], env._outputs)

    return step, pool


def kernels(env_id: str, n: int, device: torch.device) -> dict:
    """The three launches of one env, as argument-less callables."""
    env = make_vec(env_id, n, device=device, backend="cuda", copy=False, strict=False)
    step, pool = stepper(env)
    launches = {"step": step}
    if env_id in NEVER_ENDING:
        endless = make_vec(env_id, n, device=device, backend="cuda", copy=False, strict=False,
                           max_episode_steps=2**30, **NEVER_ENDING[env_id])
        launches["step, no episode ends"] = stepper(endless)[0]

    state_dim = len(env.definition.state_fields)
    action = pool[0]
    arrays = dict(
        pending=torch.zeros(n, dtype=torch.bool, device=device),
        elapsed=torch.zeros(n, dtype=torch.int32, device=device),
        state=torch.rand(state_dim, n, device=device),
        obs=torch.empty(n, env.obs_dim, device=device),
        reward=torch.empty(n, device=device),
        terminated=torch.empty(n, dtype=torch.bool, device=device),
        truncated=torch.empty(n, dtype=torch.bool, device=device),
        invalid=torch.empty(n, dtype=torch.bool, device=device))
    index = device.index or 0
    module = load_module("bandwidth_ceiling", index, SOURCE, ENVS[env_id])
    traffic_kernel = Kernel(module, "step_traffic", "PPPPPPPPPi")
    grid, block = ((n + BLOCK_SIZE - 1) // BLOCK_SIZE, 1, 1), (BLOCK_SIZE, 1, 1)
    traffic_args = (action.data_ptr(), *(t.data_ptr() for t in arrays.values()), n)

    def traffic():
        traffic_kernel(grid, block, traffic_args)

    bytes_per_env = bytes_per_env_step(env)
    n4 = n * bytes_per_env // 32  # float4s read (and as many written)
    src = torch.rand(n4 * 4, device=device)
    dst = torch.empty_like(src)
    copy_kernel = Kernel(module, "copy_traffic", "PPq")
    copy_grid = ((n4 + BLOCK_SIZE - 1) // BLOCK_SIZE, 1, 1)

    def copy():
        copy_kernel(copy_grid, block, (src.data_ptr(), dst.data_ptr(), n4))

    return dict(env=env, bytes_per_env=bytes_per_env, keep=(arrays, action, src, dst),
                step_kernel=env.backend._step_fn.name,
                launches={**launches, "traffic": traffic, "copy": copy})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4_194_304)
    parser.add_argument("--launches", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    device = torch.device("cuda")
    bandwidth = copy_bandwidth(device)
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s; {args.size:,} envs")
    results = []
    for env_id in ENVS:
        case = kernels(env_id, args.size, device)
        times = {name: [] for name in case["launches"]}
        for fn in case["launches"].values():
            timed(fn, 5)  # warm-up (and the first compile's load)
        for _ in range(args.repeats):
            for name, fn in case["launches"].items():
                times[name].append(timed(fn, args.launches))
        for name, samples in times.items():
            seconds = statistics.median(samples)
            rate = args.size / seconds
            share = case["bytes_per_env"] * rate / bandwidth
            label = f"{name} ({case['step_kernel']})" if name == "step" else name
            results.append(dict(env=env_id, kernel=label, num_envs=args.size,
                                seconds_per_launch=seconds, env_steps_per_s=rate,
                                bytes_per_env_step=case["bytes_per_env"],
                                fraction_of_copy_bandwidth=share))
            print(f"{env_id:16s} {label:30s} {seconds * 1e6:8.1f} us  "
                  f"{rate / 1e9:6.2f} G env-steps/s  {100 * share:5.1f} % of copy bandwidth "
                  f"({case['bytes_per_env']} B/env)")
        case["env"].close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine_info(device), "copy_bandwidth": bandwidth,
                       "settings": vars(args), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
