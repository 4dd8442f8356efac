"""``trainer.compile_update``: an on-policy learner's loss compiled with ``torch.compile``.

The loss of PPO's minibatch (:func:`gpu_vecenv.train.ppo.ppo_minibatch_loss`) or of A2C's
roll-out (:func:`gpu_vecenv.train.a2c.a2c_loss`) is traced once, forward and (through
AOTAutograd) backward; the compiler fuses the elementwise work around the matrix products
(bias, activation and their gradients, the distribution's log-probabilities and entropy,
the loss terms), which on torch ops is one pass over the activations each. The matrix
products stay cuBLAS's. The first update compiles (tens of seconds); results differ from
the eager loss in the low bits (other summation orders). The optimizer step stays eager
(and captured with the rest where CUDA graphs are on).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Callable
from typing import TypeVar

import torch

LossFn = TypeVar("LossFn", bound=Callable)

BACKEND = "inductor"
"""The ``torch.compile`` backend (tests use ``aot_eager``: the same tracing of forward and
backward without generating code)."""


CPP_COMPILERS = ("g++", "c++", "clang++")
"""What Inductor can build its CPU code with (or ``$CXX``)."""


def missing_toolchain(device: torch.device) -> str | None:
    """Why Inductor cannot compile for ``device`` here (None: it can): on a CPU it needs a
    C++ compiler, on a GPU Triton (which torch's Linux CUDA wheels install)."""
    if BACKEND != "inductor":
        return None
    if device.type == "cpu":
        names = [os.environ["CXX"]] if os.environ.get("CXX") else list(CPP_COMPILERS)
        if not any(shutil.which(name) for name in names):
            return f"on a CPU needs a C++ compiler ({' or '.join(names)}), and none is found"
    elif device.type == "cuda" and importlib.util.find_spec("triton") is None:
        return "on a GPU needs Triton (pip install triton), which is not installed"
    return None


def maybe_compile(loss: LossFn, enabled: bool, device: torch.device) -> LossFn:
    """``loss`` compiled (shapes fixed: every call of a learner has the same), or as is;
    raises ``ValueError`` where the compiler cannot run (:func:`missing_toolchain`)."""
    if not enabled:
        return loss
    why = missing_toolchain(device)
    if why is not None:
        raise ValueError(f"trainer.compile_update: torch.compile {why}; set "
                         "trainer.compile_update=false")
    return torch.compile(loss, dynamic=False, backend=BACKEND)
