"""Numpy drawing primitives for pictures of games (no plotting library needed).

An env's ``render_frame`` (``envs/tag.py``: ``draw_tag``) composes these into one
``(H, W, 3)`` uint8 frame; :mod:`gpu_vecenv.multi_agent.recording` turns frames into GIFs.
"""

from __future__ import annotations

import numpy as np

RED = (214, 39, 40)
BLUE = (31, 119, 180)
GREY = (150, 150, 150)
BACKGROUND = (250, 250, 250)
GRID = (225, 225, 225)
BAR = (120, 120, 120)


def canvas(size: int) -> np.ndarray:
    """A blank ``(size, size, 3)`` uint8 frame."""
    frame = np.empty((size, size, 3), dtype=np.uint8)
    frame[:] = BACKGROUND
    return frame


def disc(frame: np.ndarray, cx: float, cy: float, radius: int, colour) -> None:
    """Fill the disc of ``radius`` pixels around ``(cx, cy)`` (clipped to the frame)."""
    h, w = frame.shape[:2]
    x0, x1 = max(int(cx) - radius, 0), min(int(cx) + radius + 1, w)
    y0, y1 = max(int(cy) - radius, 0), min(int(cy) + radius + 1, h)
    yy, xx = np.ogrid[y0:y1, x0:x1]
    inside = (xx - cx) ** 2 + (yy - cy) ** 2 <= radius**2
    frame[y0:y1, x0:x1][inside] = colour


def cross(frame: np.ndarray, cx: float, cy: float, radius: int, colour) -> None:
    """Draw an ``x`` of half-width ``radius`` pixels at ``(cx, cy)``."""
    h, w = frame.shape[:2]
    for d in range(-radius, radius + 1):
        for sign in (1, -1):
            px, py = int(round(cx + d)), int(round(cy + sign * d))
            if 0 <= px < w and 0 <= py < h:
                frame[py, px] = colour


def time_bar(frame: np.ndarray, time: int, episode_length: int) -> None:
    """A bar along the bottom, filled to ``time / episode_length``."""
    size = frame.shape[1]
    filled = int(round(size * min(time / max(episode_length, 1), 1.0)))
    frame[-4:, :filled] = BAR
