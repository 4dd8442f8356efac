"""The CUDA backend: each env's ``cuda_src/<name>.cu`` kernels, launched through the CUDA
driver API on the env's torch tensors.

- Compiling: NVRTC (or nvcc), once per GPU architecture, cached; see
  :mod:`gpu_vecenv.backends.compiler`.
- Context: PyTorch's primary context of the env's device, retained (never a new one); see
  :mod:`gpu_vecenv.backends.driver`.
- Memory: every buffer is a torch tensor; kernels get ``tensor.data_ptr()``.
- Arguments: one fixed, typed list per kernel (see ``GV_DEFINE_KERNELS`` in
  ``cuda_src/common/single_agent_kernels.cuh``): the env's float32 constants (the env module's
  :class:`~gpu_vecenv.kernel_binding.KernelBinding` computes them from the params the way
  the torch reference rounds them, checked at load against the layout the kernel file
  exports), the state field pointers, the buffer pointers, the outputs, then ``num_envs``
  and the mode.
- Streams: kernels run on torch's current stream, so they are ordered with every torch op
  around them, and get captured into CUDA graphs (see :mod:`gpu_vecenv.backends.launch`).
- One launch per ``step()``: action check, dynamics, reward, termination, time limit,
  autoreset, observation and ``final_obs`` are fused; invalid actions are counted on the
  device (``buffers.error_count``), never read back here.
- Small launches: up to :data:`SMALL_STEP_MAX_ENVS` envs the step launches
  ``<name>_step_small`` (one env per thread, each env's seed and RNG counter loaded with
  its other inputs, so that a reset costs no second round trip to memory: such launches are
  latency-bound); above, ``<name>_step``. A kernel file without ``_step_small`` uses
  ``_step`` at every size.
- Threads: the step kernel gives each thread :func:`envs_per_thread` consecutive envs
  (``$GPU_VECENV_ENVS_PER_THREAD``: 1, 2 or 4), read with vector loads of that many envs per
  array; ``$GPU_VECENV_STEP_MIN_BLOCKS`` adds ``__launch_bounds__(BLOCK_SIZE, m)`` to it. Both
  are read when a backend is made and compiled in as ``-D`` flags (part of the cache key), so
  one process can hold envs built with different settings; the step grid is sized by what
  the loaded kernel says it was built with (:func:`built_envs_per_thread`). Results are bit
  for bit the same under every setting; only the speed differs.
"""

from __future__ import annotations

import os
import warnings

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.backends.compiler import KernelsUnavailable, load_module
from gpu_vecenv.backends.driver import DriverError
from gpu_vecenv.backends.launch import Kernel
from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.kernel_binding import KernelBinding, check_layout, f32, reciprocal

__all__ = ["AUTORESET_CODES", "BLOCK_SIZE", "ENVS_PER_THREAD", "SMALL_STEP_MAX_ENVS",
           "CudaBackend", "KernelBinding", "binding_for", "built_envs_per_thread",
           "check_consts", "envs_per_thread", "f32", "kernel_flags", "reciprocal"]

BLOCK_SIZE = 256
"""Threads per block."""

ENVS_PER_THREAD = 1
"""Consecutive envs each thread of the step kernel handles when
``$GPU_VECENV_ENVS_PER_THREAD`` is unset (``GV_ENVS_PER_THREAD`` in
``cuda_src/common/single_agent_kernels.cuh``)."""

SMALL_STEP_MAX_ENVS = 131_072
"""Largest env count stepped by ``<name>_step_small`` (512 blocks: under four per SM of an
H100 or H200, where a step's time is its latency, not its bytes)."""

AUTORESET_CODES = {
    AutoresetMode.NEXT_STEP: 0,
    AutoresetMode.SAME_STEP: 1,
    AutoresetMode.DISABLED: 2,
}
"""``GV_AUTORESET_*`` in ``cuda_src/common/autoreset_modes.cuh``."""


def binding_for(definition) -> KernelBinding:
    """The :class:`KernelBinding` of an env definition, or a clear error."""
    binding = getattr(definition, "kernel_binding", None)
    if binding is None:
        # KernelsUnavailable: under backend="auto" an env without kernels (a custom env
        # registered without a KernelBinding) runs on the torch backend with a notice.
        raise KernelsUnavailable(
            f"env {definition.name!r} has no CUDA kernels (its definition has no "
            "kernel_binding); use backend='torch'"
        )
    return binding


_consts_layouts: dict[int, str] = {}
"""``<source>_consts_layout`` of each loaded module (by ``id``; modules live for the
process, see :func:`gpu_vecenv.backends.compiler.load_module`)."""


def consts_layout(module, source: str) -> str:
    """The layout text a kernel file exports for its ``Consts`` (``""``: none, a kernel file
    whose ``Consts`` is written out by hand); read once per loaded module."""
    text = _consts_layouts.get(id(module))
    if text is None:
        try:
            raw = module.read_global(f"{source}_consts_layout")
        except DriverError:
            raw = b""
        text = _consts_layouts[id(module)] = raw.split(b"\0", 1)[0].decode()
    return text


def check_consts(definition, binding: KernelBinding, params, module) -> None:
    """:func:`gpu_vecenv.kernel_binding.check_layout` against the loaded kernels; a kernel
    file that exports no layout gets a warning (its packing cannot be checked)."""
    text = consts_layout(module, binding.source)
    if not text:
        warnings.warn(f"{binding.kernel_file} exports no constant layout, so the packing of "
                      f"{binding.consts_name} cannot be checked against it: declare its "
                      "Consts with GV_CONSTS (see docs/custom_env.md)", stacklevel=3)
        return
    check_layout(definition.name, binding, params, text)


def envs_per_thread() -> int:
    """``$GPU_VECENV_ENVS_PER_THREAD`` (1, 2 or 4), else :data:`ENVS_PER_THREAD`."""
    text = os.environ.get("GPU_VECENV_ENVS_PER_THREAD", "").strip()
    if not text:
        return ENVS_PER_THREAD
    if text not in ("1", "2", "4"):
        raise ValueError(f"GPU_VECENV_ENVS_PER_THREAD must be 1, 2 or 4, got {text!r}")
    return int(text)


def kernel_flags() -> tuple[str, ...]:
    """The ``-D`` flags of a single-agent env's kernel build under the current settings
    (:func:`envs_per_thread`, ``$GPU_VECENV_STEP_MIN_BLOCKS``)."""
    flags = []
    per_thread = envs_per_thread()
    if per_thread != 1:
        flags.append(f"-DGV_ENVS_PER_THREAD={per_thread}")
    min_blocks = os.environ.get("GPU_VECENV_STEP_MIN_BLOCKS", "").strip()
    if min_blocks:
        if not min_blocks.isdigit() or int(min_blocks) < 1:
            raise ValueError(f"GPU_VECENV_STEP_MIN_BLOCKS must be a positive integer, got "
                             f"{min_blocks!r}")
        flags += [f"-DGV_STEP_MIN_BLOCKS={int(min_blocks)}", f"-DGV_BLOCK_SIZE={BLOCK_SIZE}"]
    return tuple(flags)


_built_envs_per_thread: dict[int, int] = {}
"""``<source>_envs_per_thread`` of each loaded module (by ``id``, as :data:`_consts_layouts`)."""


def built_envs_per_thread(module, source: str) -> int:
    """Envs per thread of the loaded step kernel, as ``GV_DEFINE_KERNELS`` exports it
    (``<source>_envs_per_thread``); 1 for a kernel file written without it, whatever the
    setting: its own step kernel takes one env per thread."""
    value = _built_envs_per_thread.get(id(module))
    if value is None:
        try:
            value = int.from_bytes(module.read_global(f"{source}_envs_per_thread")[:4],
                                   "little")
        except DriverError:
            value = 1
        _built_envs_per_thread[id(module)] = value
    return value


def _ptr(tensor: torch.Tensor | None) -> int:
    return 0 if tensor is None else tensor.data_ptr()


class CudaBackend:
    """Implements the :class:`~gpu_vecenv.backends.base.Backend` protocol with the kernels
    of ``cuda_src/<env>.cu``; same semantics as
    :class:`~gpu_vecenv.backends.torch_backend.TorchBackend`, bit for bit where the math
    allows (the GPU tests hold them to it)."""

    name = "cuda"

    def __init__(self, ctx: BackendContext):
        if ctx.device.type != "cuda":
            raise RuntimeError(f"the CUDA backend needs a CUDA device, got {ctx.device}")
        self.ctx = ctx
        b = ctx.buffers
        definition = ctx.definition
        binding = binding_for(definition)
        for f in definition.state_fields:
            if f.dtype != torch.float32:
                raise RuntimeError(f"{definition.name}: state field {f.name} is {f.dtype}; "
                                   "the kernels take float32 state")
        n, obs_dim = ctx.num_envs, ctx.obs_dim
        if n * max(obs_dim, 1) >= 2**31:
            raise ValueError(f"num_envs * obs_dim = {n * obs_dim} does not fit the kernels' "
                             "32-bit indices")
        self.device = ctx.device
        self._device_index = ctx.device.index if ctx.device.index is not None else 0
        module = load_module(binding.source, self._device_index, binding.path, kernel_flags())
        self.envs_per_thread = built_envs_per_thread(module, binding.source)
        check_consts(definition, binding, ctx.params, module)
        consts_fmt, consts = binding.pack_format(ctx.params)
        state_ptrs = tuple(b.state[f.name].data_ptr() for f in definition.state_fields)
        buffer_ptrs = (b.elapsed.data_ptr(), b.rng_counter.data_ptr(), b.seed.data_ptr(),
                       b.autoreset_pending.data_ptr(), b.invalid_action.data_ptr(),
                       b.error_count.data_ptr())
        state_fmt = "P" * len(state_ptrs)

        head = (*consts, *state_ptrs)

        def kernel(suffix: str, arg_format: str, fixed: tuple) -> Kernel:
            return Kernel(module, f"{binding.source}_{suffix}", arg_format, fixed=fixed)

        buffers_fmt = consts_fmt + state_fmt + "PPPPPP"
        step_fmt = buffers_fmt + "P" + "PPPPP" + "iii"
        self._step_fn = None
        if n <= SMALL_STEP_MAX_ENVS:
            try:
                self._step_fn = kernel("step_small", step_fmt, (*head, *buffer_ptrs))
                self.envs_per_thread = 1
            except DriverError:  # a kernel file of its own, without it
                pass
        if self._step_fn is None:
            self._step_fn = kernel("step", step_fmt, (*head, *buffer_ptrs))
        self._reset_fn = kernel("reset", buffers_fmt + "PPi", (*head, *buffer_ptrs))
        self._observe_fn = kernel("observe", consts_fmt + state_fmt + "Pi", head)
        self._step_tail = (n, ctx.max_episode_steps or 0, AUTORESET_CODES[ctx.autoreset_mode])
        self._n = n
        self._grid = ((n + BLOCK_SIZE - 1) // BLOCK_SIZE, 1, 1)
        step_threads = (n + self.envs_per_thread - 1) // self.envs_per_thread
        self._step_grid = (max(1, (step_threads + BLOCK_SIZE - 1) // BLOCK_SIZE), 1, 1)
        self._block = (BLOCK_SIZE, 1, 1)

    def reset(self, mask: torch.Tensor | None, obs_out: torch.Tensor) -> None:
        """Reset the envs in ``mask`` ((n,) bool; all if None) and write every obs."""
        if mask is not None:
            mask = mask.contiguous()
        self._reset_fn(self._grid, self._block, (_ptr(mask), obs_out.data_ptr(), self._n))

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One fused launch: see ``gv_step_env`` in ``cuda_src/common/single_agent_kernels.cuh``."""
        action = action.contiguous()  # held until the launch is queued
        obs, reward, terminated, truncated, final_obs, _ = out.pointers or out.data_ptrs()
        self._step_fn(self._step_grid, self._block, (
            action.data_ptr(), obs, reward, terminated, truncated, final_obs,
            *self._step_tail,
        ))

    def observe(self, out: torch.Tensor) -> None:
        """Write the observation of every env into ``out`` ((n, obs_dim) float32)."""
        self._observe_fn(self._grid, self._block, (out.data_ptr(), self._n))
