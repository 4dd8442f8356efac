"""What a backend sees of its env, and the interface every backend implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.actions import ActionChecker
from gpu_vecenv.buffers import EnvBuffers, StepOutputs
from gpu_vecenv.definition import EnvDefinition


@dataclass
class BackendContext:
    """The env's fixed configuration and persistent buffers, handed to its backend."""

    definition: EnvDefinition
    params: Any
    num_envs: int
    device: torch.device
    autoreset_mode: AutoresetMode
    max_episode_steps: int | None
    actions: ActionChecker
    buffers: EnvBuffers
    obs_dim: int


class Backend(Protocol):
    """A way of running an env's dynamics on its buffers.

    Implementations: :class:`gpu_vecenv.backends.torch_backend.TorchBackend` (reference,
    any device) and :class:`gpu_vecenv.backends.cuda.CudaBackend` (the kernels).
    """

    name: str

    def reset(self, mask: torch.Tensor | None, obs_out: torch.Tensor) -> None:
        """Reset the envs in ``mask`` ((n,) bool; all if None) from their RNG streams,
        advance those streams, and write every env's observation to ``obs_out``."""

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """Step every env (autoreset, time limit and invalid-action flags included)."""

    def observe(self, out: torch.Tensor) -> None:
        """Write the observation of the current state of every env to ``out``."""
