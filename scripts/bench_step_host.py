"""Host time of one ``step()`` call, and where it goes.

Cases: CartPole at 1 env (``copy=False`` and ``copy=True``); CartPole at 1,024 envs with a
fresh ``torch.randint`` action drawn per step (a user's plain loop, ``copy=True``); Tag
1x5 and 100x105 games (WarpDrive's training preset, K = 10 observed others, as in
``scripts/bench_tag.py``; ``copy=False`` and ``copy=True``).

Per case: host microseconds per ``step()`` (median of ``--rounds`` interleaved rounds;
on a GPU in loops of ``--host-calls`` calls, short enough that the host never waits for
the device, and also the time per step of a long loop from CUDA events: the step rate a
loop gets, bound by the host or the device, whichever is slower), the torch ops one
``step()`` dispatches (``torch.profiler``, op names included), and a breakdown: each
part of ``step()`` timed on its own in a loop of its own (``convert``:
``actions.convert``; ``outputs``: ``_fresh_outputs``; ``launch``: ``backend.step``;
``errors``: the deferred invalid-action check and its flag copy; ``info``:
``_step_info``), ``rest`` being the full call minus those.

``--device cpu`` measures the host side here, without a GPU: the CUDA backends are
built as on a GPU except that the driver calls are stubbed (a launch calls a no-op C
function with the same arguments; the stream and device queries return 0) and the
deferred errors behave as on a GPU (a flag copy every ``ERROR_FLAG_INTERVAL`` steps).
CPU torch ops cost less than CUDA ones (no caching allocator, no stream), so compare op
counts as well as microseconds.

    python scripts/bench_step_host.py [--device cuda] [--json out.json] [--case NAME,...]
        [--compare earlier.json]
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import torch

from gpu_vecenv.entry_points import make_vec

CASES = {  # label: (maker, action drawer kind, copy)
    "cartpole 1 copy=False": ("cartpole", 1, False, "pool"),
    "cartpole 1 copy=True": ("cartpole", 1, True, "pool"),
    "cartpole 1024 randint copy=True": ("cartpole", 1024, True, "randint"),
    "tag 1x5 copy=False": ("tag", (1, 1, 4), False, "pool"),
    "tag 1x5 copy=True": ("tag", (1, 1, 4), True, "pool"),
    "tag 100x105 copy=False": ("tag", (100, 5, 100), False, "pool"),
    "tag 100x105 copy=True": ("tag", (100, 5, 100), True, "pool"),
}


# -- a CUDA backend without a GPU (--device cpu) --

_NOOP_SOURCE = "int noop(void* f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,"\
    " unsigned g, unsigned h, void* s, void** p, void** x) { return 0; }\n"


def _noop_launch():
    """A C function taking cuLaunchKernel's arguments and doing nothing (compiled with
    the system's C compiler; a Python function where there is none)."""
    folder = tempfile.mkdtemp()
    source, library = os.path.join(folder, "noop.c"), os.path.join(folder, "noop.so")
    with open(source, "w") as f:
        f.write(_NOOP_SOURCE)
    try:
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", source, "-o", library], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return lambda *args: 0
    function = ctypes.CDLL(library)["noop"]
    function.restype = ctypes.c_int
    return function


def _stub_kernel(arg_format: str, fixed: tuple, launch):
    """A :class:`~gpu_vecenv.backends.launch.Kernel` whose driver calls are stubbed."""
    from gpu_vecenv.backends import launch as launch_module

    kernel = object.__new__(launch_module.Kernel)
    kernel.name, kernel.device_index, kernel.shared_bytes = "stub", 0, 0
    kernel._function = ctypes.c_void_p(1)
    size = launch_module.struct.calcsize(arg_format)
    kernel._buffer = ctypes.create_string_buffer(max(size, 1))
    kernel._size = ctypes.c_size_t(size)
    kernel._extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(kernel._buffer), 2,
                                          ctypes.addressof(kernel._size), 0)
    kernel._fixed, kernel._offset, kernel._struct = launch_module._split(arg_format, fixed)
    if kernel._offset:
        launch_module.struct.pack_into(arg_format[:len(fixed)], kernel._buffer, 0, *fixed)
    kernel._launch = launch
    return kernel


def stub_cuda(env, launch) -> None:
    """Give a CPU env the CUDA backend's step path and a GPU's deferred errors."""
    from gpu_vecenv.backends import launch as launch_module

    launch_module._CURRENT_DEVICE = int  # int() == 0: a C call, like torch's
    launch_module._RAW_STREAM = abs  # abs(0) == 0
    if hasattr(env, "num_games"):
        from gpu_vecenv.multi_agent.cuda_backend import STEP_PHASES, GameCudaBackend

        backend = object.__new__(GameCudaBackend)
        backend.env, backend.device = None, env.device
        backend._cached_outputs = (None, ())  # what step() read before StepOutputs.pointers
        backend.block, backend.blocks_per_game, backend.mode = 128, 1, 0
        head = (0.5,) * 12 + (64,) * 20
        backend._fn = _stub_kernel("f" * 12 + "P" * 20 + "P" * 6 + "PP" + "iiii", head,
                                   launch)
        backend._grid, backend._block_shape = (env.num_games, 1, 1), (128, 1, 1)
        backend._step_grid, backend._step_block = backend._grid, backend._block_shape
        backend._step_fn = backend._fn  # one-block games of < 33 agents step through run()
        backend._step_phases = STEP_PHASES
        backend._single_launch_tail = (0, 1, 0, STEP_PHASES[0], STEP_PHASES[-1])
    else:
        from gpu_vecenv.backends.cuda import BLOCK_SIZE, CudaBackend

        backend = object.__new__(CudaBackend)
        backend.device, backend._device_index, backend._n = env.device, 0, env.num_envs
        head = (0.5,) * 12 + (64,) * 10
        backend._step_fn = _stub_kernel("f" * 12 + "P" * 10 + "P" + "PPPPP" + "iii", head,
                                        launch)
        backend._step_tail = (env.num_envs, 500, 0)
        backend._grid = ((env.num_envs + BLOCK_SIZE - 1) // BLOCK_SIZE, 1, 1)
        backend._step_grid = backend._grid
        backend._block = (BLOCK_SIZE, 1, 1)
    env.backend = backend
    env.strict = False
    ring = getattr(env, "_output_ring", None)  # copy=True outputs (absent before the ring)
    if ring is not None:  # its per-step checks as on a GPU: not capturing, stream 0
        from gpu_vecenv import buffers

        # (CAPTURING: _CAPTURING in trees before sample_actions; bool() == False)
        buffers.CAPTURING = buffers._CAPTURING = bool
        buffers._RAW_STREAM = abs
        ring._cuda = True
    errors = env._errors
    errors._host = torch.zeros((), dtype=torch.int32)
    if hasattr(errors, "_copy"):  # the copy on a stream of its own (FlagCopy)
        errors._copy = types.SimpleNamespace(
            start=lambda: errors._host.copy_(errors.error_count), arrived=lambda: True,
            wait=lambda: None)
    else:  # trees before it: a copy_ and an event on the current stream
        errors._event = types.SimpleNamespace(record=lambda stream=None: None,
                                              query=lambda: True)
        errors._current_stream = lambda: None


# -- the cases --

def make_case(label: str, device: torch.device, launch):
    kind, size, copy, actions = CASES[label]
    cuda_kernels = device.type == "cuda"
    backend = "cuda" if cuda_kernels else "torch"
    if kind == "cartpole":
        env = make_vec("GPUCartPole-v1", size, device=device, backend=backend, copy=copy,
                       strict=False)
    else:
        games, taggers, runners = size
        env = make_vec("GPUTag-v0", games, device=device, backend=backend, copy=copy,
                       strict=False, preset="warpdrive_training", num_taggers=taggers,
                       num_runners=runners,
                       num_other_agents_observed=min(10, taggers + runners - 1))
    env.reset(seed=0)
    if not cuda_kernels:
        stub_cuda(env, launch)
    gen = torch.Generator(device=device).manual_seed(0)
    space = env.single_action_space
    if hasattr(space, "nvec"):
        nvec = torch.as_tensor(space.nvec, device=device)
        pool = [(torch.rand((env.num_envs, len(space.nvec)), generator=gen, device=device)
                 * nvec).long() for _ in range(8)]
    else:
        pool = [torch.randint(0, int(space.n), (env.num_envs,), generator=gen, device=device)
                for _ in range(8)]
    if actions == "randint":
        n, high = env.num_envs, int(space.n)

        def action_of(k):
            return torch.randint(0, high, (n,), device=device)
    else:
        def action_of(k):
            return pool[k & 7]
    return env, action_of, pool


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def per_call_us(fn, count: int, device) -> float:
    fn(0)
    _sync(device)
    start = time.perf_counter()
    for k in range(count):
        fn(k)
    elapsed = time.perf_counter() - start
    _sync(device)
    return elapsed / count * 1e6


def device_us(env, action_of, count: int, device) -> float | None:
    if device.type != "cuda":
        return None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for k in range(count):
        env.step(action_of(k))
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / count


def parts(env, action_of, pool):
    """Each part of ``step()`` as a callable of the step index, on the env's objects."""
    actions, backend, errors = env.actions, env.backend, env._errors
    out = env._fresh_outputs()
    converted = actions.convert(pool[0])
    uses_randint = action_of(0) is not action_of(0)

    def errors_part(k):  # as step() does it (before DeferredErrors.may_report: always)
        if getattr(errors, "may_report", True):
            env._check_deferred_errors(sync=False)
        errors.after_step()

    result = {
        "convert": lambda k: actions.convert(pool[k & 7]),
        "outputs": lambda k: env._fresh_outputs(),
        "launch": lambda k: backend.step(converted, out),
        "errors": errors_part,
        "info": lambda k: env._step_info(out),
    }
    if uses_randint:
        result["action (randint)"] = action_of
    return result


def ops_per_step(env, action_of, steps: int = 64) -> tuple[float, dict[str, float]]:
    """Torch ops dispatched per ``step()`` (the action draw included), by name."""
    from torch.profiler import ProfilerActivity, profile

    for k in range(8):
        env.step(action_of(k))
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for k in range(steps):
            env.step(action_of(k))
    names = collections.Counter()
    for event in prof.events():
        if event.name.startswith("aten::") and not _nested(event):
            names[event.name] += 1
    total = sum(names.values()) / steps
    return total, {name: count / steps for name, count in names.most_common()}


def _nested(event) -> bool:
    parent = getattr(event, "cpu_parent", None)
    return parent is not None and parent.name.startswith("aten::")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--steps", type=int, default=5000,
                        help="calls per timed loop (the device-time loop, and every loop "
                             "on the CPU)")
    parser.add_argument("--host-calls", type=int, default=400,
                        help="on a GPU, calls per host-time loop: fewer than the launches "
                             "the driver queues (~1,000), so the host never waits for the "
                             "device, even where the device is the slower")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--case", default=None, help="comma-separated case labels")
    parser.add_argument("--json", default=None)
    parser.add_argument("--compare", default=None,
                        help="a --json file of an earlier run (e.g. the commit before): "
                             "print its figures beside this run's")
    args = parser.parse_args()
    device = torch.device(args.device)
    labels = args.case.split(",") if args.case else list(CASES)
    launch = _noop_launch() if device.type == "cpu" else None
    envs = {label: make_case(label, device, launch) for label in labels}
    samples = collections.defaultdict(lambda: collections.defaultdict(list))
    calls = args.host_calls if device.type == "cuda" else args.steps
    for _ in range(args.rounds):  # interleaved: host timings drift on shared machines
        for label, (env, action_of, pool) in envs.items():
            samples[label]["step"].append(
                per_call_us(lambda k, e=env, a=action_of: e.step(a(k)), calls, device))
            for part, fn in parts(env, action_of, pool).items():
                samples[label][part].append(per_call_us(fn, calls, device))
    rows = []
    print(f"device: {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}"
          f"{' (CUDA driver calls stubbed)' if device.type == 'cpu' else ''}; python "
          f"{sys.version.split()[0]}, torch {torch.__version__}")
    for label, (env, action_of, _pool) in envs.items():
        medians = {part: statistics.median(v) for part, v in samples[label].items()}
        measured = sum(v for part, v in medians.items() if part != "step")
        medians["rest"] = medians["step"] - measured
        ops, by_name = ops_per_step(env, action_of)
        device_time = device_us(env, action_of, args.steps, device)
        env.check_errors()
        row = dict(case=label, host_us_per_step=medians["step"], device_us_per_step=device_time,
                   parts_us=medians, torch_ops_per_step=ops, torch_ops=by_name,
                   samples={k: list(v) for k, v in samples[label].items()})
        rows.append(row)
        breakdown = ", ".join(f"{p} {v:.2f}" for p, v in medians.items() if p != "step")
        gpu = f", device {device_time:.2f} us" if device_time is not None else ""
        print(f"{label:34s} step {medians['step']:6.2f} us{gpu}; {ops:.2f} torch ops "
              f"({', '.join(f'{n[6:]} {c:g}' for n, c in list(by_name.items())[:6])})")
        print(f"{'':34s} {breakdown}")
        env.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=str(device), torch=torch.__version__, rows=rows), f, indent=1)
    if args.compare:
        compare(args.compare, rows)


def compare(path: str, rows: list[dict]) -> None:
    """This run's host us per step, torch ops and parts beside an earlier run's."""
    with open(path) as f:
        earlier = {row["case"]: row for row in json.load(f)["rows"]}
    print(f"\n{'case':34s} {'us/step':>17s} {'torch ops':>13s}  parts (us): earlier -> now")
    for row in rows:
        old = earlier.get(row["case"])
        if old is None:
            continue
        parts = ", ".join(f"{p} {old['parts_us'].get(p, float('nan')):.2f} -> {v:.2f}"
                          for p, v in row["parts_us"].items() if p != "step")
        print(f"{row['case']:34s} {old['host_us_per_step']:7.2f} -> "
              f"{row['host_us_per_step']:6.2f} {old['torch_ops_per_step']:5.2f} -> "
              f"{row['torch_ops_per_step']:4.2f}  {parts}")


if __name__ == "__main__":
    main()
