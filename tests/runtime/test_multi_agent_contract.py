"""A game that is not Tag runs on the generic multi-agent runtime with one module: its own
roles, one draw per agent, no kernels (so the torch backend under ``backend="auto"``)."""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv import seeding
from gpu_vecenv.definition import StateField
from gpu_vecenv.multi_agent import GameStep, MultiAgentDefinition, MultiAgentVectorEnv


@dataclass(frozen=True)
class RaceParams:
    num_scouts: int = 1
    num_carriers: int = 2
    episode_length: int = 3


def roles(p: RaceParams) -> tuple[str, ...]:
    return ("scout",) * p.num_scouts + ("carrier",) * p.num_carriers


def reset(p: RaceParams, u: torch.Tensor) -> dict[str, torch.Tensor]:
    assert u.shape[2] == 1  # reset_draws_per_agent
    return {"position": u[..., 0], "t": torch.zeros(u.shape[0], dtype=torch.int32)}


def step(p: RaceParams, state: dict, action: torch.Tensor) -> GameStep:
    position = state["position"] + action.to(torch.float32)
    t = state["t"] + 1
    return GameStep(state={"position": position, "t": t}, reward=position,
                    left=torch.zeros_like(position, dtype=torch.bool),
                    terminated=torch.zeros_like(t, dtype=torch.bool),
                    truncated=t >= p.episode_length)


RACE = MultiAgentDefinition(
    name="race", params_type=RaceParams, agent_fields=(StateField("position"),),
    game_fields=(StateField("t", torch.int32),), roles=roles,
    observation_space=lambda p: gym.spaces.Box(-np.inf, np.inf, (1,), np.float32),
    action_space=lambda p: gym.spaces.Discrete(2), reset=reset, step=step,
    observe=lambda p, s: s["position"][..., None],
    in_game=lambda p, s: torch.ones_like(s["position"], dtype=torch.bool),
    role_names=("carrier", "scout"), reset_draws_per_agent=1,
)


def test_a_game_with_its_own_roles_and_draws_runs_on_the_generic_runtime():
    env = MultiAgentVectorEnv(RACE, 2, device="cpu", autoreset_mode="SameStep")
    assert env.backend_name == "torch" and env.num_envs == 6
    assert env.possible_agents == ["scout_0", "carrier_0", "carrier_1"]
    obs, info = env.reset(seed=3)
    assert info["role"].tolist() == [1, 0, 0] * 2 and bool(info["active"].all())
    again, _ = MultiAgentVectorEnv(RACE, 2, device="cpu").reset(seed=3)
    assert torch.equal(obs, again) and bool(((obs >= 0) & (obs < 1)).all())
    # agent a's draw is word 0 of Philox block a of its game's stream, as a kernel reads it
    seeds = torch.full((2,), 3, dtype=torch.int64)
    blocks = seeding.random_uniform(seeds, torch.arange(2), torch.zeros(2, dtype=torch.int64),
                                    4 * 3).view(2, 3, 4)
    assert torch.equal(obs.view(2, 3), blocks[..., 0])
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(torch.ones(6, dtype=torch.int64))
    assert bool(truncated.all()) and not bool(terminated.any())
    assert torch.allclose(info["final_obs"], again + 3)
    assert "num_games=2, num_agents=3" in repr(env)
