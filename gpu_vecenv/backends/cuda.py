"""The CUDA backend: each env's ``cuda_src/<name>.cu`` kernels, launched through the CUDA
driver API on the env's torch tensors.

- Compiling: NVRTC (or nvcc), once per GPU architecture, cached; see
  :mod:`gpu_vecenv.backends.compiler`.
- Context: PyTorch's primary context of the env's device, retained (never a new one); see
  :mod:`gpu_vecenv.backends.driver`.
- Memory: every buffer is a torch tensor; kernels get ``tensor.data_ptr()``.
- Arguments: one fixed, typed list per kernel (see ``GV_DEFINE_KERNELS`` in
  ``cuda_src/common/autoreset.cuh``): the env's float32 constants (a :class:`KernelBinding`
  computes them from the params dataclass the way the torch reference rounds them), the
  state field pointers, the buffer pointers, the outputs, then ``num_envs`` and the mode.
- Streams: kernels run on torch's current stream, so they are ordered with every torch op
  around them, and get captured into CUDA graphs (see :mod:`gpu_vecenv.backends.launch`).
- One launch per ``step()``: action check, dynamics, reward, termination, time limit,
  autoreset, observation and ``final_obs`` are fused; invalid actions are counted on the
  device (``buffers.error_count``), never read back here.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.backends.compiler import KernelsUnavailable, load_module
from gpu_vecenv.backends.launch import Kernel
from gpu_vecenv.buffers import StepOutputs

BLOCK_SIZE = 256
"""Threads per block; one thread per env."""

AUTORESET_CODES = {
    AutoresetMode.NEXT_STEP: 0,
    AutoresetMode.SAME_STEP: 1,
    AutoresetMode.DISABLED: 2,
}
"""``GV_AUTORESET_*`` in ``cuda_src/common/autoreset.cuh``."""

Consts = list[tuple[str, Any]]
"""``[(field name, np.float32 or int), ...]`` in the order of the C ``Consts`` struct."""


def f32(value: float) -> np.float32:
    """A Python float rounded to float32, as torch does with a scalar operand."""
    return np.float32(value)


def reciprocal(value: float) -> np.float32:
    """The factor by which torch's CUDA kernels multiply for ``tensor / value`` (a Python
    float): ``at::native::div_true_kernel_cuda`` replaces division by a CPU scalar with
    multiplication by its reciprocal, and torch 2.11 forms that reciprocal in double and
    rounds it to float32 once. (Measured on the H200 over 2**20 values: this matches torch
    where ``1.0f / float(value)`` differs in 79% and true float32 division in 62%.)"""
    return np.float32(1.0 / value)


@dataclass(frozen=True)
class KernelBinding:
    """How an env's params become the constant argument of its kernels.

    ``source`` names ``cuda_src/<source>.cu`` (kernels ``<source>_step``, ``_reset``,
    ``_observe``); ``consts(params)`` returns the C ``Consts`` struct's fields in order.
    """

    source: str
    consts: Callable[[Any], Consts]
    path: str | None = None
    """A kernel file outside ``cuda_src/`` (a custom env's); ``None``: ``cuda_src/<source>.cu``."""

    def pack_format(self, params: Any) -> tuple[str, tuple[Any, ...]]:
        """struct format and values of the ``Consts`` struct."""
        fields = self.consts(params)
        fmt = "".join("f" if isinstance(v, np.floating) else "i" for _, v in fields)
        return fmt, tuple(float(v) if isinstance(v, np.floating) else int(v) for _, v in fields)


# -- the bindings: float32 constants, derived ones computed as each torch reference does --


def _cartpole_consts(p) -> Consts:
    return [
        ("gravity", f32(p.gravity)),
        ("masspole", f32(p.masspole)),
        ("length", f32(p.length)),
        ("force_mag", f32(p.force_mag)),
        ("tau", f32(p.tau)),
        ("polemass_length", f32(p.polemass_length)),
        ("inv_total_mass", reciprocal(p.total_mass)),
        ("four_thirds", f32(4.0 / 3.0)),
        ("theta_threshold_radians", f32(p.theta_threshold_radians)),
        ("x_threshold", f32(p.x_threshold)),
        ("reset_low", f32(-p.reset_bound)),
        ("reset_high", f32(p.reset_bound)),
        ("euler", int(bool(p.euler))),
        ("sutton_barto_reward", int(bool(p.sutton_barto_reward))),
    ]


def _acrobot_consts(p) -> Consts:
    m1, m2 = p.link_mass_1, p.link_mass_2
    l1, lc1, lc2 = p.link_length_1, p.link_com_pos_1, p.link_com_pos_2
    i1 = i2 = p.link_moi
    g, pi = p.gravity, math.pi
    span = pi - -pi
    return [
        *((f"torque{k}", f32(t)) for k, t in enumerate(p.avail_torque)),
        ("dt", f32(p.dt)),
        ("dt2", f32(p.dt / 2.0)),
        ("w", f32(p.dt / 6.0)),
        ("d1_a", f32(m1 * lc1**2)),
        ("d1_c", f32(l1**2 + lc2**2)),
        ("d1_b", f32(2 * l1 * lc2)),
        ("m2", f32(m2)),
        ("i1", f32(i1)),
        ("i2", f32(i2)),
        ("d2_c", f32(lc2**2)),
        ("l1_lc2", f32(l1 * lc2)),
        ("phi2_k", f32(m2 * lc2 * g)),
        ("half_pi", f32(pi / 2.0)),
        ("phi1_a", f32(-m2 * l1 * lc2)),
        ("phi1_b", f32(2 * m2 * l1 * lc2)),
        ("phi1_c", f32((m1 * lc1 + m2 * l1) * g)),
        ("m2_l1_lc2", f32(m2 * l1 * lc2)),
        ("den_c", f32(m2 * lc2**2 + i2)),
        ("pi", f32(pi)),
        ("neg_pi", f32(-pi)),
        ("span", f32(span)),
        ("inv_span", reciprocal(span)),
        ("max_vel_1", f32(p.max_vel_1)),
        ("max_vel_2", f32(p.max_vel_2)),
        ("reset_low", f32(-p.reset_bound)),
        ("reset_high", f32(p.reset_bound)),
        ("book", int(p.book_or_nips == "book")),
    ]


def _mountain_car_consts(p) -> Consts:
    return [
        ("min_position", f32(p.min_position)),
        ("max_position", f32(p.max_position)),
        ("max_speed", f32(p.max_speed)),
        ("goal_position", f32(p.goal_position)),
        ("goal_velocity", f32(p.goal_velocity)),
        ("force", f32(p.force)),
        ("neg_gravity", f32(-p.gravity)),
        ("reset_low", f32(p.reset_low)),
        ("reset_high", f32(p.reset_high)),
    ]


def _mountain_car_continuous_consts(p) -> Consts:
    return [
        ("min_action", f32(p.min_action)),
        ("max_action", f32(p.max_action)),
        ("min_position", f32(p.min_position)),
        ("max_position", f32(p.max_position)),
        ("max_speed", f32(p.max_speed)),
        ("goal_position", f32(p.goal_position)),
        ("goal_velocity", f32(p.goal_velocity)),
        ("power", f32(p.power)),
        ("gravity", f32(p.gravity)),
        ("goal_reward", f32(p.goal_reward)),
        ("action_cost", f32(p.action_cost)),
        ("reset_low", f32(p.reset_low)),
        ("reset_high", f32(p.reset_high)),
    ]


def _pendulum_consts(p) -> Consts:
    return [
        ("max_torque", f32(p.max_torque)),
        ("max_speed", f32(p.max_speed)),
        ("dt", f32(p.dt)),
        ("pi", f32(math.pi)),
        ("two_pi", f32(2 * math.pi)),
        ("speed_cost", f32(0.1)),
        ("action_cost", f32(0.001)),
        ("gravity_k", f32(3 * p.g / (2 * p.length))),
        ("torque_k", f32(3.0 / (p.mass * p.length**2))),
        ("reset_angle_low", f32(-p.reset_angle_bound)),
        ("reset_angle_high", f32(p.reset_angle_bound)),
        ("reset_speed_low", f32(-p.reset_speed_bound)),
        ("reset_speed_high", f32(p.reset_speed_bound)),
    ]


BINDINGS: dict[str, KernelBinding] = {
    b.source: b
    for b in (
        KernelBinding("cartpole", _cartpole_consts),
        KernelBinding("acrobot", _acrobot_consts),
        KernelBinding("mountain_car", _mountain_car_consts),
        KernelBinding("mountain_car_continuous", _mountain_car_continuous_consts),
        KernelBinding("pendulum", _pendulum_consts),
    )
}
"""Kernel binding of every env definition name that has kernels."""


def binding_for(definition) -> KernelBinding:
    """The :class:`KernelBinding` of an env definition, or a clear error."""
    binding = getattr(definition, "kernel_binding", None) or BINDINGS.get(definition.name)
    if binding is None:
        # KernelsUnavailable: under backend="auto" an env without kernels (a custom env
        # registered without a KernelBinding) runs on the torch backend with a notice.
        raise KernelsUnavailable(
            f"env {definition.name!r} has no CUDA kernels; use backend='torch' "
            f"(kernels exist for: {', '.join(sorted(BINDINGS))})"
        )
    return binding


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
        module = load_module(binding.source, self._device_index, binding.path)
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
        self._step_fn = kernel("step", buffers_fmt + "P" + "PPPPP" + "iii",
                               (*head, *buffer_ptrs))
        self._reset_fn = kernel("reset", buffers_fmt + "PPi", (*head, *buffer_ptrs))
        self._observe_fn = kernel("observe", consts_fmt + state_fmt + "Pi", head)
        self._step_tail = (n, ctx.max_episode_steps or 0, AUTORESET_CODES[ctx.autoreset_mode])
        self._n = n
        self._grid = ((n + BLOCK_SIZE - 1) // BLOCK_SIZE, 1, 1)
        self._block = (BLOCK_SIZE, 1, 1)

    def reset(self, mask: torch.Tensor | None, obs_out: torch.Tensor) -> None:
        """Reset the envs in ``mask`` ((n,) bool; all if None) and write every obs."""
        if mask is not None:
            mask = mask.contiguous()
        self._reset_fn(self._grid, self._block, (_ptr(mask), obs_out.data_ptr(), self._n))

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One fused launch: see ``gv_step_env`` in ``cuda_src/common/autoreset.cuh``."""
        action = action.contiguous()
        self._step_fn(self._grid, self._block, (
            action.data_ptr(), out.obs.data_ptr(), out.reward.data_ptr(),
            out.terminated.data_ptr(), out.truncated.data_ptr(), _ptr(out.final_obs),
            *self._step_tail,
        ))

    def observe(self, out: torch.Tensor) -> None:
        """Write the observation of every env into ``out`` ((n, obs_dim) float32)."""
        self._observe_fn(self._grid, self._block, (out.data_ptr(), self._n))
