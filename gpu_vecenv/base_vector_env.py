"""What every vector env of the package shares: :class:`BaseVectorEnv`.

:class:`~gpu_vecenv.vector_env.GpuVectorEnv` (one env per slot) and
:class:`~gpu_vecenv.multi_agent.MultiAgentVectorEnv` (one agent of a game per slot) differ
in their buffers, backends, reset masks and state; the rest is written once here: the
constructor's checks, spaces, output allocation, the ``reset`` / ``step`` skeleton with
strict and deferred invalid-action errors, seeding, rendering, closing and ``repr``.
A subclass fills in the hooks (methods raising ``NotImplementedError`` below).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from gpu_vecenv import gymnasium_wrapper_check, seeding
from gpu_vecenv.action_sampling import ActionSampler
from gpu_vecenv.actions import ActionChecker, InvalidActionError
from gpu_vecenv.buffers import CAPTURING, OutputRing, StepOutputs
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL, DeferredErrors
from gpu_vecenv.devices import usable_device
from gpu_vecenv.human_window import HumanWindow
from gpu_vecenv.pickling import PicklableVectorEnv
from gpu_vecenv.rendering import check_render_mode
from gpu_vecenv.reset_arguments import reseed, seed_tensor


def parse_autoreset_mode(mode: AutoresetMode | str) -> AutoresetMode:
    """Accept the enum, its value (``"NextStep"``) or its name (``"next_step"``)."""
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        for member in AutoresetMode:
            if mode in (member.value, member.name, member.name.lower()):
                return member
    valid = ", ".join(m.name for m in AutoresetMode)
    raise ValueError(f"autoreset_mode must be an AutoresetMode ({valid}), got {mode!r}")


def check_count(value: Any, what: str) -> int:
    """``value`` as an int >= 1, else ``TypeError`` / ``ValueError`` naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{what} must be >= 1, got {value}")
    return int(value)


class BaseVectorEnv(PicklableVectorEnv, gym.vector.VectorEnv):
    """The shared half of the package's vector envs (see the module docstring).

    Outputs are torch tensors on ``device``: obs ``(num_envs, obs_dim)`` float32, reward
    ``(num_envs,)`` float32, terminated / truncated ``(num_envs,)`` bool.
    """

    ERROR_FLAG_INTERVAL = ERROR_FLAG_INTERVAL
    _repr_name: str | None = None
    """The class name ``repr`` shows (``None``: the instance's class)."""

    # -- construction, in three steps around the subclass's own --

    def _configure(self, definition: Any, params: Any, num_envs: int, *,
                   device: str | torch.device | None, autoreset_mode: AutoresetMode | str,
                   strict: bool | None, copy: bool, render_mode: str | None) -> None:
        """Settings: the definition and params, sizes, device, mode, strictness, copies,
        and the render mode (checked; the window opens in :meth:`_allocate_io`)."""
        self.definition = definition
        self.params = params
        self.num_envs = int(num_envs)
        self.device = usable_device(device)
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.strict = (self.device.type == "cpu") if strict is None else bool(strict)
        self.copy = bool(copy)
        self._render_modes = check_render_mode(render_mode, definition.name,
                                               definition.render_frame is not None)
        self.render_mode = render_mode

    def _allocate_io(self, with_active: bool = False) -> None:
        """The window, metadata, spaces, action checks and preallocated outputs."""
        definition = self.definition
        self._window = (HumanWindow(f"gpu_vecenv {definition.name}", definition.render_fps)
                        if self.render_mode == "human" else None)
        self.metadata = {
            "autoreset_mode": self.autoreset_mode,
            "render_modes": self._render_modes,
            "render_fps": definition.render_fps,
        }
        self.single_observation_space = definition.observation_space(self.params)
        self.single_action_space = definition.action_space(self.params)
        self._batched_spaces: dict[str, gym.Space] = {}
        self.obs_dim = int(np.prod(self.single_observation_space.shape))
        self.actions = ActionChecker(self.single_action_space, self.num_envs, self.device)
        self._with_final_obs = self.autoreset_mode == AutoresetMode.SAME_STEP
        self._with_active = with_active
        self._outputs = self._allocate_outputs()
        self._output_ring = OutputRing(self.num_envs, self.obs_dim, self.device,
                                       self._with_final_obs, self._with_active)

    def _start(self) -> None:
        """Last: not yet seeded or reset; invalid actions counted on ``buffers``."""
        self._seeded = False
        self._has_reset = False
        self._action_sampler: ActionSampler | None = None
        self._errors = DeferredErrors(self.buffers.error_count,
                                      asynchronous=self.device.type == "cuda" and not self.strict)

    def _allocate_outputs(self) -> StepOutputs:
        return StepOutputs.allocate(self.num_envs, self.obs_dim, self.device,
                                    self._with_final_obs, self._with_active)

    def _fresh_outputs(self) -> StepOutputs:
        """New output tensors (``copy=True``: memory no other step's outputs share, see
        :class:`~gpu_vecenv.buffers.OutputRing`) or the preallocated ones."""
        return self._output_ring.next() if self.copy else self._outputs

    # -- spaces (batched lazily: a Box of 4M rows costs host memory and time) --

    @property
    def observation_space(self) -> gym.Space:
        if "obs" not in self._batched_spaces:
            self._batched_spaces["obs"] = batch_space(self.single_observation_space, self.num_envs)
        return self._batched_spaces["obs"]

    @observation_space.setter
    def observation_space(self, space: gym.Space) -> None:
        self._batched_spaces["obs"] = space

    @property
    def action_space(self) -> gym.Space:
        if "action" not in self._batched_spaces:
            self._batched_spaces["action"] = batch_space(self.single_action_space, self.num_envs)
        return self._batched_spaces["action"]

    @action_space.setter
    def action_space(self, space: gym.Space) -> None:
        self._batched_spaces["action"] = space

    # -- hooks of the subclass --

    def _parse_reset_mask(self, options: dict[str, Any] | None) -> torch.Tensor | None:
        """The mask of seeding units to reset from ``options`` (``None``: all)."""
        raise NotImplementedError

    def _reset_selected(self, mask: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset the units in ``mask`` (all if ``None``); return ``(obs, info)``."""
        raise NotImplementedError

    def _step_info(self, out: StepOutputs) -> dict[str, Any]:
        """``info`` of a step before the SAME_STEP keys."""
        return {}

    def _seed_units(self) -> tuple[int, str]:
        """How many seeds a ``reset(seed=[...])`` list holds, and what they seed."""
        return self.num_envs, "num_envs"

    def _invalid_action_message(self, count: int) -> str:
        raise NotImplementedError

    def _frames(self) -> tuple[np.ndarray, ...]:
        """The ``(H, W, 3)`` uint8 frames ``render()`` returns."""
        raise NotImplementedError

    def _repr_sizes(self) -> str:
        return f"num_envs={self.num_envs}"

    # -- reset / step --

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset everything, or what ``options["reset_mask"]`` selects.

        Args:
            seed: ``None`` (continue each stream; a fresh random seed the first time), an
                int (everything; envs or games still differ since their index is part of
                the RNG counter), or a list with one int per env (per game for a
                multi-agent env).
            options: ``{"reset_mask": mask}``, a bool numpy array or tensor selecting the
                envs (or games) to reset; the others keep their state and RNG stream.

        Returns:
            ``(obs, info)``: obs ``(num_envs, obs_dim)``.
        """
        self._raise_if_closed()
        mask = self._parse_reset_mask(options)
        # A partial reset (autoreset emulation, once per step in a loop) checks like
        # step(), without a sync; a full reset reads the device's count at once.
        self._check_deferred_errors(sync=mask is None)
        self._apply_seed(seed, mask)
        obs, info = self._reset_selected(mask)
        self._has_reset = True
        if self._window is not None:
            self.render()
        return obs, info

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step with ``actions`` ``(num_envs, ...)`` (see
        :class:`~gpu_vecenv.actions.ActionChecker` for accepted forms). Returns ``(obs,
        reward, terminated, truncated, info)``; in SAME_STEP mode ``info`` holds
        ``final_obs``, ``_final_obs``, ``final_info`` and ``_final_info``."""
        # A small env's whole step() is ~10 us of host time: the common path below makes
        # as few calls as it can (scripts/bench_step_host.py measures each part of it).
        if self.closed:
            self._raise_if_closed()
        if not self._has_reset:
            raise gym.error.ResetNeeded("call reset() before step()")
        errors = self._errors
        if errors.may_report:
            self._check_deferred_errors(sync=False)
        action = self.actions.convert(actions)
        if self.strict:
            valid = self.actions.valid_mask(action)
            if not bool(valid.all()):
                raise InvalidActionError(
                    self.actions.describe_invalid(action, valid) + "; nothing was stepped"
                )
        out = self._output_ring.next() if self.copy else self._outputs
        self.backend.step(action, out)
        if errors.after_step():
            self._check_deferred_errors(sync=True)
        if self._window is not None:
            self.render()
        info = self._step_info(out)
        if self._with_final_obs:
            done = out.terminated | out.truncated
            info.update(final_obs=out.final_obs, _final_obs=done, final_info={},
                        _final_info=done)
        return out.obs, out.reward, out.terminated, out.truncated, info

    # -- invalid actions reported without a per-step sync (see deferred_errors.py) --

    def _check_deferred_errors(self, sync: bool) -> None:
        """Raise if the device recorded invalid actions. With ``sync=False`` this only
        looks at the last flag copy that has already arrived on the host."""
        count = self._errors.take(sync)
        if count == 0:
            return
        raise InvalidActionError(self._invalid_action_message(count))

    def check_errors(self) -> None:
        """Raise :class:`InvalidActionError` now if any invalid action was seen (syncs)."""
        self._check_deferred_errors(sync=True)

    # -- seeding --

    def _apply_seed(self, seed: Any, mask: torch.Tensor | None) -> None:
        if seed is None:
            if self._seeded:
                return
            seed = seeding.new_seed()
        count, unit = self._seed_units()
        new, value = seed_tensor(seed, count, self.device, unit=unit)
        self._np_random_seed = value
        if value is not None:
            self._np_random, _ = gym.utils.seeding.np_random(value % 2**32)
        b = self.buffers
        reseed(b.seed, b.rng_counter, new, mask if self._seeded else None)
        if self._action_sampler is not None:
            self._action_sampler.restart(mask if self._seeded else None)
        self._seeded = True

    # -- random actions on the device --

    def sample_actions(self) -> torch.Tensor:
        """Random actions for every env, drawn on the env's device: a new tensor in the
        form ``step()`` takes (``(num_envs,)`` int64 for ``Discrete``, ``(num_envs, *shape)``
        int64 / float32 for ``MultiDiscrete`` / ``Box``), uniform over the action space.

        The device-side counterpart of ``action_space.sample()`` (numpy, on the host): one
        small kernel, no host synchronization, and it can be captured in a CUDA graph
        (each replay draws new actions), e.g. as a random policy of
        :func:`~gpu_vecenv.capture_rollout`. The actions come from the env's own seeds in
        a stream of their own (:mod:`gpu_vecenv.action_sampling`): after
        ``reset(seed=s)`` the same calls give the same actions, on either backend. They
        are not part of :meth:`get_state` or a pickle (the stream restarts there).

        The first call allocates the sampler (one int32 count per env) and loads its
        kernel, so it must come before any CUDA-graph capture that uses it.

        Raises:
            gymnasium.error.ResetNeeded: before the first ``reset()`` (the seeds).
            RuntimeError: first called while a CUDA graph is being captured.
            TypeError / ValueError: an action space with no uniform distribution (an
                unbounded ``Box``).
        """
        if self.closed:
            self._raise_if_closed()
        sampler = self._action_sampler
        if sampler is None:
            if not self._has_reset:
                raise gym.error.ResetNeeded("call reset() before sample_actions(): the "
                                            "actions are drawn from the env's seeds")
            if self.device.type == "cuda" and CAPTURING is not None and CAPTURING():
                raise RuntimeError("call sample_actions() once before capturing a CUDA "
                                   "graph with it: its first call allocates device memory")
            units, _ = self._seed_units()
            sampler = self._action_sampler = ActionSampler(
                self.single_action_space, self.num_envs, self.num_envs // units, self.device,
                use_kernel=self.backend_name == "cuda")
        return sampler.sample(self.buffers.seed)

    # -- rendering / closing --

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Frames (``(H, W, 3)`` uint8); with ``render_mode="human"`` they are shown in
        the window and ``None`` is returned."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        frames = self._frames()
        if self._window is not None:
            self._window.show(frames)
            return None
        return frames

    def close_extras(self, **kwargs: Any) -> None:
        self.backend = self._action_sampler = None
        self._outputs = self._output_ring = None
        if self._window is not None:
            self._window.close()

    def _raise_if_closed(self) -> None:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("this env is closed")

    def __repr__(self) -> str:
        return (f"{self._repr_name or type(self).__name__}({self.definition.name}, "
                f"{self._repr_sizes()}, device={self.device}, backend={self.backend_name}, "
                f"autoreset_mode={self.autoreset_mode.name})")


# Gymnasium's numpy vector wrappers (RecordEpisodeStatistics, ...) fail deep inside numpy
# on our tensors, or hand back numpy arrays: they now say so, and name ours, when built.
gymnasium_wrapper_check.install(BaseVectorEnv)
