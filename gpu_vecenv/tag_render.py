"""Pictures of Tag games, drawn with numpy alone, and GIFs of whole episodes.

Taggers are red, runners blue; a runner that was tagged and left the game is a grey
cross. A bar along the bottom shows ``t / episode_length``. ``record_episode`` plays one
game with a policy (random actions by default) and writes a GIF with
:func:`gpu_vecenv.gif.save_gif` (needs Pillow: ``pip install 'gpu-vecenv[render]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from gpu_vecenv.gif import check_gif_writer, save_gif

__all__ = ["draw_grid", "draw_tag", "record_episode", "save_gif"]

TAGGER = (214, 39, 40)
RUNNER = (31, 119, 180)
OUT = (150, 150, 150)
BACKGROUND = (250, 250, 250)
GRID = (225, 225, 225)
BAR = (120, 120, 120)


def _canvas(size: int) -> np.ndarray:
    frame = np.empty((size, size, 3), dtype=np.uint8)
    frame[:] = BACKGROUND
    return frame


def _disc(frame: np.ndarray, cx: float, cy: float, radius: int, colour) -> None:
    h, w = frame.shape[:2]
    x0, x1 = max(int(cx) - radius, 0), min(int(cx) + radius + 1, w)
    y0, y1 = max(int(cy) - radius, 0), min(int(cy) + radius + 1, h)
    yy, xx = np.ogrid[y0:y1, x0:x1]
    inside = (xx - cx) ** 2 + (yy - cy) ** 2 <= radius**2
    frame[y0:y1, x0:x1][inside] = colour


def _cross(frame: np.ndarray, cx: float, cy: float, radius: int, colour) -> None:
    h, w = frame.shape[:2]
    for d in range(-radius, radius + 1):
        for sign in (1, -1):
            px, py = int(round(cx + d)), int(round(cy + sign * d))
            if 0 <= px < w and 0 <= py < h:
                frame[py, px] = colour


def _time_bar(frame: np.ndarray, time: int, episode_length: int) -> None:
    size = frame.shape[1]
    filled = int(round(size * min(time / max(episode_length, 1), 1.0)))
    frame[-4:, :filled] = BAR


def draw_tag(x: np.ndarray, y: np.ndarray, grid_length: float, num_taggers: int,
             in_game: np.ndarray, time: int = 0, episode_length: int = 1,
             size: int = 400) -> np.ndarray:
    """One continuous-Tag game. ``x``, ``y``, ``in_game``: ``(A,)``. Returns ``(size, size,
    3)`` uint8, y pointing up."""
    frame = _canvas(size)
    margin = 10
    scale = (size - 2 * margin) / grid_length
    frame[margin:-margin, [margin, size - margin - 1]] = GRID
    frame[[margin, size - margin - 1], margin:-margin] = GRID
    px = margin + np.asarray(x, dtype=np.float64) * scale
    py = size - margin - np.asarray(y, dtype=np.float64) * scale
    # Runners first, so taggers stay visible on top of them.
    for i in list(range(num_taggers, len(px))) + list(range(num_taggers)):
        if i < num_taggers:
            _disc(frame, px[i], py[i], 7, TAGGER)
        elif in_game[i]:
            _disc(frame, px[i], py[i], 5, RUNNER)
        else:
            _cross(frame, px[i], py[i], 4, OUT)
    _time_bar(frame, time, episode_length)
    return frame


def draw_grid(x: np.ndarray, y: np.ndarray, grid_length: int, num_taggers: int,
              time: int = 0, episode_length: int = 1, size: int = 400) -> np.ndarray:
    """One gridworld-Tag game on its ``(L+1)²`` cells; the runner is the last agent."""
    cells = grid_length + 1
    cell = max(size // cells, 2)
    frame = _canvas(cell * cells)
    if cell >= 6:
        frame[::cell, :] = GRID
        frame[:, ::cell] = GRID
    order = [len(x) - 1] + list(range(num_taggers))
    for i in order:
        colour = RUNNER if i == len(x) - 1 else TAGGER
        row = (grid_length - int(y[i])) * cell
        col = int(x[i]) * cell
        pad = 1 if cell >= 6 else 0
        frame[row + pad:row + cell - pad, col + pad:col + cell - pad] = colour
    _time_bar(frame, time, episode_length)
    return frame


def record_episode(
    env_id: str,
    path: str | Path,
    policy: Callable[[Any], Any] | None = None,
    seed: int = 0,
    fps: float | None = None,
    max_steps: int | None = None,
    **env_kwargs: Any,
) -> Path:
    """Play one game of ``env_id`` and write it to ``path`` as a GIF.

    Args:
        env_id: ``"GPUTag-v0"`` or ``"GPUTagGrid-v0"``.
        path: the GIF file.
        policy: ``obs (num_agents, obs_dim) tensor -> actions`` for every agent of the
            game (a tensor or array in agent order); default: uniform random actions.
        seed: the game's seed.
        fps: frames per second of the GIF (default: the env's ``render_fps``).
        max_steps: stop earlier than the game's end.
        **env_kwargs: device, backend, preset, env params.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    from gpu_vecenv.registration import make_vec

    check_gif_writer()
    env = make_vec(env_id, 1, autoreset_mode="NextStep", render_mode="rgb_array",
                   **env_kwargs)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    frames = [env.render()[0]]
    steps = 0
    while max_steps is None or steps < max_steps:
        actions = env.action_space.sample() if policy is None else policy(obs)
        obs, _, terminated, truncated, _ = env.step(actions)
        frames.append(env.render()[0])
        steps += 1
        # Taggers stay in the game until it ends, so tagger 0's flags are the game's.
        if bool(terminated[0]) or bool(truncated[0]):
            break
    env.close()
    return save_gif(frames, path, env.metadata["render_fps"] if fps is None else fps)
