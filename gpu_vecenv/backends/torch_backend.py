"""The torch backend: the env's reference functions, batched, on any torch device.

This is both the CPU fallback and the oracle the CUDA kernels are tested against, so it
is written for clarity: every env computes every branch and ``torch.where`` selects, so
the control flow never depends on tensor values (no host synchronization on a GPU).
"""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import seeding
from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.buffers import StepOutputs


class TorchBackend:
    """Implements ``reset`` and ``step`` on the tensors of a :class:`BackendContext`."""

    name = "torch"

    def __init__(self, ctx: BackendContext):
        self.ctx = ctx
        self._index = torch.arange(ctx.num_envs, device=ctx.device, dtype=torch.int64)

    def _reset_where(self, mask: torch.Tensor) -> None:
        """Draw fresh initial states for the envs in ``mask`` ((n,) bool), in place."""
        ctx, b = self.ctx, self.ctx.buffers
        draws = ctx.definition.num_reset_draws(ctx.params)
        u = seeding.random_uniform(b.seed, self._index, b.rng_counter, draws)
        fresh = ctx.definition.reset(ctx.params, u)
        for name, tensor in b.state.items():
            tensor.copy_(torch.where(mask, fresh[name].to(tensor.dtype), tensor))
        b.elapsed.masked_fill_(mask, 0)
        b.rng_counter.add_(mask.to(torch.int64))
        b.autoreset_pending.logical_and_(~mask)

    def observe(self, out: torch.Tensor) -> None:
        """Write the observation of every env into ``out`` ((n, obs_dim) float32)."""
        out.copy_(self.ctx.definition.observe(self.ctx.params, self.ctx.buffers.state))

    def reset(self, mask: torch.Tensor | None, obs_out: torch.Tensor) -> None:
        """Reset the envs in ``mask`` (all if None) and write all observations."""
        if mask is None:
            mask = torch.ones(self.ctx.num_envs, dtype=torch.bool, device=self.ctx.device)
        self._reset_where(mask)
        self.ctx.buffers.invalid_action.zero_()
        self.observe(obs_out)

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One vector step with time limits and autoreset; see :class:`StepOutputs`.

        ``action`` is canonical (see :class:`gpu_vecenv.actions.ActionChecker`) but its
        values are not yet checked: envs with an invalid action are left unchanged and
        flagged in ``buffers.invalid_action`` / ``buffers.error_count``.
        """
        ctx, b = self.ctx, self.ctx.buffers
        valid = ctx.actions.valid_mask(action)
        safe_action = ctx.actions.sanitize(action, valid)
        mode = ctx.autoreset_mode
        pending = b.autoreset_pending.clone()
        if mode == AutoresetMode.NEXT_STEP:
            stepping = valid & ~pending
            resetting = valid & pending
        else:
            stepping = valid
            resetting = None

        new_state, reward, terminated = ctx.definition.step(ctx.params, b.state, safe_action)
        elapsed = b.elapsed + 1
        if ctx.max_episode_steps is None:
            truncated = torch.zeros_like(terminated)
        else:
            truncated = elapsed >= ctx.max_episode_steps
        for name, tensor in b.state.items():
            tensor.copy_(torch.where(stepping, new_state[name].to(tensor.dtype), tensor))
        b.elapsed.copy_(torch.where(stepping, elapsed, b.elapsed))
        out.reward.copy_(torch.where(stepping, reward, torch.zeros_like(reward)))
        out.terminated.copy_(terminated & stepping)
        out.truncated.copy_(truncated & stepping)
        done = out.terminated | out.truncated

        if mode == AutoresetMode.SAME_STEP:
            self.observe(out.final_obs)
            self._reset_where(done)
            b.autoreset_pending.zero_()
        elif mode == AutoresetMode.NEXT_STEP:
            self._reset_where(resetting)
            b.autoreset_pending.copy_(done | (pending & ~valid))
        else:
            b.autoreset_pending.copy_(done | (pending & ~stepping))
        self.observe(out.obs)
        b.invalid_action.copy_(~valid)
        b.error_count.add_((~valid).sum().to(torch.int32))
