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

from collections.abc import Callable
from typing import TypeVar

import torch

LossFn = TypeVar("LossFn", bound=Callable)

BACKEND = "inductor"
"""The ``torch.compile`` backend (tests use ``aot_eager``: the same tracing of forward and
backward without generating code)."""


def maybe_compile(loss: LossFn, enabled: bool) -> LossFn:
    """``loss`` compiled (shapes fixed: every call of a learner has the same), or as is."""
    if not enabled:
        return loss
    return torch.compile(loss, dynamic=False, backend=BACKEND)
