"""Preallocated device tensors of a vector env: persistent state and per-step outputs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gpu_vecenv.definition import EnvDefinition


@dataclass
class EnvBuffers:
    """Persistent per-env tensors, updated in place by the backends.

    Shapes, ``n`` = number of envs:

    - ``state``: one ``(n,)`` tensor per state field of the env definition;
    - ``state_blocks``: the same memory by dtype: the fields of one dtype (in
      ``state_fields`` order) are the rows of one ``(fields, n)`` tensor, so a backend can
      update a whole state with one op;
    - ``elapsed``: ``(n,)`` int32, steps taken in the current episode;
    - ``rng_counter``: ``(n,)`` int64, draws (resets) taken from the env's RNG stream;
    - ``seed``: ``(n,)`` int64, the 64-bit seed of each env (two's complement);
    - ``autoreset_pending``: ``(n,)`` bool, the episode ended on the last step
      (NEXT_STEP resets these envs on the next ``step()``);
    - ``invalid_action``: ``(n,)`` bool, the env got an invalid action on the last step
      and was left unchanged;
    - ``error_count``: ``()`` int32, invalid actions seen since the last check.
    """

    state: dict[str, torch.Tensor]
    state_blocks: dict[torch.dtype, torch.Tensor]
    elapsed: torch.Tensor
    rng_counter: torch.Tensor
    seed: torch.Tensor
    autoreset_pending: torch.Tensor
    invalid_action: torch.Tensor
    error_count: torch.Tensor

    @classmethod
    def allocate(cls, definition: EnvDefinition, n: int, device: torch.device) -> EnvBuffers:
        fields = definition.state_fields
        blocks, rows = {}, {}
        for dtype in dict.fromkeys(f.dtype for f in fields):
            names = [f.name for f in fields if f.dtype == dtype]
            blocks[dtype] = torch.zeros((len(names), n), dtype=dtype, device=device)
            rows.update(zip(names, blocks[dtype].unbind(0), strict=True))  # views
        return cls(
            state={f.name: rows[f.name] for f in fields},
            state_blocks=blocks,
            elapsed=torch.zeros(n, dtype=torch.int32, device=device),
            rng_counter=torch.zeros(n, dtype=torch.int64, device=device),
            seed=torch.zeros(n, dtype=torch.int64, device=device),
            autoreset_pending=torch.zeros(n, dtype=torch.bool, device=device),
            invalid_action=torch.zeros(n, dtype=torch.bool, device=device),
            error_count=torch.zeros((), dtype=torch.int32, device=device),
        )


@dataclass
class StepOutputs:
    """What one ``step()`` returns, written by the backend.

    - ``obs``: ``(n, obs_dim)`` float32;
    - ``reward``: ``(n,)`` float32;
    - ``terminated``, ``truncated``: ``(n,)`` bool;
    - ``final_obs``: ``(n, obs_dim)`` float32 (SAME_STEP only, else ``None``): the last
      observation of an episode that ended on this step, and the current observation
      for the other envs;
    - ``active``: ``(n,)`` bool (multi-agent envs only, else ``None``): the slots whose
      observation is live after this step (``info["active"]``).
    """

    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor | None
    active: torch.Tensor | None = None

    @classmethod
    def allocate(
        cls, n: int, obs_dim: int, device: torch.device, with_final_obs: bool,
        with_active: bool = False,
    ) -> StepOutputs:
        return cls(
            obs=torch.empty((n, obs_dim), dtype=torch.float32, device=device),
            reward=torch.empty(n, dtype=torch.float32, device=device),
            terminated=torch.empty(n, dtype=torch.bool, device=device),
            truncated=torch.empty(n, dtype=torch.bool, device=device),
            final_obs=(torch.empty((n, obs_dim), dtype=torch.float32, device=device)
                       if with_final_obs else None),
            active=torch.empty(n, dtype=torch.bool, device=device) if with_active else None,
        )
