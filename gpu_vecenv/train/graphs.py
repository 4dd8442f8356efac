"""The trainer's roll-out and update captured as CUDA graphs.

An on-policy iteration on small networks is hundreds of tiny kernels (per roll-out step:
the actor, sampling, storage writes, the env step, episode statistics; per minibatch:
forward, backward, gradient clipping, the optimizer), each costing more host time to
launch than GPU time to run. Captured once into a CUDA graph, an iteration is two
launches (roll-out, update) with the same kernels, reading and writing the same tensors.

What makes that valid here: every tensor the loop touches has a fixed address (the env's
``copy=False`` outputs, preallocated storage, parameters, optimizer state created during
the warm-up); action sampling and minibatch shuffling draw from a ``torch.Generator``
registered with both graphs, so each replay continues its random stream exactly where the
eager code would; the optimizers (:mod:`gpu_vecenv.train.optimizers`) keep their step count
and learning rate in device tensors, so annealing writes the rate before a replay; nothing
in the loop reads a tensor on the host. Hence a graphed run computes what the eager run
computes, bit for bit (tested on the GPU).

In a data-parallel run (:mod:`gpu_vecenv.train.distributed`) the update graph also holds
the NCCL all-reduces of the gradients and of the advantage and observation statistics:
NCCL collectives can be captured, and the communicator already exists (the warm-up ran
them eagerly). Other backends (gloo) cannot be captured: such runs stay eager.

:func:`iteration_phases` gives the trainer a :class:`GraphedLoop` where capture works and an
:class:`EagerLoop` (plain calls) elsewhere: the trainer's loop reads the same either way.

The first :data:`WARMUP_ITERATIONS` iterations run eagerly on the capture stream, as
torch advises (cuBLAS handles, autograd and optimizer state come into being outside the
graphs); the graphs are captured before the next iteration and replayed from then on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

WARMUP_ITERATIONS = 2
"""Eager iterations before the capture."""


def graph_blockers(device: torch.device, backend_name: str, policy_configs: dict[str, Any]
                   ) -> list[str]:
    """Why a run's roll-out and update cannot be captured (empty: they can).

    ``policy_configs``: policy name -> its algorithm config (``PPOConfig`` ...)."""
    from gpu_vecenv.train import distributed
    from gpu_vecenv.train.config import DDPGConfig

    reasons = []
    if distributed.active() and distributed.backend() != "nccl":
        reasons.append(f"the data-parallel backend is {distributed.backend()}; only NCCL's "
                       "all-reduce can be captured")
    if device.type != "cuda":
        reasons.append(f"the device is {device.type}, not cuda")
    if backend_name != "cuda":
        reasons.append(f"the env runs on the {backend_name} backend, not the CUDA kernels")
    for name, algo in policy_configs.items():
        if isinstance(algo, DDPGConfig):
            reasons.append("DDPG's update is not captured (PPO's and A2C's are)")
            break
        if getattr(algo, "target_kl", None) is not None:
            reasons.append(f"policy {name!r} sets target_kl (its early stop reads a value "
                           "on the host)")
    return reasons


class EagerLoop:
    """Runs a trainer's ``collect`` and ``update`` as plain calls (the CPU, DDPG, or
    ``trainer.cuda_graphs=false``); same methods as :class:`GraphedLoop`."""

    captured = False

    def __init__(self, collect: Callable[[], None],
                 update: Callable[[], dict[str, dict[str, torch.Tensor]]]):
        self.collect = collect
        self.update = update

    def release(self) -> None:
        """Nothing to release (the same method as :meth:`GraphedLoop.release`)."""


def iteration_phases(collect: Callable[[], None],
                     update: Callable[[], dict[str, dict[str, torch.Tensor]]],
                     generator: torch.Generator, device: torch.device, wanted: bool | None,
                     backend_name: str, policy_configs: dict[str, Any]
                     ) -> GraphedLoop | EagerLoop:
    """The runner of a trainer's roll-out (``collect``) and ``update``: CUDA graphs where
    ``trainer.cuda_graphs`` (``wanted``) allows and :func:`graph_blockers` finds nothing
    against them, else eager calls. ``wanted=True`` with a blocker is a ``ValueError``."""
    if wanted is False:
        return EagerLoop(collect, update)
    blockers = graph_blockers(device, backend_name, policy_configs)
    if blockers:
        if wanted:
            raise ValueError("trainer.cuda_graphs=true, but " + "; ".join(blockers))
        return EagerLoop(collect, update)
    return GraphedLoop(collect, update, generator, device)


class GraphedLoop:
    """Runs a trainer's ``collect`` and ``update`` eagerly for the warm-up, then as CUDA
    graphs.

    Args:
        collect: one roll-out (``num_steps`` vector steps, storage and statistics).
        update: every policy's update; returns ``{policy: {metric: tensor}}``.
        generator: the device generator that sampling and shuffling draw from.
        device: the CUDA device.
    """

    def __init__(self, collect: Callable[[], None],
                 update: Callable[[], dict[str, dict[str, torch.Tensor]]],
                 generator: torch.Generator, device: torch.device):
        self._collect = collect
        self._update = update
        self._generator = generator
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.iterations = 0
        self._rollout: torch.cuda.CUDAGraph | None = None
        self._update_graph: torch.cuda.CUDAGraph | None = None
        self._metrics: dict[str, dict[str, torch.Tensor]] = {}

    @property
    def captured(self) -> bool:
        return self._rollout is not None

    def release(self) -> None:
        """Destroy the graphs (they are captured again if the loop goes on).

        In a data-parallel run this must happen before the process group is destroyed:
        a graph that captured NCCL all-reduces holds a reference to the communicator
        until the graph is destroyed, and destroying the communicator waits for that
        reference, for ever if the graph is kept alive (by a reference cycle, a
        traceback, a caller's variable)."""
        graphs = [g for g in (self._rollout, self._update_graph) if g is not None]
        self._rollout = self._update_graph = None
        self._metrics = {}
        # No device sync first: a replay still in flight keeps what it uses until it
        # ends (CUDA defers the release), and after a rank failed it may never end.
        for graph in graphs:
            graph.reset()

    def collect(self) -> None:
        """The roll-out of one iteration (captures both graphs first when the warm-up
        is over)."""
        if self._rollout is None and self.iterations >= WARMUP_ITERATIONS:
            self._capture()
        if self._rollout is None:
            self._eager(self._collect)
        else:
            self._rollout.replay()

    def update(self) -> dict[str, dict[str, torch.Tensor]]:
        """The update of one iteration; returns its metrics (device tensors that the next
        replay overwrites: read them before the next iteration's update)."""
        self.iterations += 1
        if self._update_graph is None:
            return self._eager(self._update)
        self._update_graph.replay()
        return self._metrics

    def _eager(self, fn: Callable[[], Any]) -> Any:
        current = torch.cuda.current_stream(self.device)
        self.stream.wait_stream(current)
        with torch.cuda.stream(self.stream):
            result = fn()
        current.wait_stream(self.stream)
        return result

    def _new_graph(self) -> torch.cuda.CUDAGraph:
        graph = torch.cuda.CUDAGraph()
        register = getattr(graph, "register_generator_state", None)
        if register is None:
            raise RuntimeError("this torch cannot register a custom generator with a CUDA "
                               "graph (torch >= 2.5 can); set trainer.cuda_graphs=false")
        register(self._generator)
        return graph

    def _capture(self) -> None:
        from gpu_vecenv.train import distributed

        torch.cuda.synchronize(self.device)
        # NCCL's watchdog thread queries CUDA events while this thread captures: in a
        # data-parallel run only this thread's calls must be capture-safe.
        mode = "thread_local" if distributed.active() else "global"
        rollout = self._new_graph()
        with torch.cuda.graph(rollout, stream=self.stream, capture_error_mode=mode):
            self._collect()
        update = self._new_graph()
        with torch.cuda.graph(update, stream=self.stream, capture_error_mode=mode):
            metrics = self._update()
        # Starting a capture queues writes of the registered generators' seed and offset on
        # the capture stream (torch 2.11); the first replay, on the current stream, writes
        # the real offset into the same tensors. Wait for the former so it cannot land after
        # the latter (draws would differ, more likely on a busy GPU).
        torch.cuda.synchronize(self.device)
        self._metrics = metrics
        self._rollout, self._update_graph = rollout, update
