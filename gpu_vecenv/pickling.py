"""Pickling (and ``copy.deepcopy``) of our vector envs: constructor arguments + state.

A pickled env is not its memory: buffers live on a device, backends hold compiled
kernels and CUDA graphs, a window may be open. What a user expects of ``pickle`` (as
with Gymnasium's envs, whose whole ``__dict__`` is pickled) is an env that *continues* as
the original would. So the pickle holds:

- the constructor's arguments as resolved (the definition, by reference to its module's
  functions; the sizes; the device, e.g. ``"cuda:0"``; the backend that was picked, so an
  ``"auto"`` env on the kernels keeps the kernels; the params);
- the full state of :meth:`get_state` (env fields, step counts, RNG seeds and counters,
  pending autoresets), copied to the CPU, and the not yet reported invalid-action count;
- whether the env was seeded / reset, its ``np_random``, its spaces (their own RNGs) and
  the attributes ``make_vec`` adds (``env_id``, ``spec``).

Unpickling builds a fresh env with those arguments, on the same device, and writes the
state back: it then steps bit for bit as the original would from the moment it was
pickled (same device, same backend). Output buffers, compiled kernels, graphs and any
window are rebuilt as a new env builds them. A closed env does not pickle.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym

_KEPT_ATTRIBUTES = (
    "env_id",
    "spec",
    "_np_random",
    "_np_random_seed",
    "single_observation_space",
    "single_action_space",
    "_batched_spaces",
)
"""Instance attributes carried over as they are (everything else is rebuilt)."""


def params_fields(params: Any) -> dict[str, Any]:
    """The constructor arguments of a params dataclass instance."""
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params) if f.init}


class PicklableVectorEnv:
    """Mixin for :class:`~gpu_vecenv.vector_env.GpuVectorEnv` and
    :class:`~gpu_vecenv.multi_agent.MultiAgentVectorEnv`.

    The class provides ``_constructor_arguments() -> (args, kwargs)`` and
    ``_construct(*args, **kwargs)`` (its base ``__init__``, which a subclass with another
    signature still inherits), ``get_state`` /
    ``set_state``, ``buffers.error_count`` / ``buffers.invalid_action``, ``_seeded``
    and ``_has_reset``.
    """

    def __getstate__(self) -> dict[str, Any]:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("a closed env cannot be pickled")
        args, kwargs = self._constructor_arguments()
        buffers = self.buffers
        return {
            "args": args,
            "kwargs": kwargs,
            "state": {name: t.cpu() for name, t in self.get_state().items()},
            "error_count": buffers.error_count.cpu(),
            "invalid_action": buffers.invalid_action.cpu(),
            "seeded": self._seeded,
            "has_reset": self._has_reset,
            "attributes": {k: self.__dict__[k] for k in _KEPT_ATTRIBUTES if k in self.__dict__},
        }

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        self._construct(*pickled["args"], **pickled["kwargs"])
        self.set_state(pickled["state"])
        self.buffers.error_count.copy_(pickled["error_count"])
        self.buffers.invalid_action.copy_(pickled["invalid_action"])
        self._seeded = pickled["seeded"]
        self._has_reset = pickled["has_reset"]
        self.__dict__.update(pickled["attributes"])
