"""Helpers of the classic-env GPU tests: envs on both backends, random device actions."""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.entry_points import make_vec
from gpu_vecenv.env_ids import shipped_ids

CLASSIC_IDS = shipped_ids(single_agent=True)
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


def make_pair(env_id: str, n: int, mode=AutoresetMode.NEXT_STEP, **kwargs):
    """The same env on the CUDA backend and on the torch backend, both on cuda:0."""
    common = dict(device="cuda", autoreset_mode=mode, strict=False, **kwargs)
    return (make_vec(env_id, n, backend="cuda", **common),
            make_vec(env_id, n, backend="torch", **common))


def random_actions(env, gen: torch.Generator, invalid_fraction: float = 0.0,
                   overshoot: float = 1.5) -> torch.Tensor:
    """Uniform actions on the env's device; Box actions reach ``overshoot`` times the bounds
    (valid: the env clips); a fraction of invalid ones (out of range, NaN, inf)."""
    n, space, device = env.num_envs, env.single_action_space, env.device
    if env.actions.kind == "discrete":
        action = torch.randint(0, int(space.n), (n,), device=device, generator=gen)
        if invalid_fraction:
            bad = torch.rand(n, device=device, generator=gen) < invalid_fraction
            junk = torch.tensor([-1, int(space.n), 2**40], device=device)
            pick = torch.randint(0, 3, (n,), device=device, generator=gen)
            action = torch.where(bad, junk[pick], action)
        return action
    high = float(space.high.max())
    action = (torch.rand((n, *space.shape), device=device, generator=gen) * 2 - 1)
    action = action * (overshoot * high)
    if invalid_fraction:
        bad = torch.rand(n, device=device, generator=gen) < invalid_fraction
        junk = torch.tensor([float("nan"), float("inf"), -float("inf")], device=device)
        pick = torch.randint(0, 3, (n,), device=device, generator=gen)
        action[:, 0] = torch.where(bad, junk[pick], action[:, 0])
    return action
