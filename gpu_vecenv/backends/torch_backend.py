"""The torch backend: the env's reference functions, batched, on any torch device.

It is the fallback wherever the kernels do not run (CPU, Apple MPS, ROCm, no compiler) and
the oracle the CUDA kernels are tested against, so it is written to be read; it is also
kept cheap, because on a GPU its time goes mostly to launching small ops:

- every env computes the env's step and ``torch.where`` keeps it where the env steps, so
  the step itself never branches on tensor values;
- the state fields of one dtype are the rows of one tensor
  (:attr:`~gpu_vecenv.buffers.EnvBuffers.state_blocks`), written with one op, and the
  outputs are written in place (``out=``);
- initial states are drawn only for the envs that reset (:meth:`TorchBackend._reset_where`);
- ``compile=True`` on a CUDA GPU runs the whole step through ``torch.compile`` with
  the inductor options under which its float math rounds as the eager ops do
  (:mod:`gpu_vecenv.backends.compiled_step`; a few fused kernels instead of ~150).
  Elsewhere (CPU, MPS, ROCm, a torch without those options) it compiles only the Philox
  draws (:func:`gpu_vecenv.seeding.compiled_random_uniform`: integer ops, so the bits
  cannot change): there inductor rounds float math differently (on the CPU, torch 2.13,
  a compiled CartPole step gives other bits for 2.5% of ``x_dot`` and 17% of
  ``theta_dot`` values), and this backend must reproduce the kernels' bits.

``tests/runtime/test_fast_backend.py`` holds this backend to a frozen copy of the original
one-``where``-per-field backend, bit for bit, over long random roll-outs.
"""

from __future__ import annotations

import weakref

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import seeding
from gpu_vecenv.backends import compiled_step
from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.definition import State


def _as(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor.to(dtype)``, without the call's cost when it is a no-op (most of the time)."""
    return tensor if tensor.dtype == dtype else tensor.to(dtype)


class TorchBackend:
    """Implements ``reset`` and ``step`` on the tensors of a :class:`BackendContext`.

    Args:
        ctx: the env's buffers and settings.
        compile: on a CUDA GPU, compile the whole step (same bits; see
            :mod:`~gpu_vecenv.backends.compiled_step`), elsewhere the Philox draws of
            initial states (same bits). The first step (or draw) compiles: seconds.
        graphs: on a CUDA device, replay each step as one CUDA graph after three eager
            steps (:class:`~gpu_vecenv.backends.graphed_step.GraphedStep`; same bits);
            ignored on other devices.
    """

    name = "torch"

    def __init__(self, ctx: BackendContext, compile: bool = False, graphs: bool = False):
        self.ctx = ctx
        self.compile = bool(compile)
        self._compiled_step = None
        if self.compile and compiled_step.whole_step_problem(ctx.device) is None:
            self._compiled_step = compiled_step.compile_step(TorchBackend._step)
        self._graphed = None
        if graphs and ctx.device.type == "cuda":
            from gpu_vecenv.backends.graphed_step import GraphedStep

            # Through a weak reference: no backend <-> graph cycle, so the graph (and its
            # memory) goes with the env rather than at some later garbage collection.
            step = weakref.WeakMethod(self._eager_or_compiled_step)
            self._graphed = GraphedStep(
                lambda action, out: step()(action, out), ctx.num_envs, ctx.obs_dim,
                ctx.autoreset_mode == AutoresetMode.SAME_STEP, ctx.device)
        self._index = torch.arange(ctx.num_envs, device=ctx.device, dtype=torch.int64)
        self._num_draws = ctx.definition.num_reset_draws(ctx.params)
        self._zero = torch.zeros((), dtype=torch.float32, device=ctx.device)
        # A compiled step traces the plain draws into its own kernels.
        self._random_uniform = (seeding.compiled_random_uniform
                                if self.compile and self._compiled_step is None
                                else seeding.random_uniform)
        fields = ctx.definition.state_fields
        self._blocks = [
            (tuple(f.name for f in fields if f.dtype == dtype), block)
            for dtype, block in ctx.buffers.state_blocks.items()
        ]

    def _draws_for_all(self) -> bool:
        """Whether resets draw for every env and select (in a compiled step, while the
        current CUDA stream is capturing a graph, and in the steps before a capture)
        rather than draw only for the resetting envs."""
        return self.ctx.device.type == "cuda" and (
            self._compiled_step is not None or self._graphed is not None
            or torch.cuda.is_current_stream_capturing())

    def _stacked(self, names: tuple[str, ...], state: State, dtype: torch.dtype) -> torch.Tensor:
        """The fields ``names`` of ``state`` as the rows of one ``(fields, rows)`` tensor."""
        return torch.stack([_as(state[name], dtype) for name in names])

    def _reset_where(self, mask: torch.Tensor | None) -> None:
        """Draw fresh initial states for the envs in ``mask`` ((n,) bool; all if None) and
        restart their episodes (elapsed 0, RNG counter + 1), in place.

        Only the envs that reset draw. A draw is a pure function of (seed, env index,
        counter) and an env's ``reset`` maps each row of uniforms to that env's state, so
        drawing for the selected rows gives the same bits as drawing for every env and
        selecting, which is what happens while a CUDA graph is being captured (fixed
        shapes, no syncs allowed there); the tests compare the two paths bit for bit.

        Selecting rows (``torch.nonzero``) has a data-dependent size, so on a GPU it waits
        for the device once per call. We accept that: with random actions about one
        CartPole env in 23 resets per step, and drawing for all 1M envs would be ~75 int64
        ops over 1M x 2 lanes each, while the wait costs little because the step's ~150 small
        launches keep the host, not the GPU, the bottleneck. On the CPU the branch is free
        (and small draws run on Python ints, see :data:`gpu_vecenv.seeding.HOST_DRAW_BLOCKS`).
        """
        ctx, b = self.ctx, self.ctx.buffers
        if mask is not None and self._draws_for_all():
            u = self._random_uniform(b.seed, self._index, b.rng_counter, self._num_draws)
            fresh = ctx.definition.reset(ctx.params, u)
            for names, block in self._blocks:
                torch.where(mask, self._stacked(names, fresh, block.dtype), block, out=block)
            b.elapsed.masked_fill_(mask, 0)
            b.rng_counter.add_(mask)
            return
        rows = self._index if mask is None else torch.nonzero(mask).squeeze(1)
        if rows.numel() == 0:
            return
        counter = b.rng_counter[rows]
        u = self._random_uniform(b.seed[rows], rows, counter, self._num_draws)
        fresh = ctx.definition.reset(ctx.params, u)
        # Indexed assignment (index_put_): index_copy_ has had silent errors on MPS.
        for names, block in self._blocks:
            block[:, rows] = self._stacked(names, fresh, block.dtype)
        b.elapsed[rows] = 0
        b.rng_counter[rows] = counter + 1

    def observe(self, out: torch.Tensor) -> None:
        """Write the observation of every env into ``out`` ((n, obs_dim) float32)."""
        out.copy_(self.ctx.definition.observe(self.ctx.params, self.ctx.buffers.state))

    def reset(self, mask: torch.Tensor | None, obs_out: torch.Tensor) -> None:
        """Reset the envs in ``mask`` (all if None) and write all observations."""
        b = self.ctx.buffers
        self._reset_where(mask)
        if mask is None:
            b.autoreset_pending.zero_()
        else:
            b.autoreset_pending.masked_fill_(mask, False)
        b.invalid_action.zero_()
        self.observe(obs_out)

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One vector step with time limits and autoreset (see :meth:`_step`), compiled
        with ``compile=True`` on a GPU, replayed from a CUDA graph with ``graphs=True``."""
        if self._graphed is not None:
            self._graphed(action, out)
        else:
            self._eager_or_compiled_step(action, out)

    def _eager_or_compiled_step(self, action: torch.Tensor, out: StepOutputs) -> None:
        if self._compiled_step is not None:
            self._compiled_step(self, action, out)
        else:
            self._step(action, out)

    def _step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One vector step with time limits and autoreset; see :class:`StepOutputs`.

        ``action`` is canonical (see :class:`gpu_vecenv.actions.ActionChecker`) but its
        values are not yet checked: envs with an invalid action are left unchanged and
        flagged in ``buffers.invalid_action`` / ``buffers.error_count``.
        """
        ctx, b = self.ctx, self.ctx.buffers
        mode = ctx.autoreset_mode
        valid = ctx.actions.valid_mask(action)
        safe_action = ctx.actions.sanitize(action, valid)
        invalid = torch.logical_not(valid, out=b.invalid_action)
        b.error_count.add_(invalid.sum(dtype=torch.int32))
        pending = b.autoreset_pending  # the episode ended on the last step
        if mode == AutoresetMode.NEXT_STEP:
            resetting = valid & pending  # this step is their reset step
            stepping = valid & ~pending
        else:
            stepping = valid

        new_state, reward, terminated = ctx.definition.step(ctx.params, b.state, safe_action)
        for names, block in self._blocks:
            torch.where(stepping, self._stacked(names, new_state, block.dtype), block, out=block)
        b.elapsed.add_(stepping)
        torch.where(stepping, _as(reward, torch.float32), self._zero, out=out.reward)
        torch.logical_and(terminated, stepping, out=out.terminated)
        if ctx.max_episode_steps is None:
            out.truncated.zero_()
        else:
            torch.logical_and(b.elapsed >= ctx.max_episode_steps, stepping, out=out.truncated)
        done = out.terminated | out.truncated

        if mode == AutoresetMode.SAME_STEP:
            self.observe(out.final_obs)
            self._reset_where(done)
            pending.zero_()
        else:
            # Still pending: envs whose invalid action postponed their reset (NEXT_STEP)
            # or that wait for reset(options=...) (DISABLED).
            torch.logical_or(done, pending & invalid, out=pending)
            if mode == AutoresetMode.NEXT_STEP:
                self._reset_where(resetting)
        self.observe(out.obs)
