"""The torch backend and its Philox as they were before the fast backend (commit dd65a68),
kept verbatim as an oracle: one ``torch.where`` per field, draws for every env on every
step, Philox's 32x32-bit products split into 16-bit halves.

:mod:`tests.runtime.test_fast_backend` runs :class:`FrozenTorchBackend` beside
:class:`gpu_vecenv.backends.torch_backend.TorchBackend` and requires the same bits;
``scripts/bench_torch_backend.py --impl old`` times it. Do not "improve" this file.
"""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.buffers import StepOutputs

MASK32 = 0xFFFFFFFF
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10
STREAM_RESET = 0


def _mulhilo(multiplier: int, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32 bits of ``multiplier * value`` (both < 2**32), exactly in int64."""
    low_half = value & 0xFFFF
    high_half = value >> 16
    p_low = low_half * multiplier  # < 2**48
    p_high = high_half * multiplier  # < 2**48
    lo = (((p_high & 0xFFFF) << 16) + p_low) & MASK32
    hi = (p_high + (p_low >> 16)) >> 16
    return hi, lo


def philox4x32(counter, key):
    """Philox-4x32-10 on four int64 counter tensors and two key words."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for round_index in range(PHILOX_ROUNDS):
        if round_index > 0:
            k0 = (k0 + PHILOX_W0) & MASK32
            k1 = (k1 + PHILOX_W1) & MASK32
        hi0, lo0 = _mulhilo(PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(PHILOX_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return c0, c1, c2, c3


def seed_key(seed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return seed & MASK32, (seed >> 32) & MASK32


def random_words(seed, index, counter, num_words: int, stream: int = STREAM_RESET):
    num_blocks = (num_words + 3) // 4
    device = seed.device
    block = torch.arange(num_blocks, device=device, dtype=torch.int64)[None, :]
    k0, k1 = seed_key(seed[:, None])
    out = philox4x32(
        (
            counter[:, None] & MASK32,
            index[:, None] & MASK32,
            block,
            torch.full_like(block, stream & MASK32),
        ),
        (k0, k1),
    )
    words = torch.stack(out, dim=-1).reshape(seed.shape[0], num_blocks * 4)
    return words[:, :num_words]


def uniform_from_words(words: torch.Tensor) -> torch.Tensor:
    return (words >> 8).to(torch.float32) * (1.0 / 16777216.0)


def random_uniform(seed, index, counter, num: int, stream: int = STREAM_RESET):
    return uniform_from_words(random_words(seed, index, counter, num, stream))


def uniform(u: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """The old ``seeding.uniform`` (scalars copied to the device)."""
    span = torch.tensor(high, dtype=torch.float32) - torch.tensor(low, dtype=torch.float32)
    return u * span.to(u.device) + torch.tensor(low, dtype=torch.float32, device=u.device)


class FrozenTorchBackend:
    """The old ``TorchBackend``, unchanged but for using this module's Philox."""

    name = "torch-frozen"

    def __init__(self, ctx: BackendContext):
        self.ctx = ctx
        self._index = torch.arange(ctx.num_envs, device=ctx.device, dtype=torch.int64)

    def _reset_where(self, mask: torch.Tensor) -> None:
        ctx, b = self.ctx, self.ctx.buffers
        draws = ctx.definition.num_reset_draws(ctx.params)
        u = random_uniform(b.seed, self._index, b.rng_counter, draws)
        fresh = ctx.definition.reset(ctx.params, u)
        for name, tensor in b.state.items():
            tensor.copy_(torch.where(mask, fresh[name].to(tensor.dtype), tensor))
        b.elapsed.masked_fill_(mask, 0)
        b.rng_counter.add_(mask.to(torch.int64))
        b.autoreset_pending.logical_and_(~mask)

    def observe(self, out: torch.Tensor) -> None:
        out.copy_(self.ctx.definition.observe(self.ctx.params, self.ctx.buffers.state))

    def reset(self, mask: torch.Tensor | None, obs_out: torch.Tensor) -> None:
        if mask is None:
            mask = torch.ones(self.ctx.num_envs, dtype=torch.bool, device=self.ctx.device)
        self._reset_where(mask)
        self.ctx.buffers.invalid_action.zero_()
        self.observe(obs_out)

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
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
