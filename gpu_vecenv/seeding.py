"""Counter-based random numbers: Philox-4x32-10, in torch, bit-identical to the CUDA side.

A draw is a pure function of ``(seed, index, counter, block, stream)``:

- the 64-bit ``seed`` is the Philox key ``(seed & 0xffffffff, seed >> 32)``;
- the Philox counter is ``(counter, index, block, stream)``, where ``index`` is the env
  (or game) index, ``counter`` that env's own count of draws so far (one per reset),
  ``block`` enumerates groups of four 32-bit words within one draw, and ``stream``
  separates independent uses (``STREAM_RESET`` for initial states, ``STREAM_ACTIONS``
  for random actions).

So results never depend on launch order or on which other envs reset, and the torch
reference and the kernels (``cuda_src/common/rng.cuh``) produce the same numbers. Words
``4*block .. 4*block+3`` of a draw come from one Philox call.

All integer tensors here are int64 holding unsigned 32-bit values (torch has no uint32
multiply on all backends); a 32x32-bit product is taken whole in int64 with wrap-around
(see :func:`_rounds` for why that is exact). This module is the readable definition:
the kernels and the torch backend are tested against it bit for bit.
"""

from __future__ import annotations

import secrets

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
PHILOX_M0 = 0xD2511F53
PHILOX_M1 = 0xCD9E8D57
PHILOX_W0 = 0x9E3779B9
PHILOX_W1 = 0xBB67AE85
PHILOX_ROUNDS = 10

STREAM_RESET = 0
"""Stream id of the draws that make initial states."""

STREAM_ACTIONS = 1
"""Stream id of the random actions of ``sample_actions()`` (:mod:`gpu_vecenv.action_sampling`)."""

SEED_MAX = 2**64 - 1


HOST_DRAW_BLOCKS = 32
"""On the CPU, draws of at most this many Philox blocks in all run on Python ints
(:func:`philox4x32_ints`, a few microseconds a block) rather than as ~75 torch ops (a few
microseconds each, whatever the size): what a handful of CPU envs resetting on one step
needs. Same bits either way. (Measured break-even: about 45 blocks.)"""


def philox4x32_ints(
    counter: tuple[int, int, int, int], key: tuple[int, int]
) -> tuple[int, int, int, int]:
    """Philox-4x32-10 (Salmon et al., SC'11; Random123's ``philox4x32``) of one counter,
    on Python ints in ``[0, 2**32)``: the textbook form, of which :func:`philox4x32` is
    the batched torch form."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(PHILOX_ROUNDS):
        p0, p1 = PHILOX_M0 * c0, PHILOX_M1 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + PHILOX_W0) & MASK32, (k1 + PHILOX_W1) & MASK32
    return c0, c1, c2, c3


def _rounds(
    lanes_a: torch.Tensor,
    lanes_b: torch.Tensor,
    key: torch.Tensor,
    multipliers: torch.Tensor,
    key_increments: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The ten Philox rounds on stacked lanes: one torch op serves two of the four words.

    Random123's round is, with ``hi``/``lo`` the upper/lower 32 bits of a 64-bit product,
    ``(c0, c1, c2, c3) <- (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0))``.
    With ``a = (c0, c2)``, ``b = (c1, c3)``, ``p = (M0*c0, M1*c2)`` and ``swap`` exchanging
    the two rows, that is ``a <- hi(swap(p)) ^ b ^ k``, ``b <- lo(swap(p))``.

    Each product of two values below 2**32 is taken whole in int64. It needs up to 64
    bits, so int64 arithmetic wraps it modulo 2**64, which keeps exactly its 64 bits (two's
    complement); ``>> 32`` then ``& MASK32`` is its high word whatever the sign. Torch's
    int64 multiply wraps on the CPU (x86 ``imul``/``vpmullq`` or AVX2's 32-bit partial
    products, ARM ``mul``) and on CUDA (PTX ``mul.lo.s64``), and so does inductor's code
    for them; other devices (MPS, ...) are checked once (:func:`_check_wrapping_multiply`).
    ``b`` keeps the whole product: its high word is masked off where ``b`` is used (in
    ``a``, and at the end), one op per round fewer.

    Args:
        lanes_a: ``(2, ...)`` int64, ``(c0, c2)``, values in ``[0, 2**32)``.
        lanes_b: ``(2, ...)`` int64, ``(c1, c3)``; only their low 32 bits count.
        key: ``(2, ...)`` int64, ``(k0, k1)`` in ``[0, 2**32)``, broadcastable to the lanes.
        multipliers, key_increments: from :func:`_device_constants`.

    Returns:
        The final ``(c0, c2)`` and ``(c1, c3)``, int64 in ``[0, 2**32)``.
    """
    trailing = (1,) * (lanes_a.dim() - 1)
    multipliers = multipliers.view(2, *trailing)
    round_keys = (key + key_increments.view(PHILOX_ROUNDS, 2, *trailing)) & MASK32
    a, b = lanes_a, lanes_b
    for round_key in round_keys:
        product = (a * multipliers).flip(0)
        a = ((product >> 32) ^ b ^ round_key) & MASK32
        b = product
    return a, b & MASK32


def philox4x32(
    counter: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    key: tuple[torch.Tensor | int, torch.Tensor | int],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Philox-4x32-10 (see :func:`philox4x32_ints`), batched in torch.

    Args:
        counter: four int64 tensors (broadcastable) with values in ``[0, 2**32)``.
        key: two int64 tensors or ints with values in ``[0, 2**32)``.

    Returns:
        Four int64 tensors with values in ``[0, 2**32)``, the broadcast shape of the inputs.
    """
    device = counter[0].device
    key_tensors = [torch.as_tensor(k, dtype=torch.int64, device=device) for k in key]
    c0, c1, c2, c3, k0, k1 = torch.broadcast_tensors(*counter, *key_tensors)
    multipliers, key_increments, _ = _device_constants(device)
    a, b = _rounds(torch.stack((c0, c2)), torch.stack((c1, c3)), torch.stack((k0, k1)),
                   multipliers, key_increments)
    return a[0], b[0], a[1], b[1]


_constants: dict[torch.device, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}


def _device_constants(device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The Philox constants as int64 tensors on ``device``, made once per device (so a draw
    copies nothing from the host, which also keeps it capturable in a CUDA graph):

    - ``multipliers``: ``(2,)``, ``(M0, M1)``;
    - ``key_increments``: ``(PHILOX_ROUNDS, 2)``, ``(r * W0, r * W1)`` for round ``r``
      (round ``r``'s key is ``(key + increment) mod 2**32``, Random123's bumped key);
    - ``key_shifts``: ``(2,)``, ``(0, 32)``: a 64-bit seed shifted by these and masked to
      32 bits is the key ``(k0, k1)``.
    """
    device = torch.device(device)
    if device not in _constants:
        _check_wrapping_multiply(device)
        rounds = torch.arange(PHILOX_ROUNDS, dtype=torch.int64)[:, None]
        _constants[device] = (
            torch.tensor([PHILOX_M0, PHILOX_M1], dtype=torch.int64, device=device),
            (rounds * torch.tensor([PHILOX_W0, PHILOX_W1], dtype=torch.int64)).to(device),
            torch.tensor([0, 32], dtype=torch.int64, device=device),
        )
    return _constants[device]


def _check_wrapping_multiply(device: torch.device) -> None:
    """Raise unless int64 products wrap modulo 2**64 on ``device`` (see :func:`_rounds`);
    CPU and CUDA are known to, other devices are checked on one product, once."""
    if device.type in ("cpu", "cuda"):
        return
    value = torch.tensor([MASK32], dtype=torch.int64, device=device)
    product = int((value * PHILOX_M1).cpu()[0])
    if product % 2**64 != MASK32 * PHILOX_M1:
        raise RuntimeError(
            f"int64 multiplication does not wrap modulo 2**64 on {device}, so the torch "
            "Philox (gpu_vecenv.seeding) would not be exact there; run the env on the CPU"
        )


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
    if _on_host(seed, num_words):
        return _words_from_ints(seed, index, counter, num_words, stream)
    return _words(seed, index, counter, num_words, stream & MASK32,
                  _device_constants(seed.device))


def _on_host(seed: torch.Tensor, num_words: int) -> bool:
    """Whether this draw is small enough to run on Python ints (see ``HOST_DRAW_BLOCKS``)."""
    return seed.device.type == "cpu" and seed.shape[0] * ((num_words + 3) // 4) <= HOST_DRAW_BLOCKS


def _words_from_ints(seed, index, counter, num_words, stream) -> torch.Tensor:
    """:func:`random_words` on Python ints, one Philox call per row and block."""
    num_blocks = (num_words + 3) // 4
    rows = zip(seed.tolist(), index.tolist(), counter.tolist(), strict=True)
    words = [
        philox4x32_ints((c & MASK32, i & MASK32, block, stream & MASK32),
                        ((s & MASK32), (s >> 32) & MASK32))
        for s, i, c in rows for block in range(num_blocks)
    ]
    out = torch.tensor(words, dtype=torch.int64).view(seed.shape[0], num_blocks * 4)
    return out[:, :num_words]


def _words(
    seed: torch.Tensor,
    index: torch.Tensor,
    counter: torch.Tensor,
    num_words: int,
    stream: int,
    constants: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
) -> torch.Tensor:
    """:func:`random_words` in torch ops, the device constants passed in (a pure function
    of tensors, which :func:`compiled_random_uniform` compiles)."""
    multipliers, key_increments, key_shifts = constants
    num_blocks = (num_words + 3) // 4
    key = (seed[None, :, None] >> key_shifts.view(2, 1, 1)) & MASK32  # (2, n, 1): (k0, k1)
    block = torch.arange(num_blocks, device=seed.device, dtype=torch.int64)
    a = torch.stack(torch.broadcast_tensors(counter[:, None] & MASK32, block))
    # The low 32 bits of index are its counter word; _rounds masks the rest.
    b = torch.stack(torch.broadcast_tensors(index[:, None], torch.full_like(block, stream)))
    a, b = _rounds(a, b, key, multipliers, key_increments)  # (2, n, num_blocks) each
    words = torch.stack((a[0], b[0], a[1], b[1]), dim=-1)  # (n, num_blocks, 4)
    return words.view(seed.shape[0], num_blocks * 4)[:, :num_words]


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


def _uniforms(seed, index, counter, num, stream, constants):
    return uniform_from_words(_words(seed, index, counter, num, stream, constants))


_compiled_uniforms = None


def compiled_random_uniform(
    seed: torch.Tensor,
    index: torch.Tensor,
    counter: torch.Tensor,
    num: int,
    stream: int = STREAM_RESET,
) -> torch.Tensor:
    """:func:`random_uniform` with its torch ops run through ``torch.compile`` (one fused
    kernel instead of ~70 small ops) and the same bits: what is compiled is integer
    arithmetic and an exact int-to-float conversion times 2**-24, which no fusion or
    reordering can round differently (unlike float arithmetic). Sizes are dynamic, so a
    new number of rows does not recompile; the first call compiles (seconds)."""
    global _compiled_uniforms
    if _on_host(seed, num):
        return random_uniform(seed, index, counter, num, stream)
    if _compiled_uniforms is None:
        _compiled_uniforms = torch.compile(_uniforms, dynamic=True)
    return _compiled_uniforms(seed, index, counter, num, stream & MASK32,
                              _device_constants(seed.device))


def uniform(u: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """Scale ``[0, 1)`` uniforms to ``[low, high)`` as the kernels do: ``low + (high - low) * u``
    in float32, with ``high - low`` rounded to float32 first.

    The float32 constants are passed as Python floats holding float32 values exactly, so
    torch uses them as float32 scalars with nothing copied to the device."""
    low32, high32 = np.float32(low), np.float32(high)
    return u * float(high32 - low32) + float(low32)


def new_seed() -> int:
    """A fresh 63-bit seed from the OS entropy pool (used when ``reset(seed=None)`` is first)."""
    return secrets.randbits(63)


def check_seed(seed: object) -> int:
    """Validate a user seed: an int in ``[0, 2**64)``. Returns it as a Python int."""
    if isinstance(seed, np.integer):
        seed = int(seed)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be a non-negative int or None, got {type(seed).__name__}")
    if not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return seed


def seed_as_int64(seed: int) -> int:
    """A 64-bit unsigned seed as the int64 (two's complement) that stores it."""
    return seed - 2**64 if seed >= 2**63 else seed
