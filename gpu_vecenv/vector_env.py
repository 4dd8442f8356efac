"""``GpuVectorEnv``: a Gymnasium ``VectorEnv`` whose data lives in torch tensors.

One class serves every single-agent env: it owns the generic machinery (buffers, time
limits, the three autoreset modes, seeding, action checks, state access, backend
dispatch); the env itself is an :class:`~gpu_vecenv.definition.EnvDefinition`. What it
shares with the multi-agent env is :mod:`gpu_vecenv.base_vector_env`.

Outputs are torch tensors on ``device``: obs ``(num_envs, obs_dim)`` float32, reward
``(num_envs,)`` float32, terminated / truncated ``(num_envs,)`` bool. On the CUDA kernels
``step()`` never synchronizes with the GPU unless ``strict=True``; the torch backend on a
GPU waits for it once per step in which some env resets (it draws initial states only for
those envs; not while a CUDA graph is captured).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends import build_backend
from gpu_vecenv.backends.base import BackendContext
from gpu_vecenv.backends.cuda import CudaBackend
from gpu_vecenv.backends.torch_backend import TorchBackend
from gpu_vecenv.base_vector_env import BaseVectorEnv, check_count, parse_autoreset_mode
from gpu_vecenv.buffers import EnvBuffers
from gpu_vecenv.definition import EnvDefinition
from gpu_vecenv.pickling import params_fields
from gpu_vecenv.reset_arguments import reset_mask_option
from gpu_vecenv.state_writes import state_bounds, write_state

__all__ = ["GpuVectorEnv", "parse_autoreset_mode"]

_DEFAULT = object()


class GpuVectorEnv(BaseVectorEnv):
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
        copy: return fresh output tensors every step (default): no step's outputs share
            memory with another's. Small outputs (up to 512 KiB a step) are rows of
            chunks allocated for 2 to 32 steps at once (1 MiB at most), so a kept output
            keeps its chunk alive: ``clone()`` the few you keep for long while dropping
            the rest (see :class:`~gpu_vecenv.buffers.OutputRing`). ``False`` returns the
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
        num_envs = check_count(num_envs, "num_envs")
        self._configure(definition, definition.make_params(**params), num_envs, device=device,
                        autoreset_mode=autoreset_mode, strict=strict, copy=copy,
                        render_mode=render_mode)
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
        self.torch_compile = bool(torch_compile)
        self.torch_graphs = bool(torch_graphs)
        self.render_env_indices = tuple(int(i) for i in render_env_indices)
        for i in self.render_env_indices:
            if not 0 <= i < self.num_envs:
                raise ValueError(f"render_env_indices holds {i}, outside [0, {self.num_envs})")
        self._allocate_io()
        self.buffers = EnvBuffers.allocate(definition, self.num_envs, self.device)
        self._ctx = BackendContext(
            definition=definition, params=self.params, num_envs=self.num_envs,
            device=self.device, autoreset_mode=self.autoreset_mode,
            max_episode_steps=self.max_episode_steps, actions=self.actions,
            buffers=self.buffers, obs_dim=self.obs_dim,
        )
        self.backend_name, self.backend = build_backend(
            backend, self._ctx, CudaBackend,
            partial(TorchBackend, compile=self.torch_compile, graphs=self.torch_graphs))
        self._start()

    # -- the hooks of BaseVectorEnv --

    def _reset_selected(self, mask: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, Any]]:
        out = self._fresh_outputs()
        self.backend.reset(mask, out.obs)
        return out.obs, {}

    def _parse_reset_mask(self, options: dict[str, Any] | None) -> torch.Tensor | None:
        """The ``(num_envs,)`` bool mask of ``options["reset_mask"]`` (``None``: all)."""
        mask = reset_mask_option(options, self.device)
        if mask is None:
            return None
        if tuple(mask.shape) != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must have shape ({self.num_envs},), "
                             f"got {tuple(mask.shape)}")
        if mask.device.type == "cpu" and not bool(mask.any()):  # no sync for device masks
            raise ValueError("options['reset_mask'] must contain at least one True value")
        return mask.to(self.device)

    def _invalid_action_message(self, count: int) -> str:
        envs = torch.nonzero(self.buffers.invalid_action).flatten()[:5].tolist()
        where = f" (on the last step: envs {envs})" if envs else ""
        return (f"{count} invalid action(s) (out of range, NaN or inf for "
                f"{self.single_action_space}) since the last check; the envs that got them "
                f"were left unchanged on those steps{where}. Use strict=True to catch them "
                f"before stepping.")

    def _frames(self) -> tuple[np.ndarray, ...]:
        """Frames of the envs in ``render_env_indices``."""
        frames = []
        for i in self.render_env_indices:
            values = {name: float(t[i]) for name, t in self.buffers.state.items()}
            frames.append(self.definition.render_frame(self.params, values))
        return tuple(frames)

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

        Validates every key, type, shape, dtype, device and value before writing
        anything (see :func:`~gpu_vecenv.state_writes.write_state`: floats finite,
        ints within their dtype, ``elapsed_steps`` and ``rng_counter`` >= 0; one host
        sync on a GPU). Returns the observations of the new state, ``(num_envs,
        obs_dim)``.

        Raises:
            TypeError: ``state`` is not a dict, or a value has the wrong type or dtype.
            KeyError: an unknown key.
            ValueError: a wrong shape or device, or a value out of range or not finite.
        """
        self._raise_if_closed()
        b = self.buffers
        targets = dict(b.state)
        targets.update(elapsed_steps=b.elapsed, rng_counter=b.rng_counter, rng_seed=b.seed,
                       autoreset_pending=b.autoreset_pending)
        bounds = state_bounds(self.definition.state_fields)
        bounds.update(elapsed_steps=(0, None), rng_counter=(0, None))
        if write_state(targets, state, self.device, bounds):
            self._has_reset = True
            self._seeded = True
        obs = self._fresh_outputs().obs
        self.backend.observe(obs)
        return obs

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

    _repr_name = "GpuVectorEnv"
