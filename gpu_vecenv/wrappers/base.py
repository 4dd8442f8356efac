"""What the wrappers of this package share: the device, the autoreset mode, and which
vector slots a step or a reset concerns.

Our vector envs return torch tensors on one device. A wrapper that keeps statistics must
know, without reading anything back to the host, which slots a step counts for:

- NEXT_STEP / DISABLED: the step after a slot's ``done`` is its reset step (NEXT_STEP) or
  follows a ``reset`` (DISABLED); it belongs to no episode. SAME_STEP: every step counts.
- Tag's agent-slot view (``GPUTag-v0``): a slot whose agent left its game (a tagged
  runner) is idle until the game resets; ``info["active"]`` says which slots are live
  after a step, so a step counts for a slot only if the slot was live before it.
- A partial reset (``options={"reset_mask": m}``) restarts the masked slots; for Tag a
  mask may name games (``(num_games,)``) or slots (``(num_envs,)``; a slot mask resets the
  whole game of every masked live slot, as the env does).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper


def device_of(env: VectorEnv) -> torch.device:
    """The torch device of ``env`` (looked up through wrappers); the CPU if it has none."""
    for candidate in (env, getattr(env, "unwrapped", env)):
        device = getattr(candidate, "device", None)
        if device is not None:
            return torch.device(device)
    return torch.device("cpu")


def float_dtype(device: torch.device) -> torch.dtype:
    """The dtype of running sums and statistics: float64 (as Gymnasium's), except on
    devices without it (Apple's MPS)."""
    return torch.float32 if device.type == "mps" else torch.float64


def autoreset_mode_of(env: VectorEnv, wrapper_name: str) -> AutoresetMode:
    """``env.metadata["autoreset_mode"]``; NEXT_STEP with a warning when missing (as
    Gymnasium's wrappers do)."""
    mode = env.metadata.get("autoreset_mode")
    if mode is None:
        gym.logger.warn(
            f"{wrapper_name}: {env} has no metadata['autoreset_mode']; "
            f"assuming AutoresetMode.NEXT_STEP"
        )
        return AutoresetMode.NEXT_STEP
    if not isinstance(mode, AutoresetMode):
        raise TypeError(
            f"{wrapper_name}: expected env.metadata['autoreset_mode'] to be an "
            f"AutoresetMode, got {mode!r}"
        )
    return mode


class TensorVectorWrapper(VectorWrapper):
    """A ``VectorWrapper`` over one of our torch vector envs.

    Attributes:
        device: the env's torch device; every tensor the wrapper keeps lives there.
        autoreset_mode: the env's ``metadata["autoreset_mode"]``.
    """

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        self.device = device_of(env)
        self.autoreset_mode = autoreset_mode_of(env, type(self).__name__)
        unwrapped = env.unwrapped
        games, agents = (
            getattr(unwrapped, "num_games", None),
            getattr(unwrapped, "num_agents", None),
        )
        # Tag's slot view: G games of A agents, slot = game * A + agent
        self._games_agents = (
            (int(games), int(agents))
            if isinstance(games, int)
            and isinstance(agents, int)
            and games * agents == self.num_envs
            else None
        )
        self._all_live = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._last_active = self._all_live

    def _active_after(self, info: dict[str, Any]) -> torch.Tensor | None:
        """``(num_envs,)`` bool: the slots live after the step or reset that gave ``info``
        (Tag's ``info["active"]``); ``None`` where the env does not report it (every slot
        is live). Remembered in ``_last_active`` for the next step and reset."""
        active = info.get("active") if isinstance(info, dict) else None
        if active is None:
            self._last_active = self._all_live
            return None
        self._last_active = torch.as_tensor(active, device=self.device).to(torch.bool)
        return self._last_active

    def _reset_slots(self, options: dict[str, Any] | None) -> torch.Tensor | None:
        """``(num_envs,)`` bool tensor of the slots a reset with ``options`` restarts;
        ``None`` for a full reset. Call before the env's reset (it reads the liveness of
        slots from the last step)."""
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            return None
        if not isinstance(mask, (np.ndarray, torch.Tensor)):
            raise TypeError(
                f"options['reset_mask'] must be a numpy array or a torch tensor, "
                f"got {type(mask).__name__}"
            )
        mask = torch.as_tensor(mask, device=self.device).to(torch.bool)
        if self._games_agents is None:
            return mask
        games, agents = self._games_agents
        if mask.shape == (games,):
            return mask.repeat_interleave(agents)
        if mask.shape == (self.num_envs,):
            # The env resets a game if a masked slot is in it, or if the game has ended
            # (then none of its slots is live).
            live = self._last_active.view(games, agents)
            alive = live | ~live.any(dim=1, keepdim=True)
            game = (mask.view(games, agents) & alive).any(dim=1)
            return game.repeat_interleave(agents)
        return mask  # a wrong shape: the env's reset raises the error
