"""Multi-agent envs as Gymnasium ``VectorEnv``s: one agent per vector slot.

An env module (``envs/tag.py``) exports ``DEFINITION = MultiAgentDefinition(...)``: its
params, spaces and pure torch functions over games and agents. :class:`MultiAgentVectorEnv`
owns the generic machinery: buffers, seeding, autoreset, action checks, the slot layout
(what it shares with the single-agent env is :mod:`gpu_vecenv.base_vector_env`).

Layout: ``G`` games of ``A`` agents; ``env.num_envs == G * A``; slot ``game * A + agent``.
Per-agent state tensors are ``(G, A)``, per-game ones ``(G,)``.

Episodes, per slot and per game
-------------------------------
A *game* runs from its reset until it terminates (the env says so, e.g. no runner left)
or is truncated (its time limit). A *slot's* episode runs from its game's reset until
its agent leaves the game (a tagged runner: ``terminated=True`` on that step) or the
game ends (every slot still in the game gets ``terminated`` or ``truncated``; a slot
that gets ``terminated`` never also gets ``truncated``). So every slot reports exactly
one ``done`` per game. Between leaving and its game's reset a slot is *idle*: it emits
zero observations, zero rewards and no ``done``, and its actions are ignored (they must
still be in range). ``info["active"]`` is False for idle slots, so a trainer can mask
them out; ``info["role"]`` (the definition's role ids; Tag: 0 tagger, 1 runner),
``info["game"]`` and ``info["agent"]`` are constant ``(num_envs,)`` int64 tensors.

Autoreset is per game:

- ``NEXT_STEP``: on the step after a game ended, the game is reset instead of stepped:
  its slots return the first observation, reward 0, no ``done``; their actions are
  ignored. A slot that left earlier returns its terminal observation on the step it
  left and zeros afterwards.
- ``SAME_STEP``: a game that ended is reset within the same ``step()``; ``obs`` holds the
  new game's first observation and ``info["final_obs"]`` the last one of every slot
  that was done on this step (``info["_final_obs"]`` marks them). A runner tagged while
  its game goes on gets its terminal observation in ``final_obs`` and zeros in ``obs``.
- ``DISABLED``: a game that ended is frozen (zero rewards, no ``done``) until
  ``reset(options={"reset_mask": mask})`` with a ``(num_games,)`` mask of games or a
  ``(num_envs,)`` mask of slots: a game is reset if any of its masked slots is active or
  the game has ended (so resetting exactly the slots that were ``done`` works).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.backends import build_backend
from gpu_vecenv.base_vector_env import BaseVectorEnv, check_count
from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL
from gpu_vecenv.multi_agent.buffers import GameBuffers, GameContext
from gpu_vecenv.multi_agent.cuda_backend import GameCudaBackend
from gpu_vecenv.multi_agent.definition import MultiAgentDefinition
from gpu_vecenv.multi_agent.torch_backend import MultiAgentTorchBackend
from gpu_vecenv.pickling import params_fields
from gpu_vecenv.reset_arguments import reset_mask_option
from gpu_vecenv.state_writes import state_bounds, write_state

__all__ = ["ERROR_FLAG_INTERVAL", "MultiAgentVectorEnv"]


class MultiAgentVectorEnv(BaseVectorEnv):
    """``num_games`` games of one multi-agent env; each agent is one vector slot.

    Outputs are torch tensors on ``device``: obs ``(num_envs, obs_dim)`` float32,
    reward ``(num_envs,)`` float32, terminated / truncated ``(num_envs,)`` bool, with
    ``num_envs = num_games * num_agents`` and slot ``game * num_agents + agent``. See the
    module docstring for how episodes and autoreset work per slot and per game.

    Args:
        definition: the env (see :class:`MultiAgentDefinition`).
        num_games: number of games (>= 1).
        device: torch device; default the current CUDA device if any, else the CPU.
        backend: ``"auto"``, ``"cuda"`` (the kernels) or ``"torch"`` (the reference).
        autoreset_mode: ``NEXT_STEP`` (default), ``SAME_STEP`` or ``DISABLED``.
        max_episode_steps: another name for the params' ``episode_length``.
        strict: check every action batch before stepping (one sync per step); the step
            then happens for all games or raises and changes nothing. ``False``: a game
            with an invalid action is left unchanged and a later call raises (on a GPU,
            within ``ERROR_FLAG_INTERVAL`` steps; ``check_errors()`` and a full
            ``reset()`` at once). Default: True on the CPU, False on a GPU.
        copy: fresh output tensors every step (default; small ones are rows of chunks
            shared by up to 32 steps, see ``GpuVectorEnv``); ``False`` reuses one set.
        render_mode: ``None``, ``"rgb_array"`` or ``"human"`` (a window shows game
            ``render_game`` after every ``reset()`` / ``step()``); ``render_game``: the
            game drawn.
        preset: a named parameter set, e.g. ``"warpdrive_training"``.
        **params: fields of the env's params dataclass (override the preset).

    ``pickle`` and ``copy.deepcopy`` give an env on the same device that continues bit for
    bit from the copied state (see :mod:`gpu_vecenv.pickling`).
    """

    def __init__(
        self,
        definition: MultiAgentDefinition,
        num_games: int = 1,
        *,
        device: str | torch.device | None = None,
        backend: str = "auto",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = None,
        strict: bool | None = None,
        copy: bool = True,
        render_mode: str | None = None,
        render_game: int = 0,
        preset: str | None = None,
        **params: Any,
    ):
        num_games = check_count(num_games, "the number of games")
        if max_episode_steps is not None:
            if params.setdefault("episode_length", max_episode_steps) != max_episode_steps:
                raise ValueError("max_episode_steps and episode_length disagree; pass one")
        params = definition.make_params(preset, **params)
        self.roles = definition.roles(params)
        self.possible_agents = definition.agent_names(params)
        self.num_games = num_games
        self.num_agents = len(self.roles)
        self._configure(definition, params, self.num_games * self.num_agents, device=device,
                        autoreset_mode=autoreset_mode, strict=strict, copy=copy,
                        render_mode=render_mode)
        if not 0 <= int(render_game) < self.num_games:
            raise ValueError(f"render_game={render_game} is outside [0, {self.num_games})")
        self.render_game = int(render_game)
        self._allocate_io(with_active=True)
        self.buffers = GameBuffers.allocate(definition, self.num_games, self.num_agents,
                                            self.device)
        slots = torch.arange(self.num_envs, device=self.device)
        role_of_agent = torch.tensor(definition.role_ids(params), device=self.device)
        self._constant_info = {"role": role_of_agent.repeat(self.num_games),
                               "game": slots // self.num_agents,
                               "agent": slots % self.num_agents}
        context = GameContext(
            definition=definition, params=params, num_games=self.num_games,
            num_agents=self.num_agents, device=self.device,
            autoreset_mode=self.autoreset_mode, actions=self.actions, buffers=self.buffers,
            obs_dim=self.obs_dim,
        )
        self.backend_name, self.backend = build_backend(
            backend, context, GameCudaBackend, MultiAgentTorchBackend)
        self._start()

    # -- the hooks of BaseVectorEnv --

    def _reset_selected(self, mask: torch.Tensor | None) -> tuple[torch.Tensor, dict[str, Any]]:
        if mask is None:
            mask = torch.ones(self.num_games, dtype=torch.bool, device=self.device)
        self.backend.reset_games(mask)
        self.buffers.invalid_action.zero_()
        obs = self._fresh_outputs().obs
        self.backend.observe(self._in_game(), obs)
        return obs, self._info()

    def _step_info(self, out: StepOutputs) -> dict[str, Any]:
        return {**self._constant_info, "active": out.active}

    def _seed_units(self) -> tuple[int, str]:
        return self.num_games, "num_games"

    def _invalid_action_message(self, count: int) -> str:
        slots = torch.nonzero(self.buffers.invalid_action).flatten()[:5].tolist()
        return (f"{count} invalid action(s) (out of range for {self.single_action_space}) "
                f"since the last check; the games that got them were left unchanged (last "
                f"step: slots {slots}). Use strict=True to catch them before stepping.")

    def _frames(self) -> tuple[np.ndarray, ...]:
        """One frame: game ``render_game``."""
        game = {name: t[self.render_game].cpu().numpy() for name, t in self.buffers.state.items()}
        return (self.definition.render_frame(self.params, game),)

    def _repr_sizes(self) -> str:
        return f"num_games={self.num_games}, num_agents={self.num_agents}"

    def _in_game(self) -> torch.Tensor:
        return self.definition.in_game(self.params, self.buffers.state)

    def _info(self) -> dict[str, Any]:
        active = self._in_game() & ~self.buffers.pending[:, None]
        return {**self._constant_info, "active": active.view(-1)}

    def _parse_reset_mask(self, options: dict[str, Any] | None) -> torch.Tensor | None:
        """The ``(num_games,)`` bool mask of games to reset (``None``: all)."""
        mask = reset_mask_option(options, self.device)
        if mask is None:
            return None
        shape = tuple(mask.shape)
        if shape not in ((self.num_games,), (self.num_envs,)):
            raise ValueError(f"options['reset_mask'] must have shape ({self.num_games},) "
                             f"(games) or ({self.num_envs},) (slots), got {shape}")
        mask = mask.to(self.device)
        if shape == (self.num_envs,):
            alive = self._in_game() | self.buffers.pending[:, None]
            mask = (mask.view(self.num_games, self.num_agents) & alive).any(dim=1)
        return mask

    # -- state access --

    def _state_targets(self) -> dict[str, torch.Tensor]:
        b = self.buffers
        return {**b.state, "rng_seed": b.seed, "rng_counter": b.rng_counter,
                "autoreset_pending": b.pending}

    def get_state(self) -> dict[str, torch.Tensor]:
        """A copy of the full state: agent fields ``(num_games, num_agents)``, game fields
        ``(num_games,)``, ``rng_seed`` / ``rng_counter`` ``(num_games,)`` int64 and
        ``autoreset_pending`` ``(num_games,)`` bool."""
        return {name: t.clone() for name, t in self._state_targets().items()}

    def set_state(self, state: dict[str, Any]) -> torch.Tensor:
        """Overwrite any subset of the keys of :meth:`get_state`. Every key, type, shape,
        dtype, device and value is validated before anything is written (floats finite,
        ints within their dtype and the definition's field bounds, ``rng_counter`` >= 0;
        one host sync on a GPU; errors as for ``GpuVectorEnv.set_state``). Returns the
        observations of the new state."""
        self._raise_if_closed()
        targets = self._state_targets()
        d = self.definition
        bounds = state_bounds((*d.agent_fields, *d.game_fields))
        bounds["rng_counter"] = (0, None)
        if write_state(targets, state, self.device, bounds):
            self._has_reset = self._seeded = True
        obs = self._fresh_outputs().obs
        self.backend.observe(self._in_game(), obs)
        return obs

    # -- pickling (see gpu_vecenv/pickling.py) --

    def _constructor_arguments(self) -> tuple[tuple, dict[str, Any]]:
        return (self.definition, self.num_games), dict(
            device=str(self.device), backend=self.backend_name,
            autoreset_mode=self.autoreset_mode, strict=self.strict, copy=self.copy,
            render_mode=self.render_mode, render_game=self.render_game,
            **params_fields(self.params))

    def _construct(self, *args: Any, **kwargs: Any) -> None:
        MultiAgentVectorEnv.__init__(self, *args, **kwargs)

