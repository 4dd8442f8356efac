"""Stable-Baselines3 adapter: :class:`SB3VecEnv`, an SB3 ``VecEnv`` over one of our envs.

SB3 works on numpy arrays in host memory, so one copy to the host per step is forced.
This adapter makes it exactly one: observation, reward, terminated, truncated and the
final observation are packed into one float32 device tensor and moved with one
``.cpu()`` (the only synchronization of the step). Actions go the other way in one
host-to-device copy. Everything else (time limits, autoreset) stays on the device.

Usage::

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from gpu_vecenv.adapters.sb3 import SB3VecEnv

    venv = VecMonitor(SB3VecEnv("GPUCartPole-v1", num_envs=8, device="cpu"))
    PPO("MlpPolicy", venv).learn(100_000)

The env may be made in any autoreset mode; SB3's contract is the same in each: on the
step an episode ends, ``obs`` holds the next episode's first observation, the finished
episode's last one is in ``info["terminal_observation"]`` and ``info["TimeLimit.truncated"]``
says it ended on the time limit (SB3 then bootstraps from it), as ``DummyVecEnv`` gives
them. ``SAME_STEP`` (what an env id is made in here) does this on the device in the one
copy. With ``NEXT_STEP`` or ``DISABLED`` (e.g. ``gymnasium.make_vec``'s default) the
adapter resets the finished envs itself (``reset(options={"reset_mask": done})``), which
costs one more device-to-host copy on steps where an episode ended.

Multi-agent Tag works through its Gymnasium agent-slot view (``GPUTag-v0``: one slot
per agent, ``slot = game * num_agents + agent``, MultiDiscrete actions), so SB3 trains
one policy shared by all agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "gpu_vecenv.adapters.sb3 needs Stable-Baselines3: pip install 'gpu-vecenv[sb3]'"
    ) from error

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.vector_env import parse_autoreset_mode
from gpu_vecenv.wrappers.base import device_of


class SB3VecEnv(VecEnv):
    """One of our vector envs as a Stable-Baselines3 ``VecEnv``.

    Args:
        env: an env id (``"GPUCartPole-v1"``), made here with ``num_envs`` and
            ``**make_kwargs`` (in ``SAME_STEP`` autoreset mode unless ``autoreset_mode``
            says otherwise), or an already made vector env (or a wrapper of one, e.g.
            :mod:`gpu_vecenv.wrappers`) in any autoreset mode.
        num_envs: passed to ``make_vec`` when ``env`` is an id: the number of envs, or of
            games for Tag (whose vector has ``games * agents`` slots; ``num_games=G`` in
            ``make_kwargs`` says the same).
        **make_kwargs: passed to ``gpu_vecenv.make_vec`` (``device``, ``backend``,
            ``max_episode_steps``, env params, ...).

    Shapes (``n = num_envs``, numpy, host memory): ``reset()`` returns obs
    ``(n, *obs_shape)``; ``step_wait()`` returns obs, rewards ``(n,)`` float32, dones
    ``(n,)`` bool and a list of ``n`` info dicts.
    """

    def __init__(
        self, env: str | gym.vector.VectorEnv, num_envs: int | None = None, **make_kwargs: Any
    ):
        if isinstance(env, str):
            from gpu_vecenv import make_vec
            from gpu_vecenv.make_arguments import merge_vector_kwargs

            make_kwargs = merge_vector_kwargs(env, make_kwargs)  # its autoreset_mode wins
            make_kwargs.setdefault("autoreset_mode", AutoresetMode.SAME_STEP)
            env = make_vec(env, 1 if num_envs is None else num_envs, **make_kwargs)
        elif num_envs is not None or make_kwargs:
            raise TypeError("num_envs and make kwargs apply only when env is an id")
        self.env = env
        # Gymnasium's assumption for an env that does not say
        self.autoreset_mode = parse_autoreset_mode(
            env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        )
        self.device = device_of(env)
        obs_space = env.single_observation_space
        if not isinstance(obs_space, gym.spaces.Box):
            raise TypeError(f"SB3VecEnv supports Box observations, got {obs_space}")
        self._obs_shape = tuple(obs_space.shape)
        self._obs_dtype = obs_space.dtype
        self._actions: torch.Tensor | None = None
        self._seed: int | None = None
        self._next_options: dict[str, Any] = {}
        super().__init__(env.num_envs, obs_space, env.single_action_space)

    # -- reset / step --

    def reset(self) -> np.ndarray:
        """Reset every env (with the seed of :meth:`seed` / options of :meth:`set_options`,
        once). Returns obs ``(n, *obs_shape)``."""
        obs, info = self.env.reset(seed=self._seed, options=self._next_options or None)
        self._seed = None
        self._next_options = {}
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        # a copy: with copy=False on the CPU, obs is the env's own buffer
        return np.array(obs.cpu().numpy(), dtype=self._obs_dtype, copy=True)

    def step_async(self, actions: np.ndarray) -> None:
        """Send ``actions`` (``(n,)`` for Discrete, ``(n, d)`` for MultiDiscrete/Box) to the
        device: one host-to-device copy."""
        self._actions = torch.as_tensor(np.asarray(actions)).to(self.device, non_blocking=True)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """Step, then copy everything SB3 needs to the host in one transfer (two on a step
        where an episode ended, if the env is not in SAME_STEP mode)."""
        if self._actions is None:
            raise RuntimeError("step_wait() called without step_async()")
        actions, self._actions = self._actions, None
        obs, reward, terminated, truncated, info = self.env.step(actions)
        same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        # NEXT_STEP / DISABLED: obs of a finished episode is its final obs (not reset yet)
        final_obs = info["final_obs"] if same_step else obs
        n = self.num_envs
        packed = (
            torch.cat(
                [
                    obs.reshape(-1).float(),
                    final_obs.reshape(-1).float(),
                    reward.reshape(-1).float(),
                    terminated.reshape(-1).float(),
                    truncated.reshape(-1).float(),
                ]
            )
            .cpu()
            .numpy()
        )  # the one device-to-host copy (and sync) of the step
        size = obs.numel()
        obs_np = packed[:size].reshape(n, *self._obs_shape).astype(self._obs_dtype, copy=False)
        final_np = packed[size : 2 * size].reshape(n, *self._obs_shape)
        rest = packed[2 * size :].reshape(3, n)
        rewards = rest[0].copy()
        terminated_np = rest[1] > 0.5
        truncated_np = rest[2] > 0.5
        dones = terminated_np | truncated_np
        if not same_step and dones.any():
            self._reset_finished(obs_np, terminated | truncated)
        infos: list[dict[str, Any]] = [{} for _ in range(n)]
        for i in np.flatnonzero(dones):
            infos[i]["terminal_observation"] = final_np[i].astype(self._obs_dtype, copy=True)
            infos[i]["TimeLimit.truncated"] = bool(truncated_np[i] and not terminated_np[i])
        return obs_np, rewards, dones, infos

    def _reset_finished(self, obs_np: np.ndarray, done: torch.Tensor) -> None:
        """Reset the envs whose episode ended (``done``, on the device) and write the
        observations after that reset into ``obs_np``, as SB3 expects. All rows: for Tag, a
        game's reset also gives new observations to slots that were idle (not done)."""
        reset_obs, _ = self.env.reset(options={"reset_mask": done})
        obs_np[...] = reset_obs.cpu().numpy().reshape(obs_np.shape)

    # -- attributes and methods: the n envs are one object, so these apply to all --

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        return list(self._get_indices(indices))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The vector env's attribute, once per requested index (the envs share it)."""
        value = getattr(self.env, attr_name)
        return [value for _ in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of the vector env. The envs share it, so ``indices`` must be
        ``None`` or name every env."""
        self._require_all(indices, "set_attr")
        setattr(self.env, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of the vector env once; its result is repeated per index."""
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result for _ in self._indices(indices)]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Our envs are never wrapped in ``gym.Wrapper`` (use ``VecMonitor`` for stats)."""
        return [False for _ in self._indices(indices)]

    def _require_all(self, indices: VecEnvIndices, what: str) -> None:
        chosen = sorted(set(self._indices(indices)))
        if chosen != list(range(self.num_envs)):
            raise ValueError(
                f"{what}: the {self.num_envs} envs share one vector env, so "
                f"indices must be None or all of them, got {indices}"
            )

    # -- seeding, options, rendering, closing --

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Seed the next :meth:`reset`. Every env gets ``seed``; their streams still
        differ because the env index is part of the RNG counter. Returns ``[seed] * n``."""
        if seed is None:
            seed = int(np.random.randint(0, np.iinfo(np.uint32).max, dtype=np.uint32))
        self._seed = int(seed)
        self._seeds = [self._seed] * self.num_envs
        return self._seeds

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        """Options for the next :meth:`reset` (our envs take ``{"reset_mask": ...}``). A
        list must hold the same dict for every env."""
        if options is None:
            options = {}
        if isinstance(options, list):
            if any(o != options[0] for o in options):
                raise ValueError("SB3VecEnv: per-env options must all be equal")
            options = options[0] if options else {}
        self._next_options = dict(options)
        self._options = [dict(options) for _ in range(self.num_envs)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Frames of the envs in the vector env's ``render_env_indices`` (default env 0)."""
        frames = self.env.render()
        return list(frames) if frames is not None else []

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.env!r})"
