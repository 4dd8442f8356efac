"""The torch backend of multi-agent envs: the env's reference functions on its buffers.

They run on any torch device with no host synchronization: every game computes every
branch and ``torch.where`` selects.
"""

from __future__ import annotations

import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import seeding
from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.definition import State
from gpu_vecenv.multi_agent.buffers import GameContext
from gpu_vecenv.multi_agent.definition import DRAWS_PER_BLOCK


class MultiAgentTorchBackend:
    """The env's reference functions run on the runtime's buffers (any torch device)."""

    name = "torch"

    def __init__(self, env: GameContext):
        self.env = env
        self._game_index = torch.arange(env.num_games, device=env.device, dtype=torch.int64)
        same_start = env.definition.same_start_every_episode
        self._same_start = same_start is not None and bool(same_start(env.params))

    def reset_games(self, mask: torch.Tensor) -> None:
        """Draw fresh games where ``mask`` ((G,) bool) from each game's RNG stream."""
        env, b = self.env, self.env.buffers
        if self._same_start:
            index = counter = torch.zeros_like(b.rng_counter)
        else:
            index, counter = self._game_index, b.rng_counter
        u = seeding.random_uniform(b.seed, index, counter, DRAWS_PER_BLOCK * env.num_agents)
        per_agent = u.view(env.num_games, env.num_agents, DRAWS_PER_BLOCK)
        draws = per_agent[..., :env.definition.reset_draws_per_agent]
        fresh = env.definition.reset(env.params, draws)
        _write_where(b.state, fresh, mask)
        b.rng_counter.add_(mask.to(torch.int64))
        b.pending.logical_and_(~mask)

    def observe(self, visible: torch.Tensor, out: torch.Tensor) -> None:
        """``out`` ((num_envs, obs_dim)) = the observations, zero where not ``visible``."""
        env = self.env
        obs = env.definition.observe(env.params, env.buffers.state)
        out.copy_(torch.where(visible[..., None], obs, 0.0).view(out.shape))

    def step(self, action: torch.Tensor, out: StepOutputs) -> None:
        """One step of every game, autoreset included; invalid actions leave their game
        unchanged and are counted in ``buffers.error_count``."""
        env, b = self.env, self.env.buffers
        G, A = env.num_games, env.num_agents
        valid = env.actions.valid_mask(action)
        safe = env.actions.sanitize(action, valid).view(G, A, *action.shape[1:])
        valid_game = valid.view(G, A).all(dim=1)
        mode = env.autoreset_mode
        pending = b.pending.clone()
        stepping = valid_game if mode == AutoresetMode.SAME_STEP else valid_game & ~pending

        in_before = env.definition.in_game(env.params, b.state)
        result = env.definition.step(env.params, b.state, safe)
        _write_where(b.state, result.state, stepping)
        in_after = env.definition.in_game(env.params, b.state)
        live = stepping[:, None]
        terminated = live & (result.left | (result.terminated[:, None] & in_after))
        truncated = live & result.truncated[:, None] & in_after & ~terminated
        out.reward.copy_(torch.where(live, result.reward, 0.0).view(-1))
        out.terminated.copy_(terminated.view(-1))
        out.truncated.copy_(truncated.view(-1))
        ended = stepping & (result.terminated | result.truncated)
        # A slot shows its observation on the step it leaves (terminal), zeros after.
        visible = torch.where(live, in_before, in_after)
        if mode == AutoresetMode.SAME_STEP:
            self.observe(visible, out.final_obs)
            self.reset_games(ended)
            b.pending.zero_()
            visible = env.definition.in_game(env.params, b.state)
        elif mode == AutoresetMode.NEXT_STEP:
            self.reset_games(valid_game & pending)
            b.pending.copy_(ended | (pending & ~valid_game))
            visible = torch.where(live, in_before, env.definition.in_game(env.params, b.state))
        else:
            b.pending.logical_or_(ended)
        self.observe(visible, out.obs)
        in_game = env.definition.in_game(env.params, b.state)
        out.active.copy_((in_game & ~b.pending[:, None]).view(-1))
        b.invalid_action.copy_(~valid)
        b.error_count.add_((~valid).sum().to(torch.int32))


def _write_where(target: State, source: State, mask: torch.Tensor) -> None:
    """``target[k] = source[k]`` where ``mask`` ((G,) bool) for every state field."""
    for name, tensor in target.items():
        m = mask if tensor.dim() == 1 else mask[:, None]
        tensor.copy_(torch.where(m, source[name].to(tensor.dtype), tensor))
