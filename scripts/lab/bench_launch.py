"""Host cost of one kernel launch, three ways, on the same cubin and arguments:

- ``ctypes``: :class:`gpu_vecenv.backends.launch.Kernel` (the driver's ``cuLaunchKernel``
  through ctypes, arguments packed into a buffer made once; what the envs use);
- ``pycuda``: PyCUDA's ``prepared_async_call`` (where PyCUDA is installed);
- ``cuda.bindings``: NVIDIA's ``cuda-python`` driver bindings (where installed).

The kernel is CartPole's step on 1 env (one block), launched ``--launches`` times in a
row on torch's current stream; the figure is host wall time per launch (the GPU keeps up:
the kernel runs in about two microseconds). Each way does what a launch from an env does
(the current-device check, torch's stream, packing). The ways take turns, ``--rounds``
times (host timings on a shared VM drift by tens of percent between runs: only
interleaved medians compare); also ``env.step()`` at 1 env with ``copy=False`` and
``copy=True`` (calls/s).

    python scripts/lab/bench_launch.py [--json out.json]
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
from gpu_vecenv.entry_points import make_vec


def per_call_us(fn, count: int) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
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
    ways = {"ctypes Kernel (the envs')": lambda: kernel(grid, block, tail)}
    index = torch.cuda.current_device()

    with_argtypes = ctypes.CDLL("libcuda.so.1")["cuLaunchKernel"]
    vp, u = ctypes.c_void_p, ctypes.c_uint
    with_argtypes.argtypes = [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp),
                              ctypes.POINTER(vp)]

    def ctypes_argtypes():
        if torch.cuda.current_device() != index:
            raise RuntimeError
        kernel._struct.pack_into(kernel._buffer, kernel._offset, *tail)
        with_argtypes(kernel._function, *grid, *block, 0, current_raw_stream(index), None,
                      kernel._extra)

    ways["ctypes, argtypes declared"] = ctypes_argtypes

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
        print("pycuda: not installed")
    else:
        pycuda_function = cuda.module_from_buffer(image).get_function("cartpole_step")
        pycuda_function.prepare(full_format)
        head = full_args[:-len(tail)]

        class PycudaKernel:
            """How the envs launched before: a device check, then PyCUDA's prepared call on
            the default stream with the whole argument list."""

            def __call__(self, grid, block, args):
                if torch.cuda.current_device() != index:
                    raise RuntimeError
                if current_raw_stream(index) == 0:
                    pycuda_function.prepared_async_call(grid, block, None, *head, *args,
                                                        shared_size=0)

        pycuda_kernel = PycudaKernel()
        ways["pycuda prepared_async_call"] = lambda: pycuda_kernel(grid, block, tail)

    try:
        from cuda.bindings import driver as cbd
    except ImportError:
        print("cuda.bindings: not installed")
    else:
        err, module = cbd.cuModuleLoadData(image)
        assert err == cbd.CUresult.CUDA_SUCCESS, err
        err, bindings_function = cbd.cuModuleGetFunction(module, b"cartpole_step")
        assert err == cbd.CUresult.CUDA_SUCCESS, err
        # The same packed-buffer argument passing as the ctypes path (``extra``).
        buffer = ctypes.create_string_buffer(packed, len(packed))
        size = ctypes.c_size_t(len(packed))
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buffer), 2, ctypes.addressof(size), 0)
        shape = struct.Struct(full_format)
        address = ctypes.addressof(extra)

        def bindings_launch():
            if torch.cuda.current_device() != index:
                raise RuntimeError
            shape.pack_into(buffer, 0, *full_args)
            cbd.cuLaunchKernel(bindings_function, *grid, *block, 0, current_raw_stream(index),
                               0, address)

        ways["cuda.bindings cuLaunchKernel"] = bindings_launch

    # A 1-env step() on each launch path, in the same process: the rest of step() is the
    # same code, so the difference is the launch.
    for copy in (False, True):
        for path in ("ctypes", "pycuda"):
            if path == "pycuda" and "pycuda prepared_async_call" not in ways:
                continue
            env_1 = make_vec("GPUCartPole-v1", 1, device="cuda", backend="cuda", copy=copy)
            env_1.reset(seed=0)
            if path == "pycuda":
                env_1.backend._step_fn = pycuda_kernel
            ways[f"env.step() copy={copy}, {path}"] = lambda e=env_1: e.step(action)
    samples: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.rounds):
        for name, fn in ways.items():
            count = args.launches // 4 if name.startswith("env") else args.launches
            samples[name].append(per_call_us(fn, count))
    results = {}
    for name, values in samples.items():
        results[name] = statistics.median(values)
        print(f"{name:36s} median {results[name]:6.2f} us/call ({1e6 / results[name]:>9,.0f}"
              f" calls/s), min {min(values):6.2f}, max {max(values):6.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "us_per_call": results,
                       "samples": samples, "launches": args.launches}, f, indent=1)


if __name__ == "__main__":
    main()
