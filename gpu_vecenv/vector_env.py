"""``GpuVectorEnv``: a Gymnasium ``VectorEnv`` whose data lives in torch tensors.

One class serves every single-agent env: it owns the generic machinery (buffers, time
limits, the three autoreset modes, seeding, action checks, state access, backend
dispatch); the env itself is an :class:`~gpu_vecenv.definition.EnvDefinition`.

Outputs are torch tensors on ``device``: obs ``(num_envs, obs_dim)`` float32, reward
``(num_envs,)`` float32, terminated / truncated ``(num_envs,)`` bool. On the CUDA kernels
``step()`` never synchronizes with the GPU unless ``strict=True``; the torch backend on a
GPU waits for it once per step in which some env resets (it draws initial states only for
those envs; not while a CUDA graph is captured).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from gpu_vecenv import seeding
from gpu_vecenv.actions import ActionChecker, InvalidActionError
from gpu_vecenv.backends import build_backend
from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.buffers import EnvBuffers, StepOutputs
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL, DeferredErrors
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.devices import resolve_device
from gpu_vecenv.human_window import HumanWindow
from gpu_vecenv.pickling import PicklableVectorEnv, params_fields
from gpu_vecenv.rendering import check_render_mode
from gpu_vecenv.reset_and_state import reseed, reset_mask_option, seed_tensor, write_state

_DEFAULT = object()


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


class GpuVectorEnv(PicklableVectorEnv, gym.vector.VectorEnv):
    """A batch of ``num_envs`` copies of one env, stepped together on one device.

    Args:
        definition: the env (see :mod:`gpu_vecenv.definition`).
        num_envs: number of copies (>= 1).
        device: torch device; default the current CUDA device if any, else the CPU.
        backend: ``"auto"`` (CUDA kernels when possible, else torch), ``"cuda"`` or
            ``"torch"``.
        autoreset_mode: ``AutoresetMode.NEXT_STEP`` (default), ``SAME_STEP`` or
            ``DISABLED`` (or their names).
        max_episode_steps: time limit per episode, counted per env on the device;
            ``None`` disables it. Default: the env's Gymnasium limit.
        strict: check every action batch on the host before stepping (one GPU sync per
            step); the step then either happens for all envs or raises and changes
            nothing. With ``strict=False`` envs given an invalid action are left
            unchanged and the error is raised by a later call, as soon as the device's
            flag reaches the host (no sync). Default: True on the CPU, False on a GPU.
        copy: return fresh output tensors every step (default). ``False`` returns the
            same preallocated tensors every step, overwritten in place: faster, and
            stable addresses for CUDA graphs, but keep ``clone()``s of what you store.
        render_mode: ``None``, ``"rgb_array"`` (``render()`` returns frames) or
            ``"human"`` (a window shows the frames after every ``reset()`` / ``step()``,
            at ``render_fps``; see :mod:`gpu_vecenv.human_window`).
        render_env_indices: which envs ``render()`` draws (default: env 0).
        torch_compile: the torch backend runs its step through ``torch.compile`` on a
            CUDA GPU (a few fused kernels, same bits; the first step compiles, seconds);
            elsewhere it draws initial states with a compiled Philox (same bits). Fastest
            with ``torch_graphs=True`` too. Ignored by the CUDA kernels.
        torch_graphs: the torch backend on a CUDA device replays each step as one CUDA
            graph after three eager steps (same bits, no per-op launch cost; the graph
            holds the step's intermediate tensors). Ignored by the CUDA kernels and on
            other devices.
        **params: fields of the env's params dataclass.

    ``pickle`` and ``copy.deepcopy`` give an env on the same device that continues bit for
    bit from the copied state (see :mod:`gpu_vecenv.pickling`).
    """

    def __init__(
        self,
        definition: EnvDefinition,
        num_envs: int = 1,
        *,
        device: str | torch.device | None = None,
        backend: str = "auto",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = _DEFAULT,  # type: ignore[assignment]
        strict: bool | None = None,
        copy: bool = True,
        render_mode: str | None = None,
        render_env_indices: tuple[int, ...] = (0,),
        torch_compile: bool = False,
        torch_graphs: bool = False,
        **params: Any,
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)):
            raise TypeError(f"num_envs must be an int, got {type(num_envs).__name__}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.definition = definition
        self.params = definition.make_params(**params)
        self.num_envs = int(num_envs)
        self.device = resolve_device(device)
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        if max_episode_steps is _DEFAULT:
            max_episode_steps = definition.max_episode_steps
        if max_episode_steps is not None and (
            isinstance(max_episode_steps, bool)
            or not isinstance(max_episode_steps, (int, np.integer))
            or max_episode_steps < 1
        ):
            raise ValueError(f"max_episode_steps must be a positive int or None, "
                             f"got {max_episode_steps!r}")
        self.max_episode_steps = None if max_episode_steps is None else int(max_episode_steps)
        self.strict = (self.device.type == "cpu") if strict is None else bool(strict)
        self.copy = bool(copy)
        self.torch_compile = bool(torch_compile)
        self.torch_graphs = bool(torch_graphs)
        render_modes = check_render_mode(render_mode, definition.name,
                                         definition.render_frame is not None)
        self.render_mode = render_mode
        self.render_env_indices = tuple(int(i) for i in render_env_indices)
        for i in self.render_env_indices:
            if not 0 <= i < self.num_envs:
                raise ValueError(f"render_env_indices holds {i}, outside [0, {self.num_envs})")
        self._window = (HumanWindow(f"gpu_vecenv {definition.name}", definition.render_fps)
                        if render_mode == "human" else None)

        self.metadata = {
            "autoreset_mode": self.autoreset_mode,
            "render_modes": render_modes,
            "render_fps": definition.render_fps,
        }
        self.single_observation_space = definition.observation_space(self.params)
        self.single_action_space = definition.action_space(self.params)
        self._batched_spaces: dict[str, gym.Space] = {}
        self.obs_dim = int(np.prod(self.single_observation_space.shape))

        self.actions = ActionChecker(self.single_action_space, self.num_envs, self.device)
        self.buffers = EnvBuffers.allocate(definition, self.num_envs, self.device)
        self._with_final_obs = self.autoreset_mode == AutoresetMode.SAME_STEP
        self._outputs = StepOutputs.allocate(
            self.num_envs, self.obs_dim, self.device, self._with_final_obs
        )
        self._ctx = BackendContext(
            definition=definition, params=self.params, num_envs=self.num_envs,
            device=self.device, autoreset_mode=self.autoreset_mode,
            max_episode_steps=self.max_episode_steps, actions=self.actions,
            buffers=self.buffers, obs_dim=self.obs_dim,
        )
        self.backend_name, self.backend = build_backend(
            backend, self.device, lambda: self._make_backend("cuda"),
            lambda: self._make_backend("torch"))
        self._seeded = False
        self._has_reset = False
        self._errors = DeferredErrors(self.buffers.error_count,
                                      asynchronous=self.device.type == "cuda" and not self.strict)

    def _make_backend(self, name: str):
        if name == "cuda":
            from gpu_vecenv.backends.cuda import CudaBackend

            return CudaBackend(self._ctx)
        from gpu_vecenv.backends.torch_backend import TorchBackend

        return TorchBackend(self._ctx, compile=self.torch_compile, graphs=self.torch_graphs)

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

    # -- reset / step --

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all envs, or those in ``options["reset_mask"]``.

        Args:
            seed: ``None`` (continue each env's stream; a fresh random seed the first
                time), an int (every env gets this seed; envs still draw different
                states since the env index is part of the RNG counter), or a list of
                ``num_envs`` ints (one seed per env).
            options: ``{"reset_mask": mask}`` with ``mask`` a ``(num_envs,)`` bool numpy
                array or torch tensor: reset only those envs (the others keep their
                state; their current observation is returned).

        Returns:
            ``(obs, info)``: obs ``(num_envs, obs_dim)`` float32 tensor, info ``{}``.
        """
        self._raise_if_closed()
        mask = self._parse_reset_options(options)
        # A partial reset (autoreset emulation, once per step in a loop) checks like
        # step(), without a sync; a full reset reads the device's count at once.
        self._check_deferred_errors(sync=mask is None)
        self._apply_seed(seed, mask)
        out = self._fresh_outputs()
        self.backend.reset(mask, out.obs)
        self._has_reset = True
        if self._window is not None:
            self.render()
        return out.obs, {}

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env with ``actions`` (see :class:`~gpu_vecenv.actions.ActionChecker`
        for accepted forms). Returns ``(obs, reward, terminated, truncated, info)``;
        in SAME_STEP mode ``info`` holds ``final_obs``, ``_final_obs``, ``final_info``
        and ``_final_info``."""
        self._raise_if_closed()
        if not self._has_reset:
            raise gym.error.ResetNeeded("call reset() before step()")
        self._check_deferred_errors(sync=False)
        action = self.actions.convert(actions)
        if self.strict:
            valid = self.actions.valid_mask(action)
            if not bool(valid.all()):
                raise InvalidActionError(
                    self.actions.describe_invalid(action, valid) + "; nothing was stepped"
                )
        out = self._fresh_outputs()
        self.backend.step(action, out)
        self._after_step()
        if self._window is not None:
            self.render()
        info: dict[str, Any] = {}
        if self._with_final_obs:
            done = out.terminated | out.truncated
            info = {"final_obs": out.final_obs, "_final_obs": done,
                    "final_info": {}, "_final_info": done}
        return out.obs, out.reward, out.terminated, out.truncated, info

    def _fresh_outputs(self) -> StepOutputs:
        if not self.copy:
            return self._outputs
        return StepOutputs.allocate(self.num_envs, self.obs_dim, self.device,
                                    self._with_final_obs)

    # -- invalid actions reported without a per-step sync (see deferred_errors.py) --

    ERROR_FLAG_INTERVAL = ERROR_FLAG_INTERVAL

    def _after_step(self) -> None:
        if self._errors.after_step():
            self._check_deferred_errors(sync=True)

    def _check_deferred_errors(self, sync: bool) -> None:
        """Raise if the device recorded invalid actions. With ``sync=False`` this only
        looks at the last flag copy that has already arrived on the host."""
        count = self._errors.take(sync)
        if count == 0:
            return
        envs = torch.nonzero(self.buffers.invalid_action).flatten()[:5].tolist()
        where = f" (on the last step: envs {envs})" if envs else ""
        raise InvalidActionError(
            f"{count} invalid action(s) (out of range, NaN or inf for "
            f"{self.single_action_space}) since the last check; the envs that got them "
            f"were left unchanged on those steps{where}. Use strict=True to catch them "
            f"before stepping."
        )

    def check_errors(self) -> None:
        """Raise :class:`InvalidActionError` now if any invalid action was seen (syncs)."""
        self._check_deferred_errors(sync=True)

    # -- seeding --

    def _apply_seed(self, seed: Any, mask: torch.Tensor | None) -> None:
        if seed is None:
            if self._seeded:
                return
            seed = seeding.new_seed()
        new, value = seed_tensor(seed, self.num_envs, self.device)
        self._np_random_seed = value
        if value is not None:
            self._np_random, _ = gym.utils.seeding.np_random(value % 2**32)
        b = self.buffers
        reseed(b.seed, b.rng_counter, new, mask if self._seeded else None)
        self._seeded = True

    # -- options --

    def _parse_reset_options(self, options: dict[str, Any] | None) -> torch.Tensor | None:
        mask = reset_mask_option(options)
        if mask is None:
            return None
        if tuple(mask.shape) != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must have shape ({self.num_envs},), "
                             f"got {tuple(mask.shape)}")
        if mask.device.type == "cpu" and not bool(mask.any()):  # no sync for device masks
            raise ValueError("options['reset_mask'] must contain at least one True value")
        return mask.to(self.device)

    # -- state access --

    def get_state(self) -> dict[str, torch.Tensor]:
        """A copy of the full state: the env's state fields (``(num_envs,)`` each, see
        ``definition.state_fields``) plus ``elapsed_steps`` (int32), ``rng_counter``
        (int64), ``rng_seed`` (int64) and ``autoreset_pending`` (bool)."""
        b = self.buffers
        state = {name: t.clone() for name, t in b.state.items()}
        state.update(elapsed_steps=b.elapsed.clone(), rng_counter=b.rng_counter.clone(),
                     rng_seed=b.seed.clone(), autoreset_pending=b.autoreset_pending.clone())
        return state

    def set_state(self, state: dict[str, Any]) -> torch.Tensor:
        """Overwrite any subset of the keys of :meth:`get_state` (each ``(num_envs,)``).

        Validates every key, shape and dtype before writing anything. Returns the
        observations of the new state, ``(num_envs, obs_dim)``.
        """
        self._raise_if_closed()
        b = self.buffers
        targets = dict(b.state)
        targets.update(elapsed_steps=b.elapsed, rng_counter=b.rng_counter, rng_seed=b.seed,
                       autoreset_pending=b.autoreset_pending)
        if write_state(targets, state, self.device):
            self._has_reset = True
            self._seeded = True
        obs = self._fresh_outputs().obs
        self.backend.observe(obs)
        return obs

    # -- rendering / closing --

    def render(self) -> tuple[np.ndarray, ...] | None:
        """Frames (``(H, W, 3)`` uint8) of the envs in ``render_env_indices``; with
        ``render_mode="human"`` they are shown in the window and ``None`` is returned."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        frames = []
        for i in self.render_env_indices:
            values = {name: float(t[i]) for name, t in self.buffers.state.items()}
            frames.append(self.definition.render_frame(self.params, values))
        if self._window is not None:
            self._window.show(frames)
            return None
        return tuple(frames)

    def close_extras(self, **kwargs: Any) -> None:
        self.backend = None
        self._outputs = None
        if self._window is not None:
            self._window.close()

    # -- pickling (see gpu_vecenv/pickling.py) --

    def _constructor_arguments(self) -> tuple[tuple, dict[str, Any]]:
        return (self.definition, self.num_envs), dict(
            device=str(self.device), backend=self.backend_name,
            autoreset_mode=self.autoreset_mode, max_episode_steps=self.max_episode_steps,
            strict=self.strict, copy=self.copy, render_mode=self.render_mode,
            render_env_indices=self.render_env_indices, torch_compile=self.torch_compile,
            torch_graphs=self.torch_graphs, **params_fields(self.params))

    def _construct(self, *args: Any, **kwargs: Any) -> None:
        GpuVectorEnv.__init__(self, *args, **kwargs)

    def _raise_if_closed(self) -> None:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("this env is closed")

    def __repr__(self) -> str:
        return (f"GpuVectorEnv({self.definition.name}, num_envs={self.num_envs}, "
                f"device={self.device}, backend={self.backend_name}, "
                f"autoreset_mode={self.autoreset_mode.name})")
