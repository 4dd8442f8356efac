"""Action conversion and validation, shared by every env and backend.

Two layers:

- :meth:`ActionChecker.convert` runs on the host and looks only at metadata (type,
  shape, dtype, device), so it never synchronizes with the GPU. It raises
  :class:`InvalidActionError` at once for a wrong shape or dtype.
- :meth:`ActionChecker.valid_mask` computes, on the device, which envs received an
  in-range (Discrete/MultiDiscrete) or finite (Box) action. Backends step only those
  envs; the others are left exactly as they were. The env reports them either at once
  (strict mode, one sync per step) or as soon as the flag reaches the host (deferred).

Out-of-range values inside a Box are clipped by the env's own step, as Gymnasium's
Pendulum and MountainCarContinuous do; NaN and ±inf are invalid.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch


class InvalidActionError(ValueError):
    """An action that the env cannot take: wrong shape, dtype, device or value."""


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class ActionChecker:
    """Converts user actions to the canonical batched tensor and checks them.

    Canonical forms (``n`` = number of envs):

    - ``Discrete``: ``(n,)`` int64;
    - ``MultiDiscrete([k1, ..., kd])``: ``(n, d)`` int64;
    - ``Box(shape)``: ``(n, *shape)`` float32.
    """

    def __init__(self, single_action_space: gym.Space, num_envs: int, device: torch.device):
        self.space = single_action_space
        self.num_envs = num_envs
        self.device = device
        if isinstance(single_action_space, gym.spaces.Discrete):
            self.kind = "discrete"
            self.shape: tuple[int, ...] = (num_envs,)
            self.dtype = torch.int64
            self._low = int(single_action_space.start)
            self._high = int(single_action_space.start + single_action_space.n)  # exclusive
        elif isinstance(single_action_space, gym.spaces.MultiDiscrete):
            self.kind = "multidiscrete"
            self.shape = (num_envs, *single_action_space.shape)
            self.dtype = torch.int64
            self._low_t = torch.as_tensor(single_action_space.start, device=device)
            self._high_t = self._low_t + torch.as_tensor(single_action_space.nvec, device=device)
        elif isinstance(single_action_space, gym.spaces.Box):
            self.kind = "box"
            self.shape = (num_envs, *single_action_space.shape)
            self.dtype = torch.float32
        else:
            raise TypeError(f"unsupported action space {single_action_space}")

    def expected(self) -> str:
        kinds = {"discrete": "an integer", "multidiscrete": "an integer", "box": "a floating"}
        return f"{kinds[self.kind]} tensor or array of shape {self.shape} for {self.space}"

    def convert(self, actions: Any) -> torch.Tensor:
        """To the canonical tensor on the env's device (no copy if already canonical)."""
        # The common case first, on metadata alone: a plain tensor that is already
        # canonical is returned as is (what ``tensor.to`` below would return, without its
        # dispatch: a few microseconds of a small env's step() on a GPU).
        if (type(actions) is torch.Tensor and actions.dtype is self.dtype
                and actions.shape == self.shape and actions.device == self.device):
            return actions
        if isinstance(actions, torch.Tensor):
            tensor = actions
        else:
            array = np.asarray(actions)
            if array.dtype.kind not in "biuf":
                raise InvalidActionError(
                    f"actions have dtype {array.dtype}; expected {self.expected()}"
                )
            if array.dtype.kind == "u" and array.dtype.itemsize >= 4:
                array = array.astype(np.int64)  # torch lacks uint32/uint64 arithmetic
            tensor = torch.from_numpy(np.ascontiguousarray(array))
        if tuple(tensor.shape) != self.shape:
            raise InvalidActionError(
                f"actions have shape {tuple(tensor.shape)}; expected {self.expected()}"
            )
        if self.kind == "box":
            if tensor.dtype not in _FLOAT_DTYPES:
                raise InvalidActionError(
                    f"actions have dtype {tensor.dtype}; expected {self.expected()}"
                )
        elif tensor.dtype not in _INT_DTYPES:
            raise InvalidActionError(
                f"actions have dtype {tensor.dtype}; expected {self.expected()}"
            )
        if (
            tensor.device.type == "cuda"
            and self.device.type == "cuda"
            and tensor.device != self.device
        ):
            raise InvalidActionError(
                f"actions are on {tensor.device} but the env runs on {self.device}"
            )
        return tensor.to(device=self.device, dtype=self.dtype)

    def valid_mask(self, action: torch.Tensor) -> torch.Tensor:
        """``(n,)`` bool on the device: which envs got a valid action. No sync."""
        if self.kind == "discrete":
            return (action >= self._low) & (action < self._high)
        if self.kind == "multidiscrete":
            ok = (action >= self._low_t) & (action < self._high_t)
            return ok.reshape(self.num_envs, -1).all(dim=1)
        return torch.isfinite(action).reshape(self.num_envs, -1).all(dim=1)

    def sanitize(self, action: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Replace the actions of invalid envs by a harmless valid one (the low end)."""
        if self.kind == "discrete":
            return torch.where(valid, action, self._low)
        if self.kind == "multidiscrete":
            mask = valid.reshape(-1, *([1] * (action.dim() - 1)))
            return torch.where(mask, action, self._low_t)
        mask = valid.reshape(-1, *([1] * (action.dim() - 1)))
        return torch.where(mask, action, torch.zeros((), dtype=action.dtype, device=action.device))

    def describe_invalid(self, action: torch.Tensor, valid: torch.Tensor) -> str:
        """A readable account of the invalid envs (syncs; only on the error path)."""
        bad = torch.nonzero(~valid).flatten().cpu()
        shown = bad[:5].tolist()
        values = [action[i].cpu().tolist() for i in shown]
        what = "in range" if self.kind != "box" else "finite (no NaN or inf)"
        more = f" (and {len(bad) - len(shown)} more)" if len(bad) > len(shown) else ""
        pairs = ", ".join(f"env {i}: {v}" for i, v in zip(shown, values, strict=True))
        return f"{len(bad)} env(s) got actions that are not {what} for {self.space}: {pairs}{more}"
