"""Observation wrappers that apply a batched torch function: ``TransformObservation`` and
the common ones built on it, ``FlattenObservation``, ``ReshapeObservation``,
``RescaleObservation`` and ``DtypeObservation``.

Gymnasium's vector versions (``gymnasium.wrappers.vector``) run each env's observation
through numpy: on our torch tensors they fail or hand back numpy arrays
(docs/wrappers.md). These take the same arguments, give the same observation spaces and
the same values, as torch tensors on the env's device, with no host read in ``step()``.
Unlike Gymnasium's they also work in SAME_STEP autoreset mode: ``info["final_obs"]`` is
transformed too, so a value bootstrapped from it sees what the policy sees. Tag's idle
slots (``info["active"]`` False) stay zero, as the env emits them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.utils import rescale_box

from gpu_vecenv.wrappers.base import TensorVectorWrapper


class TransformObservation(TensorVectorWrapper):
    """Observations ``func(obs)``: Gymnasium's vector ``TransformObservation`` with SAME_STEP
    support (``info["final_obs"]`` goes through ``func`` as well).

    Args:
        env: one of our vector envs (or a wrapper of one).
        func: ``(num_envs, *obs_shape)`` tensor -> ``(num_envs, *new_shape)`` tensor, batched
            and in torch, so it runs on the device.
        observation_space: the batched space of the result; default: from
            ``single_observation_space``, else the env's.
        single_observation_space: the space of one env's result; default: the env's.
    """

    def __init__(
        self,
        env: VectorEnv,
        func: Callable[[torch.Tensor], torch.Tensor],
        observation_space: gym.Space | None = None,
        single_observation_space: gym.Space | None = None,
    ):
        super().__init__(env)
        if single_observation_space is not None:
            self.single_observation_space = single_observation_space
        if observation_space is not None:
            self.observation_space = observation_space
        elif single_observation_space is not None:
            self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.func = func

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the env and transform the observations."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._observe(obs, self._active_after(info)), info

    def step(self, actions: Any) -> tuple[torch.Tensor, Any, Any, Any, dict[str, Any]]:
        """Step the env and transform ``obs`` (and ``info["final_obs"]`` in SAME_STEP)."""
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        obs = self._observe(obs, self._active_after(info))
        if self.autoreset_mode == AutoresetMode.SAME_STEP and "final_obs" in info:
            info = {**info, "final_obs": self.func(info["final_obs"])}
        return obs, rewards, terminations, truncations, info

    def _observe(self, obs: torch.Tensor, live: torch.Tensor | None) -> torch.Tensor:
        """``func(obs)``, zero in the rows where ``live`` (``(num_envs,)`` bool) is False."""
        out = self.func(obs)
        if live is None:
            return out
        return torch.where(live.view(-1, *([1] * (out.dim() - 1))), out, 0)


def _box(env: VectorEnv, wrapper: str) -> gym.spaces.Box:
    space = env.single_observation_space
    if not isinstance(space, gym.spaces.Box):
        raise TypeError(f"{wrapper} requires a Box observation space, got {space}")
    return space


class FlattenObservation(TransformObservation):
    """Each env's observation flattened to one dimension: ``(num_envs, *obs_shape)`` ->
    ``(num_envs, prod(obs_shape))``; the space is ``gymnasium.spaces.flatten_space``'s."""

    def __init__(self, env: VectorEnv):
        space = gym.spaces.flatten_space(_box(env, "FlattenObservation"))
        n = env.num_envs
        super().__init__(env, lambda obs: obs.reshape(n, -1), single_observation_space=space)


class ReshapeObservation(TransformObservation):
    """Each env's observation reshaped to ``shape`` (its element count unchanged):
    ``(num_envs, *obs_shape)`` -> ``(num_envs, *shape)``.

    Args:
        env: an env with Box observations.
        shape: the shape of one env's observation, a tuple of ints (``-1`` allowed once).
    """

    def __init__(self, env: VectorEnv, shape: int | tuple[int, ...]):
        space = _box(env, "ReshapeObservation")
        if isinstance(shape, (int, np.integer)):
            shape = (int(shape),)
        if not isinstance(shape, tuple) or not all(
            isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in shape
        ):
            raise TypeError(f"ReshapeObservation requires shape to be a tuple of ints, "
                            f"got {shape!r}")
        if not all(x > 0 or x == -1 for x in shape):
            raise ValueError(f"ReshapeObservation requires shape elements to be greater than "
                             f"0 or -1, got {shape}")
        try:
            low = np.reshape(np.ravel(space.low), shape)
        except ValueError:
            raise ValueError(f"ReshapeObservation: shape {shape} does not hold the "
                             f"{int(np.prod(space.shape))} elements of {space}") from None
        high = np.reshape(np.ravel(space.high), low.shape)
        self.shape = low.shape
        new_space = gym.spaces.Box(low, high, low.shape, space.dtype)
        n = env.num_envs
        super().__init__(env, lambda obs: obs.reshape(n, *self.shape),
                         single_observation_space=new_space)


class RescaleObservation(TransformObservation):
    """Each coordinate mapped linearly from the env's Box bounds to ``[min_obs, max_obs]``,
    as Gymnasium's ``RescaleObservation`` (same checks, space and float arithmetic:
    ``gradient * obs + intercept`` in the space's dtype).

    Args:
        env: an env with Box observations.
        min_obs, max_obs: the new bounds, a number or an array of the observation's shape.
            Where the env's bound is infinite the new one must be the same infinity.
    """

    def __init__(self, env: VectorEnv, min_obs: Any, max_obs: Any):
        box = _box(env, "RescaleObservation")
        new_box, _, _ = rescale_box(box, min_obs, max_obs)  # Gymnasium's checks and space
        new_min, new_max = (
            bound if isinstance(bound, np.ndarray) else np.full(box.shape, bound)
            for bound in (min_obs, max_obs)
        )
        gradient, intercept = rescale_coefficients(box, new_min, new_max)
        self.min_obs, self.max_obs = min_obs, max_obs
        super().__init__(env, lambda obs: self.gradient * obs + self.intercept,
                         single_observation_space=new_box)
        self.gradient = torch.as_tensor(gradient, device=self.device)
        self.intercept = torch.as_tensor(intercept, device=self.device)


def rescale_coefficients(box: gym.spaces.Box, new_min: np.ndarray, new_max: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """``(gradient, intercept)`` in ``box.dtype`` with ``gradient * obs + intercept`` mapping
    ``[box.low, box.high]`` to ``[new_min, new_max]``: the arithmetic of Gymnasium's
    ``gymnasium.wrappers.utils.rescale_box`` (which keeps them inside a closure), so the
    results match Gymnasium's to the bit."""
    wide = getattr(np, "float128", np.float64)  # as Gymnasium: float128 where it exists
    min_finite, max_finite = np.isfinite(new_min), np.isfinite(new_max)
    both = min_finite & max_finite
    span = np.array(box.high[both], dtype=wide) - np.array(box.low[both], dtype=wide)
    gradient = np.ones_like(new_min, dtype=box.dtype)
    gradient[both] = (new_max[both] - new_min[both]) / span
    intercept = np.zeros_like(new_min, dtype=box.dtype)
    intercept[max_finite] = new_max[max_finite] - box.high[max_finite]
    intercept[min_finite] = gradient[min_finite] * -box.low[min_finite] + new_min[min_finite]
    return gradient, intercept


class DtypeObservation(TransformObservation):
    """Observations cast to ``dtype``: a torch dtype (``torch.float64``) or anything numpy
    takes (``np.float64``, ``"float64"``); the space is a Box of that dtype, as
    Gymnasium's."""

    def __init__(self, env: VectorEnv, dtype: Any):
        space = _box(env, "DtypeObservation")
        self.dtype, numpy_dtype = torch_and_numpy_dtype(dtype)
        new_space = gym.spaces.Box(space.low, space.high, space.shape, numpy_dtype)
        super().__init__(env, lambda obs: obs.to(self.dtype), single_observation_space=new_space)


def torch_and_numpy_dtype(dtype: Any) -> tuple[torch.dtype, np.dtype]:
    """``dtype`` (torch's or numpy's) as the pair ``(torch.dtype, numpy.dtype)``."""
    try:
        if isinstance(dtype, torch.dtype):
            return dtype, torch.empty(0, dtype=dtype).numpy().dtype
        numpy_dtype = np.dtype(dtype)
        return torch.from_numpy(np.empty(0, numpy_dtype)).dtype, numpy_dtype
    except (TypeError, RuntimeError):
        raise TypeError(f"DtypeObservation: {dtype!r} is not a dtype that both torch and "
                        "numpy have") from None
