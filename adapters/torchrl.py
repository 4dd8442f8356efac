"""TorchRL adapter: :class:`TorchRLEnv`, a TorchRL ``EnvBase`` over one of our vector envs.

TorchRL speaks torch on the device, as we do, so nothing is copied to the host: a step
reads ``"action"`` from the tensordict, steps the env and writes ``"observation"``,
``"reward"``, ``"done"``, ``"terminated"`` and ``"truncated"`` (views of the env's output
tensors). Resets are partial: TorchRL passes ``"_reset"`` (``(num_envs, 1)`` bool) and only
those envs are reset, through ``reset(options={"reset_mask": ...})`` of the env, which
runs in ``DISABLED`` autoreset mode underneath (TorchRL decides when to reset).

Usage::

    from torchrl.collectors import SyncDataCollector
    from gpu_vecenv.adapters.torchrl import TorchRLEnv

    env = TorchRLEnv("GPUCartPole-v1", num_envs=4096, device="cuda")
    collector = SyncDataCollector(env, policy, frames_per_batch=4096 * 16,
                                  total_frames=10_000_000)

Shapes (``n = num_envs``): ``"observation"`` ``(n, obs_dim)`` float32, ``"action"``
``(n,)`` int64 (Discrete), ``(n, d)`` int64 (MultiDiscrete) or ``(n, d)`` float32 (Box),
``"reward"`` ``(n, 1)`` float32, ``"done"`` / ``"terminated"`` / ``"truncated"`` ``(n, 1)``
bool. A multi-agent env (Tag, or one you registered): :class:`TorchRLMultiAgentEnv` (agents
grouped by role, ``batch_size=[G]``).
"""

from __future__ import annotations

from typing import Any

try:
    from tensordict import TensorDict, TensorDictBase
    from torchrl.data import Bounded, Categorical, Composite, MultiCategorical, Unbounded
    from torchrl.envs import EnvBase
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "gpu_vecenv.adapters.torchrl needs TorchRL: pip install 'gpu-vecenv[torchrl]'"
    ) from error

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.vector_env import parse_autoreset_mode


def space_to_spec(space: gym.Space, batch: tuple[int, ...], device: torch.device):
    """The TorchRL spec of ``batch`` copies of a Gymnasium space.

    ``Discrete(k)`` -> ``Categorical(k)`` of shape ``batch``; ``MultiDiscrete(nvec)`` ->
    ``MultiCategorical`` of shape ``(*batch, len(nvec))``; ``Box`` -> ``Bounded`` (or
    ``Unbounded`` where a bound is infinite) of shape ``(*batch, *box.shape)``.
    """
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"Discrete spaces must start at 0 for TorchRL, got {space}")
        return Categorical(n=int(space.n), shape=batch, device=device, dtype=torch.int64)
    if isinstance(space, gym.spaces.MultiDiscrete):
        if (space.start != 0).any():
            raise ValueError(f"MultiDiscrete spaces must start at 0 for TorchRL, got {space}")
        nvec = torch.as_tensor(space.nvec, dtype=torch.int64)
        return MultiCategorical(nvec=nvec.tolist(), shape=(*batch, *space.shape), device=device,
                                dtype=torch.int64)
    if isinstance(space, gym.spaces.Box):
        shape = (*batch, *space.shape)
        dtype = torch.from_numpy(space.low[:0]).dtype if space.low.size else torch.float32
        if space.is_bounded("both"):
            low = torch.as_tensor(space.low, dtype=dtype).expand(shape)
            high = torch.as_tensor(space.high, dtype=dtype).expand(shape)
            return Bounded(low=low, high=high, shape=shape, device=device, dtype=dtype)
        return Unbounded(shape=shape, device=device, dtype=dtype)
    raise TypeError(f"no TorchRL spec for space {space}")


class TorchRLEnv(EnvBase):
    """One of our single-agent vector envs as a TorchRL env with ``batch_size=[num_envs]``.

    Args:
        env: an env id, made here with ``num_envs`` and ``**make_kwargs`` in ``DISABLED``
            autoreset mode, or an already made vector env in ``DISABLED`` mode.
        num_envs: number of envs when ``env`` is an id.
        **make_kwargs: passed to ``gpu_vecenv.make_vec`` (``device``, ``backend``, ...).
    """

    def __init__(self, env: str | gym.vector.VectorEnv, num_envs: int | None = None,
                 **make_kwargs: Any):
        env = _make_or_check(env, num_envs, make_kwargs)
        device = torch.device(env.device)
        super().__init__(device=device, batch_size=torch.Size([env.num_envs]))
        self.env = env
        n = env.num_envs
        self.observation_spec = Composite(
            observation=space_to_spec(env.single_observation_space, (n,), device),
            shape=(n,), device=device,
        )
        self.action_spec = space_to_spec(env.single_action_space, (n,), device)
        self.reward_spec = Unbounded(shape=(n, 1), device=device, dtype=torch.float32)
        self.done_spec = Composite(
            done=Categorical(2, shape=(n, 1), dtype=torch.bool, device=device),
            terminated=Categorical(2, shape=(n, 1), dtype=torch.bool, device=device),
            truncated=Categorical(2, shape=(n, 1), dtype=torch.bool, device=device),
            shape=(n,), device=device,
        )
        self._obs: torch.Tensor | None = None

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            obs, _ = self.env.reset()
        else:
            mask = mask.reshape(-1)
            if self.device.type == "cpu" and not bool(mask.any()):
                obs = self._obs  # nothing to reset; no sync on the CPU
            else:
                obs, _ = self.env.reset(options={"reset_mask": mask})
        self._obs = obs
        false = torch.zeros((self.env.num_envs, 1), dtype=torch.bool, device=self.device)
        return TensorDict(
            {"observation": obs, "done": false, "terminated": false.clone(),
             "truncated": false.clone()},
            batch_size=self.batch_size, device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs, reward, terminated, truncated, _ = self.env.step(tensordict.get("action"))
        self._obs = obs
        terminated = terminated.unsqueeze(-1)
        truncated = truncated.unsqueeze(-1)
        return TensorDict(
            {"observation": obs, "reward": reward.unsqueeze(-1), "done": terminated | truncated,
             "terminated": terminated, "truncated": truncated},
            batch_size=self.batch_size, device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        """Reseed every env now (a full reset from ``seed``), as Gymnasium's ``reset(seed=)``."""
        self._obs, _ = self.env.reset(seed=seed)

    def close(self, *, raise_if_closed: bool = True) -> None:
        if not self.env.closed:
            self.env.close()
        super().close(raise_if_closed=raise_if_closed)


def _make_or_check(env: Any, num_envs: int | None, make_kwargs: dict[str, Any]):
    """Make ``env`` (an id) in DISABLED autoreset mode, or check a made one is."""
    if isinstance(env, str):
        from gpu_vecenv import make_vec
        from gpu_vecenv.make_arguments import merge_vector_kwargs

        make_kwargs = merge_vector_kwargs(env, make_kwargs)  # its autoreset_mode counts
        mode = make_kwargs.setdefault("autoreset_mode", AutoresetMode.DISABLED)
        if parse_autoreset_mode(mode) != AutoresetMode.DISABLED:
            raise ValueError("the TorchRL adapter needs autoreset_mode=DISABLED "
                             "(TorchRL resets envs itself through '_reset')")
        return make_vec(env, 1 if num_envs is None else num_envs, **make_kwargs)
    if num_envs is not None or make_kwargs:
        raise TypeError("num_envs and make kwargs apply only when env is an id")
    mode = env.metadata.get("autoreset_mode")
    if mode != AutoresetMode.DISABLED:
        raise ValueError(f"the TorchRL adapter needs an env made with autoreset_mode=DISABLED "
                         f"(TorchRL resets envs itself through '_reset'), got {mode}")
    if not getattr(env, "copy", True):
        raise ValueError("the TorchRL adapter needs an env made with copy=True: TorchRL keeps "
                         "the returned tensors across steps")
    return env


class TorchRLMultiAgentEnv(EnvBase):
    """A multi-agent env (``GPUTag-v0``, ``GPUTagGrid-v0`` or any registered multi-agent id)
    as a TorchRL multi-agent env, agents grouped by role, ``batch_size=[num_games]``.

    The groups are the env's roles in the order they first appear among its agents (Tag:
    ``"tagger"``, then ``"runner"``). Keys (``G`` games, ``N`` agents of a role): for each
    role ``(role, "observation")`` ``(G, N, obs_dim)``, ``(role, "action")`` ``(G, N,
    ...)``, ``(role, "reward")`` ``(G, N, 1)``, ``(role, "active")`` ``(G, N, 1)`` bool
    (False once the agent left the game); ``"done"`` / ``"terminated"`` / ``"truncated"``
    ``(G, 1)`` per game. ``"_reset"`` ``(G, 1)`` resets whole games.

    Args:
        env_id: a multi-agent id (made here in ``DISABLED`` autoreset mode), or a
            multi-agent vector env made in that mode.
        num_games: ``G`` when ``env_id`` is an id (default 1).
        **make_kwargs: passed to ``gpu_vecenv.make_vec`` (device, backend, params, ...).
    """

    def __init__(self, env_id: str | gym.vector.VectorEnv = "GPUTag-v0",
                 num_games: int | None = None, **make_kwargs: Any):
        env = _make_or_check(env_id, num_games, make_kwargs)
        if not hasattr(env, "num_games"):
            if isinstance(env_id, str):
                env.close()
            raise TypeError(f"{getattr(env, 'env_id', env_id)} is a single-agent env; use "
                            f"TorchRLEnv")
        device = torch.device(env.device)
        G = env.num_games
        super().__init__(device=device, batch_size=torch.Size([G]))
        self.env = env
        roles = list(env.roles)
        self.groups = {role: torch.tensor([i for i, r in enumerate(roles) if r == role],
                                          dtype=torch.int64, device=device)
                       for role in dict.fromkeys(roles)}
        """Role -> the indices of its agents in a game."""
        self._num_agents = len(roles)
        obs, act = env.single_observation_space, env.single_action_space
        obs_specs, act_specs, rew_specs = {}, {}, {}
        for role, index in self.groups.items():
            shape = (G, len(index))
            obs_specs[role] = Composite(
                observation=space_to_spec(obs, shape, device),
                active=Categorical(2, shape=(*shape, 1), dtype=torch.bool, device=device),
                shape=shape, device=device)
            act_specs[role] = Composite(action=space_to_spec(act, shape, device), shape=shape,
                                        device=device)
            rew_specs[role] = Composite(
                reward=Unbounded(shape=(*shape, 1), dtype=torch.float32, device=device),
                shape=shape, device=device)
        self.observation_spec = Composite(obs_specs, shape=(G,), device=device)
        self.full_action_spec = Composite(act_specs, shape=(G,), device=device)
        self.full_reward_spec = Composite(rew_specs, shape=(G,), device=device)
        flag = Categorical(2, shape=(G, 1), dtype=torch.bool, device=device)
        self.full_done_spec = Composite(done=flag, terminated=flag.clone(),
                                        truncated=flag.clone(), shape=(G,), device=device)
        self._last: tuple[torch.Tensor, torch.Tensor] | None = None

    def _grouped(self, obs: torch.Tensor, active: torch.Tensor,
                 reward: torch.Tensor | None) -> dict[str, Any]:
        G, A = self.env.num_games, self._num_agents
        obs = obs.view(G, A, *obs.shape[1:])
        active = active.view(G, A, 1)
        out: dict[str, Any] = {}
        for role, index in self.groups.items():
            out[(role, "observation")] = obs[:, index]
            out[(role, "active")] = active[:, index]
            if reward is not None:
                out[(role, "reward")] = reward.view(G, A, 1)[:, index]
        return out

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            obs, info = self.env.reset()
        elif self.device.type == "cpu" and not bool(mask.any()):
            obs, info = self._last[0], {"active": self._last[1]}
        else:
            obs, info = self.env.reset(options={"reset_mask": mask.reshape(-1)})
        self._last = (obs, info["active"])
        false = torch.zeros((self.env.num_games, 1), dtype=torch.bool, device=self.device)
        values = self._grouped(obs, info["active"], None)
        values.update(done=false, terminated=false.clone(), truncated=false.clone())
        return self._pack(values)

    def _pack(self, values: dict[Any, Any]) -> TensorDictBase:
        """``{("role", "key"): v, "key": v}`` as a TensorDict whose role entries are
        sub-TensorDicts of batch size ``(G, agents of the role)``."""
        nested: dict[str, Any] = {}
        for key, value in values.items():
            if isinstance(key, tuple):
                nested.setdefault(key[0], {})[key[1]] = value
            else:
                nested[key] = value
        for role, index in self.groups.items():
            nested[role] = TensorDict(nested[role], batch_size=(self.env.num_games, len(index)),
                                      device=self.device)
        return TensorDict(nested, batch_size=self.batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        G, A = self.env.num_games, self._num_agents
        first = tensordict.get((next(iter(self.groups)), "action"))
        action = torch.empty((G, A, *first.shape[2:]), dtype=first.dtype, device=self.device)
        for role, index in self.groups.items():
            action[:, index] = tensordict.get((role, "action"))
        obs, reward, terminated, truncated, info = self.env.step(
            action.view(G * A, *action.shape[2:]))
        self._last = (obs, info["active"])
        game_over = self.env.buffers.pending.view(G, 1)
        game_truncated = truncated.view(G, A).any(dim=1, keepdim=True)
        values = self._grouped(obs, info["active"], reward)
        values.update(done=game_over.clone(), terminated=game_over & ~game_truncated,
                      truncated=game_truncated)
        return self._pack(values)

    def _set_seed(self, seed: int | None) -> None:
        obs, info = self.env.reset(seed=seed)
        self._last = (obs, info["active"])

    def close(self, *, raise_if_closed: bool = True) -> None:
        if not self.env.closed:
            self.env.close()
        super().close(raise_if_closed=raise_if_closed)


TorchRLTagEnv = TorchRLMultiAgentEnv
"""The earlier name of :class:`TorchRLMultiAgentEnv` (documented, so kept)."""
