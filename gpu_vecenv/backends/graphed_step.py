"""A backend's ``step`` replayed as one CUDA graph: the torch backend's ``torch_graphs``.

On a GPU the torch backend spends its time launching ~150 small ops per step (a few
microseconds of host time each, whatever the batch size). Captured once into a CUDA
graph, a step is one replay: the same kernels with the same inputs, so the same bits (the
GPU tests compare replays with eager steps), without the per-op host cost.

What a graph needs and how it is met:

- fixed addresses: the action is copied into a tensor of the graph's own; the outputs are
  written into the caller's ``out`` when the caller passes the same one every step (the
  env's ``copy=False``), else into the graph's own and copied into each new ``out``;
- fixed shapes and no host syncs: the torch backend draws initial states for every env
  and selects while capturing (its ``_draws_for_all``), rather than compacting;
- warm-up: the first :data:`WARMUP` steps run eagerly (real steps, same results), so lazy
  initialisation and ``torch.compile``'s first compile happen outside the capture.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch

from gpu_vecenv.buffers import StepOutputs

WARMUP = 3
"""Eager steps before the capture."""

Step = Callable[[torch.Tensor, StepOutputs], None]


class GraphedStep:
    """Calls ``step(action, out)`` eagerly for :data:`WARMUP` steps, then captures it
    and replays the graph on every later call.

    Args:
        step: the eager step; writes ``out``'s tensors in place and must not synchronize
            or branch on tensor values while a graph is being captured.
        num_envs, obs_dim, with_final_obs: the shape of the outputs.
        device: a CUDA device.
    """

    def __init__(self, step: Step, num_envs: int, obs_dim: int, with_final_obs: bool,
                 device: torch.device):
        self._step = step
        self._num_envs, self._obs_dim, self._with_final_obs = num_envs, obs_dim, with_final_obs
        self._device = device
        self._steps = 0
        self._last_out: StepOutputs | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._action: torch.Tensor | None = None
        self._out: StepOutputs | None = None

    def __call__(self, action: torch.Tensor, out: StepOutputs) -> None:
        if self._graph is None:
            self._steps += 1
            if self._steps <= WARMUP:
                self._step(action, out)
                self._last_out = out
                return
            self._capture(action, out)
        self._action.copy_(action)
        self._graph.replay()
        if out is not self._out:
            for name in ("obs", "reward", "terminated", "truncated", "final_obs"):
                target = getattr(out, name)
                if target is not None:
                    target.copy_(getattr(self._out, name))

    def _capture(self, action: torch.Tensor, out: StepOutputs) -> None:
        self._action = action.clone()
        # The caller's own outputs if it passes the same ones every step, else ours.
        self._out = out if out is self._last_out else StepOutputs.allocate(
            self._num_envs, self._obs_dim, self._device, self._with_final_obs)
        torch.cuda.current_stream(self._device).synchronize()
        # A graph freed while another is being captured invalidates the capture: collect
        # unreachable ones now (torch.cuda.graph no longer does by default).
        gc.collect()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._step(self._action, self._out)
        # The capture's own stream may still hold work queued when it began (torch 2.11
        # writes registered generators' states there); the replays run on the current
        # stream, so wait for it once.
        torch.cuda.synchronize(self._device)
        self._graph = graph
