"""Gridworld Tag, batched over games and agents: WarpDrive's ``TagGridWorld`` rules.

## Description
Taggers chase one runner on the cells ``0 … L`` of a square grid. The game ends as soon
as a tagger stands on the runner's cell. Agents ``0 … T-1`` are taggers
(``tagger_0 …``); the last agent is the runner (``runner_0``). The full rules are in
docs/tag_rules.md; this module is their reference implementation.

## Action Space
``Discrete(5)`` per agent: 0 stay, 1 +x, 2 −x, 3 +y, 4 −y.

## Observation Space
Full (``use_full_observation``, default): ``Box(4·N + 1,)``: every agent's x/L, then every
y/L, then every role (runner 1, tagger 0), then a one-hot of the observing agent, then
``t / episode_length``. Partial: ``Box(6,)``: own x/L, y/L, the target's x/L, y/L (a
tagger's target is the runner; the runner's is its nearest tagger by squared distance,
lowest id on ties), own role, ``t / episode_length``.

## Rewards
``-wall_hit_penalty`` for a move that left the grid (clipped back). On a tag every tagger
gets ``tag_reward_for_tagger`` and the runner ``-tag_penalty_for_runner``; otherwise every
tagger gets ``-step_cost_for_tagger`` and the runner ``+step_cost_for_tagger``.

## Starting State
Every tagger at (⌊L/2⌋, ⌊L/2⌋), the runner at (0, 0) (WarpDrive's start). With
``random_start``: every agent on a uniform random cell from the seeded counter-based
RNG (index = game, counter = the game's reset count, one Philox block per agent).

## Episode End
Terminated on a tag; truncated at ``t == episode_length``.

## Arguments
The fields of :class:`TagGridParams`, or ``preset="warpdrive_training"``, as keyword
arguments of ``gymnasium.make_vec("GPUTagGrid-v0", num_games=G, **params)`` (``num_envs=G``
counts games too, with a warning: ``env.num_envs`` is ``G`` times the agents).

## Version History
- v0: WarpDrive's rules, plus optional random starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import State, StateField
from gpu_vecenv.device_constants import device_constant
from gpu_vecenv.multi_agent import GameStep, MultiAgentDefinition, drawing
from gpu_vecenv.multi_agent.kernel_binding import GameKernelBinding, KernelConstant

MOVES = ((0, 0), (1, 0), (-1, 0), (0, 1), (0, -1))
"""(Δx, Δy) of each action: stay, +x, −x, +y, −y."""


@dataclass(frozen=True)
class TagGridParams:
    """Parameters of gridworld Tag (WarpDrive's defaults)."""

    num_taggers: int = 10
    grid_length: int = 10
    """Cells are ``0 … grid_length`` inclusive on each axis."""
    episode_length: int = 100
    wall_hit_penalty: float = 0.1
    tag_reward_for_tagger: float = 10.0
    tag_penalty_for_runner: float = 2.0
    step_cost_for_tagger: float = 0.01
    use_full_observation: bool = True
    random_start: bool = False
    """Uniform random start cells instead of WarpDrive's fixed ones."""

    def __post_init__(self) -> None:
        checks = [
            (self.num_taggers >= 1, "num_taggers must be >= 1"),
            (self.grid_length >= 1, "grid_length must be >= 1"),
            (self.episode_length >= 1, "episode_length must be >= 1"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"TagGridParams: {message}")

    @classmethod
    def warpdrive_training(cls, **overrides) -> TagGridParams:
        """WarpDrive's training configuration (the bracketed values of docs/tag_rules.md)."""
        return replace(cls(num_taggers=4, grid_length=100, tag_penalty_for_runner=5.0),
                       **overrides)

    @property
    def num_agents(self) -> int:
        return self.num_taggers + 1

    @property
    def obs_dim(self) -> int:
        return 4 * self.num_agents + 1 if self.use_full_observation else 6

    @property
    def wall_hit_reward(self) -> float:
        return -self.wall_hit_penalty

    @property
    def tag_reward_for_runner(self) -> float:
        return -self.tag_penalty_for_runner

    @property
    def step_reward_for_tagger(self) -> float:
        return -self.step_cost_for_tagger


AGENT_FIELDS = (StateField("x", torch.int32), StateField("y", torch.int32))
GAME_FIELDS = (StateField("t", torch.int32, low=0),)


def roles(params: TagGridParams) -> tuple[str, ...]:
    return ("tagger",) * params.num_taggers + ("runner",)


def observation_space(params: TagGridParams) -> gym.spaces.Box:
    return gym.spaces.Box(0.0, 1.0, shape=(params.obs_dim,), dtype=np.float32)


def action_space(params: TagGridParams) -> gym.spaces.Discrete:
    return gym.spaces.Discrete(len(MOVES))


def reset(params: TagGridParams, u: torch.Tensor) -> State:
    """Fresh games; ``u`` ``(G, A, 2)`` uniforms are used with ``random_start`` only."""
    G, A = u.shape[:2]
    L = params.grid_length
    if params.random_start:
        cells = torch.clamp(torch.floor(u[..., :2] * float(L + 1)), max=L).to(torch.int32)
        x, y = cells[..., 0], cells[..., 1]
    else:
        x = torch.full((G, A), L // 2, dtype=torch.int32, device=u.device)
        x[:, -1] = 0
        y = x.clone()
    return {"x": x, "y": y, "t": torch.zeros(G, dtype=torch.int32, device=u.device)}


def in_game(params: TagGridParams, state: State) -> torch.Tensor:
    return torch.ones_like(state["x"], dtype=torch.bool)


def step(params: TagGridParams, state: State, action: torch.Tensor) -> GameStep:
    """One step of every game. ``action``: ``(G, A)`` int64 in ``[0, 5)``."""
    device = action.device
    moves = device_constant(MOVES, torch.int32, device)[action]
    L = params.grid_length
    wanted_x, wanted_y = state["x"] + moves[..., 0], state["y"] + moves[..., 1]
    x, y = torch.clamp(wanted_x, 0, L), torch.clamp(wanted_y, 0, L)
    hit_wall = (x != wanted_x) | (y != wanted_y)
    f32 = torch.float32
    reward = torch.where(hit_wall, device_constant(-params.wall_hit_penalty, f32, device), 0.0)
    tagged = ((x[:, :-1] == x[:, -1:]) & (y[:, :-1] == y[:, -1:])).any(dim=1)
    is_runner = torch.arange(params.num_agents, device=device) == params.num_agents - 1
    on_tag = torch.where(is_runner, -params.tag_penalty_for_runner, params.tag_reward_for_tagger)
    otherwise = torch.where(is_runner, params.step_cost_for_tagger, -params.step_cost_for_tagger)
    reward = reward + torch.where(tagged[:, None], on_tag.to(f32), otherwise.to(f32))
    t = state["t"] + 1
    return GameStep(
        state={"x": x, "y": y, "t": t},
        reward=reward,
        left=torch.zeros_like(hit_wall),
        terminated=tagged,
        truncated=t >= params.episode_length,
    )


def observe(params: TagGridParams, state: State) -> torch.Tensor:
    """``(G, A, obs_dim)`` float32 observations of every agent (see the module doc)."""
    x, y = state["x"], state["y"]
    G, A = x.shape
    device = x.device
    length = device_constant(float(params.grid_length), torch.float32, device)
    xn, yn = x.to(torch.float32) / length, y.to(torch.float32) / length
    time = state["t"].to(torch.float32) / device_constant(float(params.episode_length),
                                                          torch.float32, device)
    is_runner = (torch.arange(A, device=device) == A - 1).to(torch.float32)
    if params.use_full_observation:
        shared = torch.cat([xn, yn, is_runner.expand(G, A)], dim=1)  # (G, 3A)
        one_hot = torch.eye(A, device=device).expand(G, A, A)
        return torch.cat([shared[:, None, :].expand(G, A, 3 * A), one_hot,
                          time[:, None, None].expand(G, A, 1)], dim=2)
    # The runner's nearest tagger (first minimum: lowest id on ties); taggers target it.
    dx, dy = x[:, :-1] - x[:, -1:], y[:, :-1] - y[:, -1:]
    nearest = torch.argmin(dx * dx + dy * dy, dim=1, keepdim=True)  # (G, 1)
    target = torch.cat([torch.full((G, A - 1), A - 1, device=device, dtype=torch.int64),
                        nearest], dim=1)
    return torch.stack([xn, yn, torch.gather(xn, 1, target), torch.gather(yn, 1, target),
                        is_runner.expand(G, A), time[:, None].expand(G, A)], dim=2)


def draw_grid(x: np.ndarray, y: np.ndarray, grid_length: int, num_taggers: int,
              time: int = 0, episode_length: int = 1, size: int = 400) -> np.ndarray:
    """One gridworld-Tag game on its ``(L+1)²`` cells: taggers red, the runner (the last
    agent) blue, a time bar along the bottom. Returns ``(H, W, 3)`` uint8."""
    cells = grid_length + 1
    cell = max(size // cells, 2)
    frame = drawing.canvas(cell * cells)
    if cell >= 6:
        frame[::cell, :] = drawing.GRID
        frame[:, ::cell] = drawing.GRID
    order = [len(x) - 1] + list(range(num_taggers))
    for i in order:
        colour = drawing.BLUE if i == len(x) - 1 else drawing.RED
        row = (grid_length - int(y[i])) * cell
        col = int(x[i]) * cell
        pad = 1 if cell >= 6 else 0
        frame[row + pad:row + cell - pad, col + pad:col + cell - pad] = colour
    drawing.time_bar(frame, time, episode_length)
    return frame


def render_frame(params: TagGridParams, game: dict[str, np.ndarray]) -> np.ndarray:
    """``(H, W, 3)`` uint8 picture of one game (:func:`draw_grid`)."""
    return draw_grid(game["x"], game["y"], params.grid_length, params.num_taggers,
                     time=int(game["t"]), episode_length=params.episode_length)


# -- the kernel binding of cuda_src/tag_grid.cu --

KERNEL_CONSTANTS = tuple(KernelConstant(name, kind, source) for name, kind, source in (
    ("num_agents", "i", "num_agents"),
    ("grid_length", "i", "grid_length"),
    ("episode_length", "i", "episode_length"),
    ("full_observation", "i", "use_full_observation"),
    ("random_start", "i", "random_start"),
    ("obs_dim", "i", "obs_dim"),
    ("neg_wall_hit_penalty", "f", "wall_hit_reward"),
    ("tag_reward", "f", "tag_reward_for_tagger"),
    ("neg_tag_penalty", "f", "tag_reward_for_runner"),
    ("step_cost", "f", "step_cost_for_tagger"),
    ("neg_step_cost", "f", "step_reward_for_tagger"),
    ("grid_length_f", "f", "grid_length"),
    ("episode_length_f", "f", "episode_length"),
    ("unused", "i", 0),
))
"""``GRID_CONSTS`` of ``tag_grid.cu``, field by field: (C name, kind, the params' attribute)."""


def kernel_name(params: TagGridParams, blocks: int, device: torch.device) -> str:
    return "tag_grid_run"


def kernel_buffers(params: TagGridParams, games: int, device: torch.device,
                   visible: torch.Tensor) -> list[torch.Tensor]:
    """``GridBuffers`` after the common five: ``game_bad``, ``game_tagged``, ``game_ended``
    ``(G,)`` int32 scratch, then ``visible``."""
    return [torch.zeros(games, dtype=torch.int32, device=device) for _ in range(3)] + [visible]


KERNEL_BINDING = GameKernelBinding(
    constants=KERNEL_CONSTANTS,
    state_fields=("x", "y", "t"),
    buffers=kernel_buffers,
    kernel_name=kernel_name,
    kernels=("tag_grid_run",),
)


DEFINITION = MultiAgentDefinition(
    name="tag_grid",
    params_type=TagGridParams,
    agent_fields=AGENT_FIELDS,
    game_fields=GAME_FIELDS,
    roles=roles,
    observation_space=observation_space,
    action_space=action_space,
    reset=reset,
    step=step,
    observe=observe,
    in_game=in_game,
    role_names=("tagger", "runner"),
    reset_draws_per_agent=2,
    presets=("warpdrive_training",),
    render_frame=render_frame,
    kernel_binding=KERNEL_BINDING,
)
