"""Builds and drives tests/host_kernels/host_harness.cu: the kernels' math, run on the CPU.

The harness is compiled once per test session with the machine's nvcc (no GPU needed) and
fed flat binary files; see the protocol at the top of host_harness.cu.
"""

from __future__ import annotations

import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gpu_vecenv.backends.compiler import CUDA_SRC, find_nvcc
from gpu_vecenv.backends.cuda import AUTORESET_CODES, binding_for

HERE = Path(__file__).resolve().parent

OP_STEP, OP_RESET, OP_OBSERVE, OP_LAYOUT = 1, 2, 3, 4


def build(out_dir: Path) -> Path:
    """Compile the harness into ``out_dir``; returns the executable."""
    nvcc = find_nvcc()
    exe = out_dir / "host_harness"
    command = [nvcc, "-arch=sm_90", "-O2", "-std=c++17", "-fmad=false",
               "-Xcompiler", "-ffp-contract=off", "-Werror", "all-warnings",
               "-I", str(CUDA_SRC), "-o", str(exe), str(HERE / "host_harness.cu")]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"nvcc failed:\n{result.stderr}{result.stdout}"
    return exe


def _header(op: int, n: int, max_steps: int, mode: int, consts_size: int, has_mask: bool,
            envs_per_thread: int = 1, state_row_stride: int | None = None,
            offset_action: bool = False, prefetch_rng: bool = False):
    return struct.pack("iiIiiiiiii", op, n, max_steps, mode, consts_size, int(has_mask),
                       envs_per_thread, n if state_row_stride is None else state_row_stride,
                       int(offset_action), int(prefetch_rng))


def run_rng(exe: Path, tmp: Path, seed, index, counter, stream: int):
    """Words ``(n, 8)`` uint32 and uniforms ``(n, 8)`` float32 of blocks 0 and 1."""
    n = len(seed)
    payload = _header(0, n, stream, 0, 0, False) + b"".join(
        np.asarray(a, dtype=np.int64).tobytes() for a in (seed, index, counter))
    raw = _call(exe, "rng", tmp, payload)
    words = np.frombuffer(raw[: n * 32], dtype=np.uint32).reshape(n, 8)
    uniforms = np.frombuffer(raw[n * 32:], dtype=np.float32).reshape(n, 8)
    return words, uniforms


def run_sample(exe: Path, tmp: Path, kind: str, seed, counter, low, high) -> np.ndarray:
    """``sample_actions.cu``'s actions ``(n, dims)`` (int64 or float32) of slots ``0..n-1``
    with the given seeds and counters (uint32); ``low``/``high`` as ``ActionSampler``'s."""
    n, dims = len(seed), len(low)
    dtype = np.int64 if kind == "discrete" else np.float32
    payload = _header(0, n, dims, 0, 0, False) + b"".join((
        np.asarray(seed, dtype=np.int64).tobytes(), np.asarray(counter, dtype=np.uint32).tobytes(),
        np.asarray(low, dtype=dtype).tobytes(), np.asarray(high, dtype=dtype).tobytes()))
    raw = _call(exe, f"sample_{kind}", tmp, payload)
    return np.frombuffer(raw, dtype=dtype).reshape(n, dims)


def run_layout(exe: Path, tmp: Path, source: str) -> str:
    """The ``Consts`` layout text of ``cuda_src/<source>.cu`` (what its kernels export as
    ``<source>_consts_layout``)."""
    return _call(exe, source, tmp, _header(OP_LAYOUT, 0, 0, 0, 0, False)).decode()


def _call(exe: Path, env: str, tmp: Path, payload: bytes) -> bytes:
    src, dst = tmp / f"{env}.in", tmp / f"{env}.out"
    src.write_bytes(payload)
    result = subprocess.run([str(exe), env, str(src), str(dst)], capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, f"harness failed ({result.returncode}): {result.stderr}"
    return dst.read_bytes()


@dataclass
class HostResult:
    """Everything a harness call wrote, as torch tensors (CPU)."""

    state: dict[str, torch.Tensor]
    elapsed: torch.Tensor
    rng_counter: torch.Tensor
    autoreset_pending: torch.Tensor
    invalid_action: torch.Tensor
    error_count: int
    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor


def run_env(exe: Path, tmp: Path, env, op: int, action: torch.Tensor | None = None,
            mask: torch.Tensor | None = None, envs_per_thread: int = 1,
            state_row_stride: int | None = None, offset_action: bool = False,
            prefetch_rng: bool = False) -> HostResult:
    """Run ``op`` on the current buffers of ``env`` (a CPU GpuVectorEnv) in the harness.

    ``envs_per_thread``: a step goes through ``gv_step_chunk`` with that many envs per call
    (the kernels built with ``GV_ENVS_PER_THREAD``). ``state_row_stride``: floats between
    the state fields in the harness's memory (default ``num_envs``, as in ``EnvBuffers``;
    a multiple of 4 keeps every field aligned for the block loads whatever ``num_envs`` is).
    ``offset_action``: the actions start one element past an aligned address, so that the
    block path is refused (as for an offset view of a larger tensor). ``prefetch_rng``:
    every env's seed and RNG counter loaded with its inputs, as ``<name>_step_small``
    does (the one-env path; the block path never does).
    """
    definition, b, n = env.definition, env.buffers, env.num_envs
    binding = binding_for(definition)
    fmt, values = binding.pack_format(env.params)
    consts = struct.pack(fmt, *values)
    fields = [f.name for f in definition.state_fields]
    action_dtype = np.int64 if env.actions.kind == "discrete" else np.float32
    if action is None:
        action = torch.zeros(env.actions.shape, dtype=env.actions.dtype)
    parts = [
        _header(op, n, env.max_episode_steps or 0, AUTORESET_CODES[env.autoreset_mode],
                len(consts), mask is not None, envs_per_thread, state_row_stride,
                offset_action, prefetch_rng),
        consts,
        np.stack([b.state[f].numpy() for f in fields]).astype(np.float32).tobytes(),
        b.elapsed.numpy().astype(np.int32).tobytes(),
        b.rng_counter.numpy().astype(np.int64).tobytes(),
        b.seed.numpy().astype(np.int64).tobytes(),
        b.autoreset_pending.numpy().astype(np.uint8).tobytes(),
        b.invalid_action.numpy().astype(np.uint8).tobytes(),
        action.numpy().astype(action_dtype).tobytes(),
        b"" if mask is None else mask.numpy().astype(np.uint8).tobytes(),
    ]
    raw = _call(exe, definition.name, tmp, b"".join(parts))
    obs_dim = env.obs_dim
    layout = [("state", np.float32, len(fields) * n), ("elapsed", np.int32, n),
              ("rng_counter", np.int64, n), ("pending", np.uint8, n),
              ("invalid", np.uint8, n), ("error_count", np.int32, 1),
              ("obs", np.float32, n * obs_dim), ("reward", np.float32, n),
              ("terminated", np.uint8, n), ("truncated", np.uint8, n),
              ("final_obs", np.float32, n * obs_dim)]
    out, offset = {}, 0
    for name, dtype, count in layout:
        size = np.dtype(dtype).itemsize * count
        out[name] = torch.from_numpy(np.frombuffer(raw[offset:offset + size], dtype=dtype).copy())
        offset += size
    assert offset == len(raw), (offset, len(raw))
    state = out["state"].reshape(len(fields), n)
    return HostResult(
        state={f: state[k] for k, f in enumerate(fields)},
        elapsed=out["elapsed"], rng_counter=out["rng_counter"],
        autoreset_pending=out["pending"].bool(), invalid_action=out["invalid"].bool(),
        error_count=int(out["error_count"][0]),
        obs=out["obs"].reshape(n, obs_dim), reward=out["reward"],
        terminated=out["terminated"].bool(), truncated=out["truncated"].bool(),
        final_obs=out["final_obs"].reshape(n, obs_dim),
    )
