"""The contract every single-agent environment module fulfils: :class:`EnvDefinition`.

An env module (``envs/cartpole.py``) holds a frozen params dataclass and pure, batched
torch functions; it exports ``DEFINITION = EnvDefinition(...)`` tying them together. The
runtime (:mod:`gpu_vecenv.vector_env`) owns everything generic: buffers, time limits,
autoreset, seeding, action checks and backend dispatch.

Shapes, with ``n`` the number of envs in the batch:

- ``state``: ``dict[str, Tensor]``, one ``(n,)`` tensor per field of ``state_fields``
  (structure of arrays, so a kernel thread per env reads neighbouring addresses);
- ``reset(params, u) -> state`` with ``u`` the ``(n, num_reset_draws(params))`` float32
  uniforms in ``[0, 1)`` of :mod:`gpu_vecenv.seeding`; row ``i`` of the state depends on
  row ``i`` of ``u`` only (the torch backend passes just the rows of the envs that reset);
- ``step(params, state, action) -> (state, reward (n,) float32, terminated (n,) bool)``,
  where ``action`` is ``(n,)`` int64 for Discrete or ``(n, act_dim)`` float32 for Box and
  already known valid (in range, finite);
- ``observe(params, state) -> (n, obs_dim) float32``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import torch

State = dict[str, torch.Tensor]


@dataclass(frozen=True)
class StateField:
    """One per-env state variable: its name and dtype (each is a ``(num_envs,)`` tensor).

    ``set_state`` refuses values a step could not have produced: NaN or inf in a float
    field, and in an int field values outside its dtype or outside ``[low, high]``.
    """

    name: str
    dtype: torch.dtype = torch.float32
    low: int | None = None
    """The smallest value ``set_state`` accepts in an int field (``None``: the dtype's)."""
    high: int | None = None
    """The largest value ``set_state`` accepts in an int field (``None``: the dtype's)."""


@dataclass(frozen=True)
class EnvDefinition:
    """Everything the runtime needs to know about one single-agent environment."""

    name: str
    """Short name (the shipped envs' kernel files are ``cuda_src/<name>.cu``)."""
    params_type: type
    """Frozen dataclass of physical constants (derived values are properties)."""
    state_fields: tuple[StateField, ...]
    observation_space: Callable[[Any], gym.spaces.Box]
    action_space: Callable[[Any], gym.Space]
    num_reset_draws: Callable[[Any], int]
    reset: Callable[[Any, torch.Tensor], State]
    step: Callable[[Any, State, torch.Tensor], tuple[State, torch.Tensor, torch.Tensor]]
    observe: Callable[[Any, State], torch.Tensor]
    max_episode_steps: int | None
    """Gymnasium's time limit for the registered id (``None``: no limit); the registry
    reads a shipped env's from here (:func:`gpu_vecenv.env_ids.declared_time_limit`)."""
    render_frame: Callable[[Any, dict[str, float]], Any] | None = None
    """Optional ``(params, one env's state as floats) -> (H, W, 3) uint8 array``."""
    kernel_binding: Any | None = None
    """The env's :class:`gpu_vecenv.kernel_binding.KernelBinding`: its kernel file and how
    its params become the kernels' constants (``None``: no kernels, torch backend only)."""
    render_fps: int = 50
    """Frames per second of a rendered episode (Gymnasium's value for the env)."""

    def make_params(self, **overrides: Any) -> Any:
        """Build the params dataclass, rejecting unknown names with a clear error."""
        return make_params(self.name, self.params_type, overrides)


def make_params(env_name: str, params_type: type, overrides: dict[str, Any],
                preset: str | None = None, presets: tuple[str, ...] = ()) -> Any:
    """An env's params: ``preset`` (the name of a classmethod of ``params_type`` among
    ``presets``; ``None``: the defaults) with ``overrides``. Unknown names are a
    ``TypeError`` listing the accepted ones (:func:`check_parameter_names`)."""
    check_parameter_names(env_name, params_type, overrides)
    if preset is None:
        return params_type(**overrides)
    if preset not in presets:
        raise ValueError(f"unknown preset {preset!r} for {env_name}; "
                         f"available: {list(presets)}")
    return getattr(params_type, preset)(**overrides)


def check_parameter_names(env_name: str, params_type: type, given: dict[str, Any]) -> None:
    """``TypeError`` naming the keys of ``given`` that are not fields of ``params_type``,
    each with its closest field, and the fields it accepts."""
    names = [f.name for f in dataclasses.fields(params_type)]
    unknown = sorted(set(given) - set(names))
    if not unknown:
        return
    described = []
    for name in unknown:
        close = difflib.get_close_matches(name, names, n=1)
        described.append(name + (f" (did you mean {close[0]}?)" if close else ""))
    raise TypeError(
        f"unknown parameter(s) for {env_name}: {', '.join(described)}; "
        f"{params_type.__name__} accepts: {', '.join(sorted(names))}"
    )
