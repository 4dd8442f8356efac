"""Multi-agent envs (Tag) as Gymnasium ``VectorEnv``s: one agent per vector slot.

An env module (``envs/tag.py``) exports ``DEFINITION = MultiAgentDefinition(...)``: its
params, spaces and pure torch functions over games and agents. :class:`MultiAgentVectorEnv`
owns the generic machinery: buffers, seeding, autoreset, action checks, the slot layout.

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
them out; ``info["role"]`` (0 tagger, 1 runner), ``info["game"]`` and ``info["agent"]``
are constant ``(num_envs,)`` int64 tensors.

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

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import seeding
from gpu_vecenv.actions import ActionChecker, InvalidActionError
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL, DeferredErrors
from gpu_vecenv.devices import resolve_device
from gpu_vecenv.human_window import HumanWindow
from gpu_vecenv.pickling import PicklableVectorEnv, params_fields
from gpu_vecenv.rendering import check_render_mode
from gpu_vecenv.reset_and_state import reseed, reset_mask_option, seed_tensor, write_state
from gpu_vecenv.tag_definition import ROLES, GameStep, MultiAgentDefinition
from gpu_vecenv.tag_torch_backend import GameBuffers, GameOutputs, MultiAgentTorchBackend
from gpu_vecenv.vector_env import GpuVectorEnv, parse_autoreset_mode

__all__ = ["ERROR_FLAG_INTERVAL", "ROLES", "GameStep", "MultiAgentDefinition",
           "MultiAgentVectorEnv"]



class MultiAgentVectorEnv(PicklableVectorEnv, gym.vector.VectorEnv):
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
        copy: fresh output tensors every step (default); ``False`` reuses one set.
        render_mode: ``None``, ``"rgb_array"`` or ``"human"`` (a window shows game
            ``render_game`` after every ``reset()`` / ``step()``); ``render_game``: the
            game drawn.
        preset: a named parameter set, e.g. ``"warpdrive_training"``.
        **params: fields of the env's params dataclass (override the preset).

    ``pickle`` and ``copy.deepcopy`` give an env on the same device that continues bit for
    bit from the copied state (see :mod:`gpu_vecenv.pickling`).
    """

    observation_space = GpuVectorEnv.observation_space
    action_space = GpuVectorEnv.action_space

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
        if isinstance(num_games, bool) or not isinstance(num_games, (int, np.integer)):
            raise TypeError(f"the number of games must be an int, got {type(num_games).__name__}")
        if num_games < 1:
            raise ValueError(f"the number of games must be >= 1, got {num_games}")
        if max_episode_steps is not None:
            if params.setdefault("episode_length", max_episode_steps) != max_episode_steps:
                raise ValueError("max_episode_steps and episode_length disagree; pass one")
        self.definition = definition
        self.params = definition.make_params(preset, **params)
        self.roles = definition.roles(self.params)
        self.possible_agents = definition.agent_names(self.params)
        self.num_games = int(num_games)
        self.num_agents = len(self.roles)
        self.num_envs = self.num_games * self.num_agents
        self.device = resolve_device(device)
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.strict = (self.device.type == "cpu") if strict is None else bool(strict)
        self.copy = bool(copy)
        render_modes = check_render_mode(render_mode, definition.name,
                                         definition.render_frame is not None)
        if not 0 <= int(render_game) < self.num_games:
            raise ValueError(f"render_game={render_game} is outside [0, {self.num_games})")
        self.render_mode, self.render_game = render_mode, int(render_game)
        self._window = (HumanWindow(f"gpu_vecenv {definition.name}", definition.render_fps)
                        if render_mode == "human" else None)
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": render_modes,
                         "render_fps": definition.render_fps}
        self.single_observation_space = definition.observation_space(self.params)
        self.single_action_space = definition.action_space(self.params)
        self._batched_spaces: dict[str, gym.Space] = {}
        self.obs_dim = int(np.prod(self.single_observation_space.shape))
        self.actions = ActionChecker(self.single_action_space, self.num_envs, self.device)
        self.buffers = GameBuffers.allocate(definition, self.num_games, self.num_agents,
                                            self.device)
        self._with_final_obs = self.autoreset_mode == AutoresetMode.SAME_STEP
        self._outputs = GameOutputs.allocate(self.num_envs, self.obs_dim, self.device,
                                             self._with_final_obs)
        slots = torch.arange(self.num_envs, device=self.device)
        role_of_agent = torch.tensor([ROLES.index(r) for r in self.roles], device=self.device)
        self._constant_info = {"role": role_of_agent.repeat(self.num_games),
                               "game": slots // self.num_agents,
                               "agent": slots % self.num_agents}
        self.backend_name, self.backend = self._make_backend(backend)
        self._seeded = False
        self._has_reset = False
        self._errors = DeferredErrors(self.buffers.error_count,
                                      asynchronous=self.device.type == "cuda" and not self.strict)

    def _make_backend(self, backend: str):
        from gpu_vecenv.backends import build_backend

        def kernels():
            from gpu_vecenv.tag_cuda import TagCudaBackend

            return TagCudaBackend(self)

        return build_backend(backend, self.device, kernels,
                             lambda: MultiAgentTorchBackend(self))

    # -- reset / step --

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset every game, or those selected by ``options["reset_mask"]``.

        Args:
            seed: ``None`` (continue each game's stream; a fresh random seed the first
                time), an int (all games; they still differ since the game index is part
                of the RNG counter), or a list of ``num_games`` ints.
            options: ``{"reset_mask": mask}``, a bool numpy array or tensor of shape
                ``(num_games,)`` (games) or ``(num_envs,)`` (slots; see the module doc).

        Returns:
            ``(obs, info)``: obs ``(num_envs, obs_dim)``; info as for :meth:`step`.
        """
        self._raise_if_closed()
        mask = self._parse_reset_mask(options)
        # A partial reset (autoreset emulation, once per step in a loop) checks like
        # step(), without a sync; a full reset reads the device's count at once.
        self._check_errors(sync=mask is None)
        self._apply_seed(seed, mask)
        if mask is None:
            mask = torch.ones(self.num_games, dtype=torch.bool, device=self.device)
        self.backend.reset_games(mask)
        self.buffers.invalid_action.zero_()
        self._has_reset = True
        obs = self._fresh().obs
        self.backend.observe(self._in_game(), obs)
        if self._window is not None:
            self.render()
        return obs, self._info()

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every game with ``actions``: ``(num_envs, ...)`` in slot order, a tensor on
        the device (used as is) or anything numpy accepts. Returns ``(obs, reward,
        terminated, truncated, info)``; ``info`` holds ``role``, ``game``, ``agent``,
        ``active`` and, in SAME_STEP mode, ``final_obs`` / ``_final_obs``."""
        self._raise_if_closed()
        if not self._has_reset:
            raise gym.error.ResetNeeded("call reset() before step()")
        self._check_errors(sync=False)
        action = self.actions.convert(actions)
        if self.strict:
            valid = self.actions.valid_mask(action)
            if not bool(valid.all()):
                raise InvalidActionError(
                    self.actions.describe_invalid(action, valid) + "; nothing was stepped"
                )
        out = self._fresh()
        self.backend.step(action, out)
        if self._errors.after_step():
            self._check_errors(sync=True)
        if self._window is not None:
            self.render()
        info = {**self._constant_info, "active": out.active}
        if self._with_final_obs:
            done = out.terminated | out.truncated
            info.update(final_obs=out.final_obs, _final_obs=done, final_info={},
                        _final_info=done)
        return out.obs, out.reward, out.terminated, out.truncated, info

    def _fresh(self) -> GameOutputs:
        if not self.copy:
            return self._outputs
        return GameOutputs.allocate(self.num_envs, self.obs_dim, self.device,
                                    self._with_final_obs)

    def _in_game(self) -> torch.Tensor:
        return self.definition.in_game(self.params, self.buffers.state)

    def _info(self) -> dict[str, Any]:
        active = self._in_game() & ~self.buffers.pending[:, None]
        return {**self._constant_info, "active": active.view(-1)}

    # -- invalid actions, reported without a per-step sync --

    def _check_errors(self, sync: bool) -> None:
        count = self._errors.take(sync)
        if count == 0:
            return
        slots = torch.nonzero(self.buffers.invalid_action).flatten()[:5].tolist()
        raise InvalidActionError(
            f"{count} invalid action(s) (out of range for {self.single_action_space}) since "
            f"the last check; the games that got them were left unchanged (last step: "
            f"slots {slots}). Use strict=True to catch them before stepping."
        )

    def check_errors(self) -> None:
        """Raise :class:`InvalidActionError` now if any invalid action was seen (syncs)."""
        self._check_errors(sync=True)

    # -- seeding and options --

    def _apply_seed(self, seed: Any, mask: torch.Tensor | None) -> None:
        if seed is None:
            if self._seeded:
                return
            seed = seeding.new_seed()
        new, value = seed_tensor(seed, self.num_games, self.device, unit="num_games")
        if value is not None:
            self._np_random_seed = value
            self._np_random, _ = gym.utils.seeding.np_random(value % 2**32)
        b = self.buffers
        reseed(b.seed, b.rng_counter, new, mask if self._seeded else None)
        self._seeded = True

    def _parse_reset_mask(self, options: dict[str, Any] | None) -> torch.Tensor | None:
        """The ``(num_games,)`` bool mask of games to reset (``None``: all)."""
        mask = reset_mask_option(options)
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
        """Overwrite any subset of the keys of :meth:`get_state` (validated before
        anything is written). Returns the observations of the new state."""
        self._raise_if_closed()
        targets = self._state_targets()
        if write_state(targets, state, self.device):
            self._has_reset = self._seeded = True
        obs = self._fresh().obs
        self.backend.observe(self._in_game(), obs)
        return obs

    # -- rendering / closing --

    def render(self) -> tuple[np.ndarray, ...] | None:
        """A one-frame tuple: ``(H, W, 3)`` uint8 picture of game ``render_game``; with
        ``render_mode="human"`` it is shown in the window and ``None`` is returned."""
        if self.render_mode is None:
            gym.logger.warn("render() called without render_mode; pass render_mode='rgb_array'")
            return None
        game = {name: t[self.render_game].cpu().numpy() for name, t in self.buffers.state.items()}
        frames = (self.definition.render_frame(self.params, game),)
        if self._window is not None:
            self._window.show(frames)
            return None
        return frames

    def close_extras(self, **kwargs: Any) -> None:
        self.backend = None
        self._outputs = None
        if self._window is not None:
            self._window.close()

    # -- pickling (see gpu_vecenv/pickling.py) --

    def _constructor_arguments(self) -> tuple[tuple, dict[str, Any]]:
        return (self.definition, self.num_games), dict(
            device=str(self.device), backend=self.backend_name,
            autoreset_mode=self.autoreset_mode, strict=self.strict, copy=self.copy,
            render_mode=self.render_mode, render_game=self.render_game,
            **params_fields(self.params))

    def _construct(self, *args: Any, **kwargs: Any) -> None:
        MultiAgentVectorEnv.__init__(self, *args, **kwargs)

    def _raise_if_closed(self) -> None:
        if self.closed:
            raise gym.error.ClosedEnvironmentError("this env is closed")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.definition.name}, num_games={self.num_games}, "
                f"num_agents={self.num_agents}, device={self.device}, "
                f"backend={self.backend_name}, autoreset_mode={self.autoreset_mode.name})")
