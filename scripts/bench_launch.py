"""Host cost of one kernel launch, three ways, on the same cubin and arguments:

- ``ctypes``: :class:`gpu_vecenv.backends.launch.Kernel` (the driver's ``cuLaunchKernel``
  through ctypes, arguments packed into a buffer made once; what the envs use);
- ``pycuda``: PyCUDA's ``prepared_async_call`` (where PyCUDA is installed);
- ``cuda.bindings``: NVIDIA's ``cuda-python`` driver bindings (where installed).

The kernel is CartPole's step on 1 env (one block), launched ``--launches`` times in a
row on torch's current stream; the figure is host wall time per launch (the GPU keeps up:
the kernel runs in about two microseconds). Also times ``env.step()`` at 1 env with
``copy=False`` and with ``copy=True`` (calls/s). Median of ``--repeats``.

    python scripts/bench_launch.py [--json out.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import struct
import time

import torch

from gpu_vecenv.backends.launch import current_raw_stream
from gpu_vecenv.registration import make_vec


def per_call_us(fn, count: int, repeats: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(count):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / count * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    env = make_vec("GPUCartPole-v1", 1, device="cuda", backend="cuda", copy=False)
    env.reset(seed=0)
    backend = env.backend
    kernel = backend._step_fn
    action = torch.zeros(1, dtype=torch.int64, device="cuda")
    obs = torch.empty((1, 4), device="cuda")
    reward = torch.empty(1, device="cuda")
    flags = torch.empty(2, dtype=torch.bool, device="cuda")
    tail = (action.data_ptr(), obs.data_ptr(), reward.data_ptr(), flags[:1].data_ptr(),
            flags[1:].data_ptr(), 0, 1, 500, 0)
    grid, block = backend._grid, backend._block
    results: dict[str, float] = {}

    results["ctypes Kernel"] = per_call_us(lambda: kernel(grid, block, tail), args.launches,
                                           args.repeats)

    # The full argument list, as PyCUDA and cuda.bindings take it.
    from gpu_vecenv.backends.cuda import binding_for

    b = env.buffers
    consts_fmt, consts = binding_for(env.definition).pack_format(env.params)
    state = tuple(b.state[f.name].data_ptr() for f in env.definition.state_fields)
    buffers = (b.elapsed.data_ptr(), b.rng_counter.data_ptr(), b.seed.data_ptr(),
               b.autoreset_pending.data_ptr(), b.invalid_action.data_ptr(),
               b.error_count.data_ptr())
    full_format = consts_fmt + "P" * (len(state) + len(buffers)) + "P" + "PPPPP" + "iii"
    full_args = (*consts, *state, *buffers, *tail)
    packed = struct.pack(full_format, *full_args)
    from gpu_vecenv.backends.compiler import compile_kernel

    image = compile_kernel("cartpole", torch.cuda.get_device_capability()).path.read_bytes()

    try:
        import pycuda.autoprimaryctx  # noqa: F401
        import pycuda.driver as cuda
    except ImportError:
        results["pycuda prepared_async_call"] = float("nan")
    else:
        function = cuda.module_from_buffer(image).get_function("cartpole_step")
        function.prepare(full_format)
        results["pycuda prepared_async_call"] = per_call_us(
            lambda: function.prepared_async_call(grid, block, None, *full_args), args.launches,
            args.repeats)

    try:
        from cuda.bindings import driver as cbd
    except ImportError:
        results["cuda.bindings cuLaunchKernel"] = float("nan")
    else:
        err, module = cbd.cuModuleLoadData(image)
        assert err == cbd.CUresult.CUDA_SUCCESS, err
        err, function = cbd.cuModuleGetFunction(module, b"cartpole_step")
        assert err == cbd.CUresult.CUDA_SUCCESS, err
        buffer = ctypes.create_string_buffer(packed, len(packed))
        offsets = [struct.calcsize(full_format[:k] + "0" + full_format[k])
                   for k in range(len(full_format))]
        pointers = (ctypes.c_void_p * len(offsets))(
            *(ctypes.addressof(buffer) + o for o in offsets))
        shape = struct.Struct(full_format)
        address = ctypes.addressof(pointers)

        def launch():
            shape.pack_into(buffer, 0, *full_args)
            cbd.cuLaunchKernel(function, *grid, *block, 0,
                               current_raw_stream(torch.cuda.current_device()), address, 0)

        results["cuda.bindings cuLaunchKernel"] = per_call_us(launch, args.launches,
                                                              args.repeats)

    for copy in (False, True):
        env_1 = make_vec("GPUCartPole-v1", 1, device="cuda", backend="cuda", copy=copy)
        env_1.reset(seed=0)
        us = per_call_us(lambda e=env_1: e.step(action), args.launches // 4, args.repeats)
        results[f"env.step() copy={copy}"] = us
    width = max(map(len, results))
    for name, us in results.items():
        print(f"{name:{width}s} {us:7.2f} us/call  {1e6 / us:>10,.0f} calls/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "us_per_call": results,
                       "launches": args.launches, "repeats": args.repeats}, f, indent=1)


if __name__ == "__main__":
    main()
