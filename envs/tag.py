"""Continuous Tag, batched over games and agents: WarpDrive's ``TagContinuous`` rules.

## Description
Taggers chase runners on a square field ``[0, L]²``. Every agent steers by changing
its acceleration and direction; a runner closer than ``tagging_distance · L`` to its
nearest tagger is tagged and (by default) leaves the game. The full rules, with the
deliberate deviations from WarpDrive, are in docs/tag_rules.md; this module is their
reference implementation (pure torch functions of ``(G, A)`` tensors).

Agents ``0 … T-1`` are taggers (``tagger_0 …``), the rest runners (``runner_0 …``).

## Action Space
``MultiDiscrete([A + 1, R + 1])`` per agent (``A``, ``R``: ``num_acceleration_levels``,
``num_turn_levels``). Index 0 is a no-op; ``i >= 1`` is ``linspace(min, max, levels)[i-1]``
(``min/max_acceleration``, ``min/max_turn``).

## Observation Space
``Box(-b, b, (D,))`` float32 with ``b = max(1, 2.002 · max skill level)``, feature-major.
Full mode (``use_full_observation``): the ``N-1`` others in id order; partial mode: the
``K`` nearest others still in the game by increasing distance (ties: lower id first),
zero-padded. For each of the features Δx/(√2·L), Δy/(√2·L), Δspeed/(max_speed+1e-10),
Δacc/(max_speed+1e-10), Δdir/(2π) (each value normalised, then other − self), the other's
role (1 tagger, 0 runner) and the other's in-game flag, the values of all observed
others; then ``t / episode_length``; then (``observe_own_state``, off by default) the
agent's own x/L, y/L, cos and sin of its direction and speed/max_speed; then
(``observe_own_role``, default) the agent's own role, so that one shared policy can tell
roles apart. ``D = 7·(N-1) + 2`` (full) or ``7·K + 2`` (partial), one less without the own
role, 5 more with the own state. With ``egocentric`` (off by default) Δx and Δy are turned
into the agent's own frame (x ahead, y to its left): ``cos·Δx + sin·Δy`` and
``cos·Δy − sin·Δx`` of the agent's direction. An agent out of the game sees zero Δs, time
and own state (full mode) or all zeros (partial mode). Both backends write every option.

## Rewards
Per step: ``edge_hit_penalty`` for leaving the field, the role's step reward, ``±tag``
rewards for a tag (a tagger once per runner it tags), ``end_of_game_reward_for_runner``
for every runner still in the game when ``t == episode_length`` (not for one tagged on
that step). A runner's nearest tagger is the one at the smallest float32 squared distance
(lowest index on ties); the runner is tagged when the square root of that distance is below
``tagging_distance · L``. Tags of one step are resolved from the positions after every
agent moved, independently of each other, so the result never depends on an order.

## Starting State
x, y uniform in ``[0, L)``; direction uniform in {0, π/2, π, 3π/2}; speed and acceleration
0; everyone in the game. Drawn from the seeded counter-based RNG (index = game, counter
= the game's reset count, one Philox block per agent); with ``fixed_start_positions``
every reset of every game uses the first draw (index 0, counter 0), as WarpDrive does.

## Episode End
Terminated when no runner is left in the game; truncated at ``t == episode_length``.
A tagged runner leaves its game (terminated for its slot) and waits for the game's reset.

## Arguments
The fields of :class:`TagParams`, or ``preset="warpdrive_training"`` (WarpDrive's training
configuration) with overrides, as keyword arguments of
``gymnasium.make_vec("GPUTag-v0", num_games=G, **params)`` (``num_envs=G`` counts games
too, with a warning: ``env.num_envs`` is ``G`` times the agents).

## Version History
- v0: WarpDrive's rules; fresh starts per episode, race-free tags, own-role feature.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import gymnasium as gym
import numpy as np
import torch

from gpu_vecenv.definition import State, StateField
from gpu_vecenv.device_constants import device_constant
from gpu_vecenv.envs import tag_launch
from gpu_vecenv.envs.tag_launch import MAX_OBSERVED
from gpu_vecenv.multi_agent import GameStep, MultiAgentDefinition, drawing
from gpu_vecenv.multi_agent.kernel_binding import (
    GameKernelBinding,
    GameLaunch,
    KernelConstant,
)
from gpu_vecenv.multi_agent.kernel_constants import int_constant

F32 = np.float32
TWO_PI = float(F32(2 * math.pi))
HALF_PI = float(F32(math.pi / 2))
NUM_FEATURES = int_constant("tag_layout.cuh", "kTagFeatures")
"""Features per observed other agent (the kernel's ``kTagFeatures``)."""
OWN_STATE_FEATURES = int_constant("tag_layout.cuh", "kTagOwnStateFeatures")
"""x/L, y/L, cos(direction), sin(direction), speed/max_speed (``observe_own_state``; the
kernel's ``kTagOwnStateFeatures``)."""
ROLES = ("tagger", "runner")
"""Role ids of ``info["role"]``: 0 tagger, 1 runner."""


@dataclass(frozen=True)
class TagParams:
    """Parameters of continuous Tag (WarpDrive's defaults)."""

    num_taggers: int = 1
    num_runners: int = 10
    grid_length: float = 10.0
    episode_length: int = 100
    max_speed: float = 1.0
    skill_level_tagger: float = 1.0
    skill_level_runner: float = 1.0
    min_acceleration: float = -1.0
    max_acceleration: float = 1.0
    num_acceleration_levels: int = 10
    min_turn: float = -math.pi / 2
    max_turn: float = math.pi / 2
    num_turn_levels: int = 10
    use_full_observation: bool = True
    num_other_agents_observed: int = 2
    """K, the number of others seen in partial mode."""
    tagging_distance: float = 0.01
    """A fraction of ``grid_length``."""
    tag_reward_for_tagger: float = 1.0
    tag_penalty_for_runner: float = -1.0
    step_penalty_for_tagger: float = 0.0
    step_reward_for_runner: float = 0.0
    end_of_game_reward_for_runner: float = 1.0
    edge_hit_penalty: float = 0.0
    runner_exits_game_after_tagged: bool = True
    observe_own_role: bool = True
    """Append the agent's own role to its observation (False: WarpDrive's observation)."""
    observe_own_state: bool = False
    """Also observe the agent's own absolute state (x/L, y/L, cos and sin of its
    direction, speed/max_speed; zeros out of the game), before the own role. WarpDrive's
    observation holds only differences (other − self), so an agent cannot tell which turn
    takes it towards or away from another, nor where the edges are."""
    egocentric: bool = False
    """Observe the others' Δx, Δy rotated into the agent's own frame (x ahead, y to its
    left) instead of the field's."""
    fixed_start_positions: bool = False
    """Reuse one set of start positions for every episode and game (WarpDrive's way)."""

    def __post_init__(self) -> None:
        checks = [
            (self.num_taggers >= 1, "num_taggers must be >= 1"),
            (self.num_runners >= 1, "num_runners must be >= 1"),
            (self.grid_length > 0, "grid_length must be > 0"),
            (self.episode_length >= 1, "episode_length must be >= 1"),
            (self.max_speed >= 0, "max_speed must be >= 0"),
            (self.num_acceleration_levels >= 1, "num_acceleration_levels must be >= 1"),
            (self.num_turn_levels >= 1, "num_turn_levels must be >= 1"),
            (self.edge_hit_penalty <= 0, "edge_hit_penalty must be <= 0"),
            (self.tagging_distance >= 0, "tagging_distance must be >= 0"),
            (self.use_full_observation
             or 1 <= self.num_other_agents_observed <= self.num_agents - 1,
             f"num_other_agents_observed must be in [1, {self.num_agents - 1}]"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"TagParams: {message}")

    @classmethod
    def warpdrive_training(cls, **overrides) -> TagParams:
        """WarpDrive's training configuration (the bracketed values of docs/tag_rules.md)."""
        preset = cls(num_taggers=10, num_runners=100, grid_length=20.0, episode_length=500,
                     min_acceleration=-0.1, max_acceleration=0.1, num_acceleration_levels=20,
                     min_turn=-2.356, max_turn=2.356, num_turn_levels=20,
                     use_full_observation=False, num_other_agents_observed=10,
                     tagging_distance=0.02, tag_reward_for_tagger=10.0,
                     tag_penalty_for_runner=-10.0)
        return replace(preset, **overrides)

    @property
    def num_agents(self) -> int:
        return self.num_taggers + self.num_runners

    @property
    def num_observed(self) -> int:
        """Others in an observation: ``N - 1`` (full) or ``K`` (partial)."""
        return self.num_agents - 1 if self.use_full_observation else self.num_other_agents_observed

    @property
    def obs_dim(self) -> int:
        return (NUM_FEATURES * self.num_observed + 1 + OWN_STATE_FEATURES
                * int(self.observe_own_state) + int(self.observe_own_role))

    @property
    def num_acceleration_actions(self) -> int:
        """``num_acceleration_levels + 1`` (index 0 is the no-op)."""
        return self.num_acceleration_levels + 1

    @property
    def num_turn_actions(self) -> int:
        return self.num_turn_levels + 1

    @property
    def acceleration_table(self) -> np.ndarray:
        """float32 ``[0, linspace(min, max, levels)...]``, indexed by the action."""
        levels = np.linspace(self.min_acceleration, self.max_acceleration,
                             self.num_acceleration_levels)
        return np.concatenate([[0.0], levels]).astype(F32)

    @property
    def turn_table(self) -> np.ndarray:
        levels = np.linspace(self.min_turn, self.max_turn, self.num_turn_levels)
        return np.concatenate([[0.0], levels]).astype(F32)

    @property
    def max_speed_tagger(self) -> float:
        return float(F32(self.max_speed) * F32(self.skill_level_tagger))

    @property
    def max_speed_runner(self) -> float:
        return float(F32(self.max_speed) * F32(self.skill_level_runner))

    @property
    def tag_threshold(self) -> float:
        """``tagging_distance · L`` in float32: a runner nearer than this is tagged."""
        return float(F32(self.tagging_distance) * F32(self.grid_length))

    @property
    def position_scale(self) -> float:
        """``√2 · L`` in float32, the observation's position normaliser."""
        return float(F32(math.sqrt(2.0)) * F32(self.grid_length))

    @property
    def speed_scale(self) -> float:
        return float(F32(self.max_speed + 1e-10))


AGENT_FIELDS = (
    StateField("x"), StateField("y"), StateField("speed"), StateField("direction"),
    StateField("acceleration"), StateField("in_game", torch.int32, low=0, high=1),
)
GAME_FIELDS = (StateField("t", torch.int32, low=0),)


def roles(params: TagParams) -> tuple[str, ...]:
    return ("tagger",) * params.num_taggers + ("runner",) * params.num_runners


def same_start_every_episode(params: TagParams) -> bool:
    return params.fixed_start_positions


def observation_space(params: TagParams) -> gym.spaces.Box:
    # Positions, directions, roles, flags and time lie in [-1, 1]; speed differences reach
    # the top speed over max_speed, acceleration differences twice that.
    speed = max(params.skill_level_tagger, params.skill_level_runner) * 1.001
    high = float(F32(max(1.0, 2 * speed)))
    return gym.spaces.Box(-high, high, shape=(params.obs_dim,), dtype=np.float32)


def action_space(params: TagParams) -> gym.spaces.MultiDiscrete:
    return gym.spaces.MultiDiscrete([params.num_acceleration_actions,
                                     params.num_turn_actions])


def _const(value: float, like: torch.Tensor) -> torch.Tensor:
    """A 0-d float32 tensor on ``like``'s device (so divisions are true divisions, as in
    the kernels, not multiplications by a reciprocal), made once."""
    return device_constant(value, torch.float32, like.device)


@functools.cache
def _action_tables(params: TagParams, device: torch.device
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The acceleration and turn tables on ``device``, per params (the properties build
    them with numpy on each call: not once per step)."""
    return (device_constant(params.acceleration_table, torch.float32, device),
            device_constant(params.turn_table, torch.float32, device))


def _is_tagger(params: TagParams, device: torch.device) -> torch.Tensor:
    return torch.arange(params.num_agents, device=device) < params.num_taggers


def reset(params: TagParams, u: torch.Tensor) -> State:
    """Fresh games from uniforms ``u`` ``(G, A, 3)`` (x, y, direction)."""
    G, A = u.shape[:2]
    length = _const(params.grid_length, u)
    zeros = torch.zeros((G, A), dtype=torch.float32, device=u.device)
    return {
        "x": u[..., 0] * length,
        "y": u[..., 1] * length,
        "speed": zeros,
        "direction": torch.floor(u[..., 2] * 4.0) * _const(HALF_PI, u),
        "acceleration": zeros.clone(),
        "in_game": torch.ones((G, A), dtype=torch.int32, device=u.device),
        "t": torch.zeros(G, dtype=torch.int32, device=u.device),
    }


def in_game(params: TagParams, state: State) -> torch.Tensor:
    return state["in_game"] != 0


def step(params: TagParams, state: State, action: torch.Tensor) -> GameStep:
    """One step of every game. ``action``: ``(G, A, 2)`` int64 (acceleration, turn)."""
    x, y = state["x"], state["y"]
    device, T = x.device, params.num_taggers
    playing = state["in_game"] != 0
    playing_f = playing.to(torch.float32)
    is_tagger = _is_tagger(params, device)
    t = state["t"] + 1

    acceleration_table, turn_table = _action_tables(params, device)
    d_acc = acceleration_table[action[..., 0]]
    d_turn = turn_table[action[..., 1]]
    direction = torch.remainder(state["direction"] + d_turn, _const(TWO_PI, x)) * playing_f
    acceleration = state["acceleration"] + d_acc
    vmax = torch.where(is_tagger, _const(params.max_speed_tagger, x),
                       _const(params.max_speed_runner, x))
    speed = torch.minimum(torch.clamp(state["speed"] + acceleration, min=0.0), vmax) * playing_f
    acceleration = torch.where((speed > 0) & (speed < vmax), acceleration, 0.0)
    x = x + speed * torch.cos(direction)
    y = y + speed * torch.sin(direction)
    length = _const(params.grid_length, x)
    hit_edge = (x < 0) | (x > length) | (y < 0) | (y > length)
    x = torch.clamp(x, min=_const(0.0, x), max=length)
    y = torch.clamp(y, min=_const(0.0, x), max=length)

    step_reward = torch.where(is_tagger, _const(params.step_penalty_for_tagger, x),
                              _const(params.step_reward_for_runner, x))
    reward = torch.where(hit_edge, _const(params.edge_hit_penalty, x), 0.0) + step_reward
    reward = torch.where(playing, reward, 0.0)

    # Each runner's nearest tagger (first minimum: lowest index on ties).
    dx = x[:, T:, None] - x[:, None, :T]
    dy = y[:, T:, None] - y[:, None, :T]
    dist2 = dx * dx + dy * dy
    nearest = torch.argmin(dist2, dim=2)
    nearest_dist = torch.sqrt(torch.gather(dist2, 2, nearest[..., None])[..., 0])
    runner_playing = playing[:, T:]
    tagged = runner_playing & (nearest_dist < params.tag_threshold)
    tags = torch.zeros_like(x[:, :T], dtype=torch.int32).scatter_add_(
        1, nearest, tagged.to(torch.int32))
    tagger_reward = reward[:, :T] + tags.to(torch.float32) * params.tag_reward_for_tagger
    runner_reward = reward[:, T:] + torch.where(tagged, _const(params.tag_penalty_for_runner, x),
                                                0.0)
    still = runner_playing & ~tagged if params.runner_exits_game_after_tagged else runner_playing
    end = (t == params.episode_length)[:, None] & still
    runner_reward = runner_reward + torch.where(end, _const(params.end_of_game_reward_for_runner,
                                                            x), 0.0)

    in_game_now = torch.cat([playing[:, :T], still], dim=1)
    new_state = {"x": x, "y": y, "speed": speed, "direction": direction,
                 "acceleration": acceleration, "in_game": in_game_now.to(torch.int32), "t": t}
    return GameStep(
        state=new_state,
        reward=torch.cat([tagger_reward, runner_reward], dim=1),
        left=playing & ~in_game_now,
        terminated=~still.any(dim=1),
        truncated=t >= params.episode_length,
    )


def _features(params: TagParams, state: State) -> list[torch.Tensor]:
    """The five normalised per-agent values whose differences are observed, ``(G, A)``."""
    x = state["x"]
    position_scale = _const(params.position_scale, x)
    speed_scale = _const(params.speed_scale, x)
    return [x / position_scale, state["y"] / position_scale, state["speed"] / speed_scale,
            state["acceleration"] / speed_scale, state["direction"] / _const(TWO_PI, x)]


def observe(params: TagParams, state: State) -> torch.Tensor:
    """``(G, A, obs_dim)`` float32 observations of every agent (see the module doc)."""
    x = state["x"]
    G, A = x.shape
    device = x.device
    playing = state["in_game"] != 0
    role = _is_tagger(params, device).to(torch.float32).expand(G, A)
    if params.use_full_observation:
        base = torch.arange(A - 1, device=device)[None, :]
        others = (base + (base >= torch.arange(A, device=device)[:, None])).expand(G, A, A - 1)
        seen = torch.ones((G, A, A - 1), dtype=torch.bool, device=device)
    else:
        dx = x[:, None, :] - x[:, :, None]
        dy = state["y"][:, None, :] - state["y"][:, :, None]
        dist2 = dx * dx + dy * dy
        hidden = ~playing[:, None, :] | torch.eye(A, dtype=torch.bool, device=device)
        dist2 = torch.where(hidden, torch.inf, dist2)
        dist2, order = torch.sort(dist2, dim=2, stable=True)
        others = order[:, :, : params.num_other_agents_observed]
        seen = (dist2[:, :, : params.num_other_agents_observed] < torch.inf) & playing[..., None]

    def gather(values: torch.Tensor) -> torch.Tensor:  # (G, A) -> (G, A, observed)
        return torch.gather(values[:, None, :].expand(G, A, A), 2, others)

    blocks = [torch.where(playing[..., None], gather(v) - v[..., None], 0.0)
              for v in _features(params, state)]
    if params.egocentric:  # (Δx, Δy) in the observer's frame: x ahead, y to its left
        cos = torch.cos(state["direction"])[..., None]
        sin = torch.sin(state["direction"])[..., None]
        blocks[0], blocks[1] = (cos * blocks[0] + sin * blocks[1],
                                cos * blocks[1] - sin * blocks[0])
    blocks += [gather(role), gather(playing.to(torch.float32))]
    obs = torch.where(seen[:, :, None, :], torch.stack(blocks, dim=2), 0.0).reshape(G, A, -1)
    time = state["t"].to(torch.float32) / _const(float(params.episode_length), x)
    extra = [torch.where(playing, time[:, None], 0.0)]
    if params.observe_own_state:
        length = _const(params.grid_length, x)
        own = [x / length, state["y"] / length, torch.cos(state["direction"]),
               torch.sin(state["direction"]), state["speed"] / _const(params.speed_scale, x)]
        extra += [torch.where(playing, value, 0.0) for value in own]
    if params.observe_own_role:
        own_seen = playing if not params.use_full_observation else torch.ones_like(playing)
        extra.append(torch.where(own_seen, role, 0.0))
    return torch.cat([obs, torch.stack(extra, dim=2)], dim=2)


TAGGER_COLOUR, RUNNER_COLOUR, TAGGED_COLOUR = drawing.RED, drawing.BLUE, drawing.GREY


def draw_tag(x: np.ndarray, y: np.ndarray, grid_length: float, num_taggers: int,
             in_game: np.ndarray, time: int = 0, episode_length: int = 1,
             size: int = 400) -> np.ndarray:
    """One continuous-Tag game: taggers red, runners blue, a tagged runner a grey cross, a
    time bar along the bottom. ``x``, ``y``, ``in_game``: ``(A,)``. Returns ``(size, size,
    3)`` uint8, y pointing up."""
    frame = drawing.canvas(size)
    margin = 10
    scale = (size - 2 * margin) / grid_length
    frame[margin:-margin, [margin, size - margin - 1]] = drawing.GRID
    frame[[margin, size - margin - 1], margin:-margin] = drawing.GRID
    px = margin + np.asarray(x, dtype=np.float64) * scale
    py = size - margin - np.asarray(y, dtype=np.float64) * scale
    # Runners first, so taggers stay visible on top of them.
    for i in list(range(num_taggers, len(px))) + list(range(num_taggers)):
        if i < num_taggers:
            drawing.disc(frame, px[i], py[i], 7, TAGGER_COLOUR)
        elif in_game[i]:
            drawing.disc(frame, px[i], py[i], 5, RUNNER_COLOUR)
        else:
            drawing.cross(frame, px[i], py[i], 4, TAGGED_COLOUR)
    drawing.time_bar(frame, time, episode_length)
    return frame


def render_frame(params: TagParams, game: dict[str, np.ndarray]) -> np.ndarray:
    """``(H, W, 3)`` uint8 picture of one game (:func:`draw_tag`)."""
    return draw_tag(game["x"], game["y"], params.grid_length, params.num_taggers,
                    game["in_game"] != 0, time=int(game["t"]), episode_length=params.episode_length)


# -- the kernel binding of cuda_src/tag.cu (its launch rules: tag_launch.py) --


def _scan_helpers(params: TagParams, launch: GameLaunch) -> int:
    return launch.threads_per_agent - 1


def _scan_split(params: TagParams, launch: GameLaunch) -> int:
    """Part ``p`` of an agent's scan takes candidates ``[p * split, (p + 1) * split)``."""
    return -(-params.num_agents // launch.threads_per_agent)


def _num_games(params: TagParams, launch: GameLaunch) -> int:
    return launch.num_games


def _packed_games(params: TagParams, launch: GameLaunch) -> int:
    """Games a block of the packed step holds (:func:`packed_step_kernel`; 1: not packed)."""
    return launch.games_per_block


KERNEL_CONSTANTS = tuple(KernelConstant(name, kind, source) for name, kind, source in (
    ("num_agents", "i", "num_agents"),
    ("num_taggers", "i", "num_taggers"),
    ("episode_length", "i", "episode_length"),
    ("num_acceleration_actions", "i", "num_acceleration_actions"),
    ("num_turn_actions", "i", "num_turn_actions"),
    ("full_observation", "i", "use_full_observation"),
    ("own_role", "i", "observe_own_role"),
    ("own_state", "i", "observe_own_state"),
    ("egocentric", "i", "egocentric"),
    ("num_observed", "i", "num_observed"),
    ("exits", "i", "runner_exits_game_after_tagged"),
    ("fixed_start", "i", "fixed_start_positions"),
    ("obs_dim", "i", "obs_dim"),
    ("grid_length", "f", "grid_length"),
    ("vmax_tagger", "f", "max_speed_tagger"),
    ("vmax_runner", "f", "max_speed_runner"),
    ("tag_threshold", "f", "tag_threshold"),
    ("position_scale", "f", "position_scale"),
    ("speed_scale", "f", "speed_scale"),
    ("two_pi", "f", TWO_PI),
    ("half_pi", "f", HALF_PI),
    ("edge_hit_penalty", "f", "edge_hit_penalty"),
    ("step_tagger", "f", "step_penalty_for_tagger"),
    ("step_runner", "f", "step_reward_for_runner"),
    ("tag_reward", "f", "tag_reward_for_tagger"),
    ("tag_penalty", "f", "tag_penalty_for_runner"),
    ("end_reward", "f", "end_of_game_reward_for_runner"),
    ("episode_length_f", "f", "episode_length"),
    ("scan_helpers", "i", _scan_helpers),
    ("scan_split", "i", _scan_split),
    ("num_games", "i", _num_games),
    ("packed_games", "i", _packed_games),
))
"""``TAG_CONSTS`` of ``tag.cu``, field by field: (C name, kind, the params' attribute)."""

KERNELS = tuple(f"tag_run_{suffix}{options}" for options in ("", tag_launch.OPTIONS_SUFFIX)
                for suffix in ("full", "k4", "k8", "k10", "k16", "k32", "k4_wide", "k8_wide",
                               "k10_wide", "k16_wide", "k32_wide", "k4_helpers", "k8_helpers",
                               "k10_helpers", "k16_helpers"))
"""Every kernel of ``tag.cu``: one per observation layout (and scan form), so each keeps
only the registers it needs, and each twice: without and with the observation options
(``observe_own_state``, ``egocentric``: ``_options``, :func:`tag_launch.kernel_name`)."""


def kernel_flags(kernel: str) -> tuple[str, ...]:
    """The ``-D`` flags that build only ``kernel`` of ``tag.cu`` (and its step twins): it
    holds thirty variants of one template, and compiling fifteen of them made a first Tag
    env wait 26 s (NVRTC on the H200 machine) for the one it launches."""
    layout = kernel.removeprefix("tag_run_")
    if layout.endswith(tag_launch.OPTIONS_SUFFIX):
        return ("-DTAG_ONLY", f"-DTAG_ONLY_{layout.removesuffix(tag_launch.OPTIONS_SUFFIX)}",
                "-DTAG_ONLY_OPTIONS")
    return ("-DTAG_ONLY", f"-DTAG_ONLY_{layout}")


def kernel_buffers(params: TagParams, games: int, device: torch.device,
                   visible: torch.Tensor) -> list[torch.Tensor]:
    """``TagBuffers`` after the common five: the per-game counters ``game_bad``,
    ``runners_left``, ``game_ended`` ``(G,)``, ``tag_count`` ``(G, T)`` (int32 scratch),
    ``visible``, and the action tables."""
    def scratch(*shape: int) -> torch.Tensor:
        return torch.zeros(shape, dtype=torch.int32, device=device)

    return [scratch(games), scratch(games), scratch(games), scratch(games, params.num_taggers),
            visible, torch.as_tensor(params.acceleration_table, device=device),
            torch.as_tensor(params.turn_table, device=device)]


def check_kernel_params(params: TagParams) -> None:
    if not params.use_full_observation and params.num_other_agents_observed > MAX_OBSERVED:
        raise ValueError(f"the CUDA kernel observes at most {MAX_OBSERVED} others; "
                         f"num_other_agents_observed={params.num_other_agents_observed}")


KERNEL_BINDING = GameKernelBinding(
    constants=KERNEL_CONSTANTS,
    state_fields=("x", "y", "speed", "direction", "acceleration", "in_game", "t"),
    buffers=kernel_buffers,
    kernel_name=tag_launch.kernel_name,
    kernels=KERNELS,
    kernel_flags=kernel_flags,
    shared_bytes=tag_launch.shared_bytes,
    threads_per_agent=tag_launch.threads_per_agent,
    check_params=check_kernel_params,
    one_block_step=tag_launch.one_block_step_kernel,
    packed_step=tag_launch.packed_step_kernel,
)


DEFINITION = MultiAgentDefinition(
    name="tag",
    params_type=TagParams,
    agent_fields=AGENT_FIELDS,
    game_fields=GAME_FIELDS,
    roles=roles,
    observation_space=observation_space,
    action_space=action_space,
    reset=reset,
    step=step,
    observe=observe,
    in_game=in_game,
    role_names=ROLES,
    reset_draws_per_agent=3,
    same_start_every_episode=same_start_every_episode,
    presets=("warpdrive_training",),
    render_frame=render_frame,
    kernel_binding=KERNEL_BINDING,
)
