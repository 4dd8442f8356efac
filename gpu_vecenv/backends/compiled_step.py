"""The torch backend's whole step through ``torch.compile``, with the eager ops' bits.

On a GPU the torch backend's step is ~150 small ops; inductor fuses them into a few Triton
kernels. Left to its defaults it rounds differently from the eager ops (and so from our
CUDA kernels, which reproduce those bit for bit): Triton contracts multiply-adds into
FMAs, divides with an approximate reciprocal (``div.full.f32``) and lets libdevice's
``sin``/``cos``/... flush denormals. Three inductor options turn each of these off
(:data:`EAGER_NUMERICS`). Inductor's one other rewrite, ``x / c`` into ``x * (1 / c)``
for a constant ``c`` with the reciprocal formed in double, is what torch's eager CUDA
kernel does too (see :func:`gpu_vecenv.kernel_binding.reciprocal`).

Measured on the H200 (torch 2.11): with these options the compiled step equals the eager
one bit for bit over 300 steps of 65,536 envs of every classic env in each autoreset mode;
without them, 4-100 % of the state values differ after 300 steps. The GPU tests
(``tests/gpu/test_torch_backend_gpu.py``) hold it to that.

Where the whole step is compiled:

- CUDA devices only. Not ROCm (untested: its division and transcendentals may round
  otherwise), not the CPU (inductor's C++ vectorizes ``sin``/``cos`` with other roundings:
  a compiled CartPole step gave other bits for 2.5 % of ``x_dot`` values), not MPS.
- Torch versions whose inductor has the three options (2.11 and 2.13 do); on others
  ``torch_compile=True`` compiles only the Philox draws
  (:func:`gpu_vecenv.seeding.compiled_random_uniform`: integer math, always exact).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

EAGER_NUMERICS: dict[str, bool] = {
    "emulate_precision_casts": True,  # also sets Triton's enable_fp_fusion=False: no FMAs
    "eager_numerics.division_rounding": True,  # x / y as div.rn.f32, as eager does
    "eager_numerics.disable_ftz": True,  # libdevice keeps denormals, as eager does
}
"""Inductor options under which compiled float math rounds as eager CUDA ops do."""


def _inductor_has(option: str) -> bool:
    from torch._inductor import config

    node: Any = config
    for part in option.split("."):
        if not hasattr(node, part):
            return False
        node = getattr(node, part)
    return True


def whole_step_problem(device: torch.device) -> str | None:
    """Why the whole step cannot be compiled with eager's bits on ``device``, or None."""
    if device.type != "cuda":
        return f"only on CUDA devices, not {device.type}"
    if torch.version.hip is not None:
        return "not on ROCm (its compiled float math is untested against eager)"
    missing = [o for o in EAGER_NUMERICS if not _inductor_has(o)]
    if missing:
        return f"torch {torch.__version__}'s inductor lacks {', '.join(missing)}"
    return None


def compile_step(step: Callable[..., None]) -> Callable[..., None]:
    """``torch.compile(step)`` with :data:`EAGER_NUMERICS`, for one env.

    Dynamo keeps its compiled graphs, and its limit of recompilations, per code object.
    Every env would otherwise share ``step``'s: a ninth env in one process (of another
    size or params) would then run eagerly. So each call compiles a private copy of the
    function. The first call of the result compiles (seconds); shapes are static.
    """
    private = types.FunctionType(step.__code__.replace(), step.__globals__, step.__name__,
                                 step.__defaults__, step.__closure__)
    private.__qualname__ = step.__qualname__
    return torch.compile(private, options=dict(EAGER_NUMERICS), dynamic=False)
