"""Counter-based random numbers: Philox-4x32-10, in torch, bit-identical to the CUDA side.

A draw is a pure function of ``(seed, index, counter, block, stream)``:

- the 64-bit ``seed`` is the Philox key ``(seed & 0xffffffff, seed >> 32)``;
- the Philox counter is ``(counter, index, block, stream)``, where ``index`` is the env
  (or game) index, ``counter`` that env's own count of draws so far (one per reset),
  ``block`` enumerates groups of four 32-bit words within one draw, and ``stream``
  separates independent uses (``STREAM_RESET`` for initial states).

So results never depend on launch order or on which other envs reset, and the torch
reference and the kernels (``cuda_src/common/rng.cuh``) produce the same numbers. Words
``4*block .. 4*block+3`` of a draw come from one Philox call.

All integer tensors here are int64 holding unsigned 32-bit values, so the arithmetic is
exact on every torch device (torch has no uint32 multiply on all backends).
"""

from __future__ import annotations

import secrets

import torch

MASK32 = 0xFFFFFFFF
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

STREAM_RESET = 0
"""Stream id of the draws that make initial states."""

SEED_MAX = 2**64 - 1


def _mulhilo(multiplier: int, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32 bits of ``multiplier * value`` (both < 2**32), exactly in int64."""
    low_half = value & 0xFFFF
    high_half = value >> 16
    p_low = low_half * multiplier  # < 2**48
    p_high = high_half * multiplier  # < 2**48
    lo = (((p_high & 0xFFFF) << 16) + p_low) & MASK32
    hi = (p_high + (p_low >> 16)) >> 16
    return hi, lo


def philox4x32(
    counter: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    key: tuple[torch.Tensor | int, torch.Tensor | int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Philox-4x32-10 (Salmon et al., SC'11; Random123's ``philox4x32``).

    Args:
        counter: four int64 tensors (broadcastable) with values in ``[0, 2**32)``.
        key: two int64 tensors or ints with values in ``[0, 2**32)``.

    Returns:
        Four int64 tensors with values in ``[0, 2**32)``, the broadcast shape of the inputs.
    """
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
    """Split 64-bit seeds stored in int64 (two's complement) into Philox key words."""
    return seed & MASK32, (seed >> 32) & MASK32


def random_words(
    seed: torch.Tensor,
    index: torch.Tensor,
    counter: torch.Tensor,
    num_words: int,
    stream: int = STREAM_RESET,
) -> torch.Tensor:
    """Random 32-bit words of one draw per row.

    Args:
        seed: ``(n,)`` int64 seeds (64-bit, two's complement).
        index: ``(n,)`` int64 env/game indices.
        counter: ``(n,)`` int64 per-index draw counters.
        num_words: words per row.
        stream: stream id.

    Returns:
        ``(n, num_words)`` int64 with values in ``[0, 2**32)``; word ``w`` comes from
        Philox block ``w // 4``, lane ``w % 4``.
    """
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
    """Map 32-bit words to float32 in ``[0, 1)``: the top 24 bits times 2**-24 (exact)."""
    return (words >> 8).to(torch.float32) * (1.0 / 16777216.0)


def random_uniform(
    seed: torch.Tensor,
    index: torch.Tensor,
    counter: torch.Tensor,
    num: int,
    stream: int = STREAM_RESET,
) -> torch.Tensor:
    """``(n, num)`` float32 uniforms in ``[0, 1)``; see :func:`random_words`."""
    return uniform_from_words(random_words(seed, index, counter, num, stream))


def uniform(u: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Scale ``[0, 1)`` uniforms to ``[low, high)`` as the kernels do: ``low + (high - low) * u``
    in float32, with ``high - low`` rounded to float32 first."""
    span = torch.tensor(high, dtype=torch.float32) - torch.tensor(low, dtype=torch.float32)
    return u * span.to(u.device) + torch.tensor(low, dtype=torch.float32, device=u.device)


def new_seed() -> int:
    """A fresh 63-bit seed from the OS entropy pool (used when ``reset(seed=None)`` is first)."""
    return secrets.randbits(63)


def check_seed(seed: object) -> int:
    """Validate a user seed: an int in ``[0, 2**64)``. Returns it as a Python int."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        try:
            import numpy as np

            if isinstance(seed, np.integer):
                seed = int(seed)
            else:
                raise TypeError
        except TypeError:
            raise TypeError(
                f"seed must be a non-negative int or None, got {type(seed).__name__}"
            ) from None
    if not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return seed


def seed_as_int64(seed: int) -> int:
    """A 64-bit unsigned seed as the int64 (two's complement) that stores it."""
    return seed - 2**64 if seed >= 2**63 else seed
