"""``load_policy(run_dir)``: a trained run's policy with Stable-Baselines3's ``predict``.

::

    from gpu_vecenv.train import load_policy

    policy = load_policy("runs/GPUCartPole-v1__ppo__1__20260101-120000")
    obs, _ = env.reset(seed=0)
    actions, _ = policy.predict(obs, deterministic=True)   # torch in, torch out

``predict(observation, state=None, episode_start=None, deterministic=False) -> (actions,
state)`` is SB3's: a batch ``(n, *obs_shape)`` gives ``(n, *action_shape)``, one
observation ``obs_shape`` gives one action; Box actions are clipped to the space; ``state``
comes back as given (the policies are not recurrent). Numpy in gives numpy out; a torch
tensor in gives a tensor on its device out.

A run of several policies (Tag: ``tagger`` and ``runner``) predicts for a batch laid out
as the env's vector slots (``slot = game * agents + agent``: every slot by its agent's
policy); ``policy["runner"]`` is one policy alone, for any batch of its agents'
observations (e.g. one agent of a PettingZoo game).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.devices import usable_device
from gpu_vecenv.entry_points import make_vec
from gpu_vecenv.train.config import Config
from gpu_vecenv.train.evaluation import load_models
from gpu_vecenv.train.policies import agent_roles, slot_assignment


class TrainedPolicy:
    """The networks of a run's policies and which agent each acts for.

    Attributes:
        config: the run's :class:`~gpu_vecenv.train.config.Config`.
        global_step: the env steps the run had trained when its checkpoint was written.
        models: policy name -> network (``ActorCritic``: PPO, A2C;
            ``DeterministicActorCritic``: DDPG), in eval mode on ``device``.
        agent_policies: the policy name of each agent of a game (multi-agent runs; ``None``
            when one network acts for every row).
        observation_space, action_space: one slot's (one agent's) spaces.
        device: where the networks run.
    """

    def __init__(self, config: Config, global_step: int, models: dict[str, torch.nn.Module],
                 agent_policies: list[str] | None, observation_space: gym.spaces.Box,
                 action_space: gym.Space, device: torch.device, seed: int | None = None):
        self.config, self.global_step = config, global_step
        self.models = {name: model.eval() for name, model in models.items()}
        self.agent_policies = agent_policies
        self.observation_space, self.action_space = observation_space, action_space
        self.device = device
        self.seed = seed
        self.generator = torch.Generator(device=device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(seed)

    @property
    def names(self) -> list[str]:
        """The policy names (single-agent runs: ``["default"]``)."""
        return list(self.models)

    def __getitem__(self, name: str) -> TrainedPolicy:
        """Policy ``name`` alone: it acts for every row it is given."""
        if name not in self.models:
            raise KeyError(f"no policy {name!r} in this run; its policies: {self.names}")
        return TrainedPolicy(self.config, self.global_step, {name: self.models[name]}, None,
                             self.observation_space, self.action_space, self.device,
                             self.seed)

    def __repr__(self) -> str:
        return (f"TrainedPolicy({self.config.trainer.env}, policies {self.names}, step "
                f"{self.global_step:,}, device={self.device})")

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = False) -> tuple[Any, Any]:
        """SB3's ``predict``: ``(actions, state)`` for ``observation``.

        Args:
            observation: ``(n, *obs_shape)`` or ``obs_shape``; numpy (or anything
                ``np.asarray`` takes) or a torch tensor on any device.
            state, episode_start: SB3's recurrent state; returned / ignored as given.
            deterministic: the most likely action (PPO, A2C: the mode; DDPG: the actor
                always) instead of a sample.

        Returns:
            ``(actions, state)``: actions ``(n, *action_shape)`` (``action_shape`` alone
            for one observation), int64 for Discrete / MultiDiscrete, float32 in the Box
            bounds; numpy for numpy in, a tensor on the observation's device for torch in.
        """
        if isinstance(observation, tuple) and len(observation) == 2 \
                and isinstance(observation[1], dict):
            raise ValueError("predict() got a tuple (obs, info), as reset() returns; pass "
                             "the observations only: obs, info = env.reset(); "
                             "policy.predict(obs)")
        as_torch = isinstance(observation, torch.Tensor)
        obs = observation if as_torch else torch.as_tensor(np.asarray(observation))
        shape = tuple(self.observation_space.shape)
        batched = tuple(obs.shape[1:]) == shape
        if not batched and tuple(obs.shape) != shape:
            raise ValueError(f"Unexpected observation shape {tuple(obs.shape)}: use {shape} "
                             f"(one observation) or (n, {', '.join(map(str, shape))}) "
                             "(a batch)")
        obs = obs.to(self.device, torch.float32).reshape(-1, *shape)
        with torch.no_grad():
            actions = self._actions(obs, deterministic, batched)
        if not batched:
            actions = actions[0]
        if as_torch:
            return actions.to(observation.device), state
        return actions.cpu().numpy(), state

    def _actions(self, obs: torch.Tensor, deterministic: bool, batched: bool) -> torch.Tensor:
        """``(n, *action_shape)`` for ``(n, D)`` observations on ``device``."""
        if len(self.models) == 1:  # one network for every slot
            return self._act(next(iter(self.models.values())), obs, deterministic)
        agents = len(self.agent_policies)
        if not batched or obs.shape[0] % agents:
            raise ValueError(
                f"this run has policies {self.names}, each acting for some of the {agents} "
                f"agents of a game: give a batch laid out as the env's slots ({agents} rows "
                f"per game, slot = game * {agents} + agent, got {obs.shape[0]} rows), or "
                f"one policy's observations to policy[name].predict(...)")
        agent = torch.arange(obs.shape[0], device=obs.device) % agents
        out = None
        for name, model in self.models.items():
            ids = [i for i, owner in enumerate(self.agent_policies) if owner == name]
            rows = torch.nonzero(torch.isin(agent, torch.tensor(ids, device=obs.device)))
            rows = rows.flatten()
            chosen = self._act(model, obs.index_select(0, rows), deterministic)
            if out is None:
                out = torch.zeros((obs.shape[0], *chosen.shape[1:]), dtype=chosen.dtype,
                                  device=obs.device)
            out.index_copy_(0, rows, chosen)
        return out

    def _act(self, model: torch.nn.Module, obs: torch.Tensor, deterministic: bool
             ) -> torch.Tensor:
        if deterministic or not hasattr(model, "act"):  # DDPG's actor is deterministic
            actions = model.deterministic_action(obs)
        else:
            actions, _ = model.act(obs, self.generator)
        if isinstance(self.action_space, gym.spaces.Box):
            low = torch.as_tensor(self.action_space.low, device=obs.device)
            high = torch.as_tensor(self.action_space.high, device=obs.device)
            actions = torch.clamp(actions, low, high)
        return actions


def load_policy(path: str | Path, device: str | torch.device = "auto",
                seed: int | None = None) -> TrainedPolicy:
    """The trained policy of a run directory (its ``checkpoints/latest.pt``) or of a
    checkpoint file, on ``device`` (``"auto"``: the GPU if there is one).

    ``seed`` seeds the sampling of ``predict(..., deterministic=False)`` (``None``: fresh
    randomness). Raises ``FileNotFoundError`` / ``CheckpointError`` as
    :func:`~gpu_vecenv.train.evaluation.load_models` does.
    """
    device = usable_device(None if device == "auto" else device)
    config, models, step = load_models(path, device)
    t = config.trainer
    # One env on the CPU for the spaces and the roles: no kernels to compile.
    env = make_vec(t.env, 1, device="cpu", backend="torch", **t.env_kwargs)
    try:
        assignment = slot_assignment(config, env)
        roles = agent_roles(env)
        owners = None
        if roles is not None:
            owners = [""] * len(roles)
            for name, ids in assignment.items():
                for i in ids:
                    owners[i] = name
        return TrainedPolicy(config, step, models, owners, env.single_observation_space,
                             env.single_action_space, device, seed)
    finally:
        env.close()


__all__ = ["TrainedPolicy", "load_policy"]
