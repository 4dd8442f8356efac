"""Action conversion and validation, shared by every env and backend.

Two layers:

- :meth:`ActionChecker.convert` runs on the host and looks only at metadata (type,
  shape, dtype, device), so it never synchronizes with the GPU. It raises at once, naming
  the argument and what it takes: :class:`InvalidActionTypeError` (also a ``TypeError``)
  for what is not numbers or has a dtype the space does not take,
  :class:`InvalidActionError` (a ``ValueError``) for a wrong shape, a ragged sequence or
  a device the env cannot read. A tensor that requires grad is used detached.
- :meth:`ActionChecker.valid_mask` computes, on the device, which envs received an
  in-range (Discrete/MultiDiscrete) or finite (Box) action. Backends step only those
  envs; the others are left exactly as they were. The env reports them either at once
  (strict mode, one sync per step) or as soon as the flag reaches the host (deferred).

Out-of-range values inside a Box are clipped by the env's own step, as Gymnasium's
Pendulum and MountainCarContinuous do (float64 values beyond float32's range included);
NaN and ±inf are invalid.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from gpu_vecenv.input_tensors import check_device, readable_on, to_tensor


class InvalidActionError(ValueError):
    """An action that the env cannot take: wrong shape, device or value (a
    ``ValueError``); :class:`InvalidActionTypeError` for a wrong type or dtype."""


class InvalidActionTypeError(InvalidActionError, TypeError):
    """Actions of the wrong type or dtype (``None``, strings, floats for a ``Discrete``
    space, ...): both an :class:`InvalidActionError` and a ``TypeError``, as numpy's
    ``AxisError`` is both a ``ValueError`` and an ``IndexError``."""


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_FLOAT32_MAX = torch.finfo(torch.float32).max


def _dtype_names(dtypes: tuple[torch.dtype, ...]) -> str:
    return "/".join(str(d).removeprefix("torch.") for d in dtypes)


class ActionChecker:
    """Converts user actions to the canonical batched tensor and checks them.

    Canonical forms (``n`` = number of envs):

    - ``Discrete``: ``(n,)`` int64;
    - ``MultiDiscrete([k1, ..., kd])``: ``(n, d)`` int64;
    - ``Box(shape)``: ``(n, *shape)`` float32.

    With ``batched=False`` it checks one action of the space instead (shape
    ``space.shape``, e.g. one agent's action in a PettingZoo dict; ``num_envs`` must be 1).
    """

    def __init__(self, single_action_space: gym.Space, num_envs: int, device: torch.device,
                 batched: bool = True):
        self.space = single_action_space
        self.num_envs = num_envs
        self.device = device
        batch = (num_envs,) if batched else ()
        if isinstance(single_action_space, gym.spaces.Discrete):
            self.kind = "discrete"
            self.shape: tuple[int, ...] = batch
            self.dtype = torch.int64
            self._low = int(single_action_space.start)
            self._high = int(single_action_space.start + single_action_space.n)  # exclusive
        elif isinstance(single_action_space, gym.spaces.MultiDiscrete):
            self.kind = "multidiscrete"
            self.shape = (*batch, *single_action_space.shape)
            self.dtype = torch.int64
            self._low_t = torch.as_tensor(single_action_space.start, device=device)
            self._high_t = self._low_t + torch.as_tensor(single_action_space.nvec, device=device)
        elif isinstance(single_action_space, gym.spaces.Box):
            self.kind = "box"
            self.shape = (*batch, *single_action_space.shape)
            self.dtype = torch.float32
        else:
            raise TypeError(f"unsupported action space {single_action_space}")
        self._accepted = _FLOAT_DTYPES if self.kind == "box" else _INT_DTYPES

    def expected(self) -> str:
        kinds = {"discrete": "an integer", "multidiscrete": "an integer", "box": "a floating"}
        return (f"{kinds[self.kind]} ({_dtype_names(self._accepted)}) tensor or array of "
                f"shape {self.shape} for {self.space}, {readable_on(self.device)}")

    def convert(self, actions: Any, name: str = "actions") -> torch.Tensor:
        """To the canonical tensor on the env's device (no copy if already canonical).

        Looks at metadata only (type, shape, dtype, device), never at values on a GPU;
        ``name`` is how messages refer to ``actions``. A tensor that requires grad is
        used detached. Finite float64 values beyond float32's range become its largest
        finite value (the env's step clips them to the space, as for any other value
        outside it) rather than inf.

        Raises:
            InvalidActionTypeError: not numbers, or a dtype the space does not take.
            InvalidActionError: the wrong shape, a ragged sequence, or a device the env
                cannot read (``meta``, another GPU).
        """
        # The common case first, on metadata alone: a plain tensor that is already
        # canonical is returned as is (what ``tensor.to`` below would return, without its
        # dispatch: a few microseconds of a small env's step() on a GPU).
        if (type(actions) is torch.Tensor and actions.dtype is self.dtype
                and actions.shape == self.shape and actions.device == self.device
                and not actions.requires_grad and actions.layout is torch.strided):
            return actions
        try:
            tensor = to_tensor(actions, name)
        except TypeError as exc:
            raise InvalidActionTypeError(f"{exc}; expected {self.expected()}") from None
        except ValueError as exc:
            raise InvalidActionError(f"{exc}; expected {self.expected()}") from None
        if tuple(tensor.shape) != self.shape:
            raise InvalidActionError(f"{name} must be {self.expected()}, got shape "
                                     f"{tuple(tensor.shape)}")
        if tensor.dtype not in self._accepted:
            raise InvalidActionTypeError(f"{name} must be {self.expected()}, got dtype "
                                         f"{tensor.dtype}")
        try:
            check_device(tensor, self.device, name)
        except ValueError as exc:
            raise InvalidActionError(str(exc)) from None
        if tensor.dtype == torch.float64:
            # Casting would turn finite values beyond float32's range into inf, which the
            # env refuses; NaN and inf stay what they are (and are refused).
            tensor = torch.where(torch.isinf(tensor), tensor,
                                 tensor.clamp(-_FLOAT32_MAX, _FLOAT32_MAX))
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
