"""GIFs of rendered frames: the one writer behind ``gpu-vecenv eval --gif`` and
:func:`gpu_vecenv.tag_render.record_episode`.

Written with Pillow (the ``render`` extra). GIF stores each frame's delay in whole
hundredths of a second (centiseconds), and browsers play delays under two centiseconds at
ten. So a GIF at ``fps`` frames per second cannot give every frame ``100 / fps`` cs (30 fps
is 3.33 cs): :func:`gif_schedule` rounds the *times at which frames start* instead of each
delay, giving delays of 3 and 4 cs at 30 fps, so that the whole GIF lasts
``100 * frames / fps`` cs to within half a centisecond (Pendulum's 200 frames at 30 fps:
6.67 s, not 6.0 s). Above 50 fps, where a frame would last under 2 cs, frames are dropped
rather than slowed down, so the GIF still plays in real time.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
from gymnasium.error import DependencyNotInstalled

from gpu_vecenv.env_ids import load_definition
from gpu_vecenv.rendering import RENDER_EXTRA_HINT

MIN_DELAY_CS = 2
"""The shortest GIF delay browsers honour (shorter ones play at 10 cs)."""


def gif_schedule(num_frames: int, fps: float) -> tuple[list[int], list[int]]:
    """``(kept, delays)``: the indices of the frames a GIF at ``fps`` shows and how long
    each lasts, in centiseconds.

    Frame ``i`` starts at ``round(100 * i / fps)`` cs, so the delays add up to
    ``round(100 * num_frames / fps)`` (exact to half a centisecond, however many frames).
    A frame that would start less than :data:`MIN_DELAY_CS` after the last one shown, or
    before the end, is dropped (only above 50 fps), so every delay is at least that long
    and the total stays exact (unless all frames together last under 2 cs).
    """
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps!r}")
    if num_frames < 1:
        raise ValueError("no frames to write")
    per_frame = Fraction(100) / Fraction(fps)  # exact, also for a float fps
    starts = [round(i * per_frame) for i in range(num_frames + 1)]
    kept = [0]
    end = starts[num_frames]
    for i in range(1, num_frames):
        if starts[i] - starts[kept[-1]] >= MIN_DELAY_CS and end - starts[i] >= MIN_DELAY_CS:
            kept.append(i)
    delays = [b - a for a, b in zip([starts[i] for i in kept], [starts[i] for i in kept[1:]],
                                    strict=False)]
    delays.append(max(MIN_DELAY_CS, end - starts[kept[-1]]))
    return kept, delays


def check_gif_writer() -> None:
    """Raise ``DependencyNotInstalled`` (naming the ``render`` extra) if Pillow is missing;
    call before a long run whose GIF is written at its end."""
    _pillow_image()


def check_env_draws(env_id: str, option: str = "gif_path") -> None:
    """Raise ``ValueError`` if ``env_id`` draws no frames (its definition has no
    ``render_frame``), naming ``option``, the argument that asked for a GIF."""
    if getattr(load_definition(env_id), "render_frame", None) is None:
        raise ValueError(
            f"{option}: {env_id} draws no frames (its definition has no render_frame), so "
            f"there is no GIF to write; leave out {option}, or give the definition a "
            f"render_frame (docs/custom_env.md)")


def save_gif(frames: Sequence[np.ndarray], path: str | Path, fps: float = 10) -> Path:
    """Write ``frames`` (``(H, W, 3)`` uint8 each) as a looping GIF playing at ``fps``
    (timed by :func:`gif_schedule`).

    Creates ``path``'s folder if needed; returns ``path`` as a :class:`~pathlib.Path`.
    """
    image = _pillow_image()
    kept, delays = gif_schedule(len(frames), fps)
    images = [image.fromarray(np.asarray(frames[i], dtype=np.uint8)) for i in kept]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images[0].save(path, format="GIF", save_all=True, append_images=images[1:],
                   duration=[10 * d for d in delays], loop=0)
    return path


def _pillow_image():
    try:
        from PIL import Image
    except ImportError:
        raise DependencyNotInstalled(
            f"writing GIFs needs Pillow, which is not installed: {RENDER_EXTRA_HINT}"
        ) from None
    return Image
