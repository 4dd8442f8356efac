"""GIFs of rendered frames: the one writer behind ``gpu-vecenv eval --gif`` and
:func:`gpu_vecenv.tag_render.record_episode`.

Written with Pillow (the ``render`` extra), whose ``duration`` is in milliseconds per
frame. GIF stores delays in whole hundredths of a second, and browsers play delays under
two hundredths at ten, so a frame lasts ``1000 / fps`` ms rounded to 10 ms, and at least
20 ms (``fps`` above 50 plays at 50).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from gymnasium.error import DependencyNotInstalled

from gpu_vecenv.rendering import RENDER_EXTRA_HINT


def frame_duration_ms(fps: float) -> int:
    """Milliseconds each frame of a GIF at ``fps`` frames per second lasts."""
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps!r}")
    return max(20, 10 * round(100 / fps))


def check_gif_writer() -> None:
    """Raise ``DependencyNotInstalled`` (naming the ``render`` extra) if Pillow is missing;
    call before a long run whose GIF is written at its end."""
    _pillow_image()


def save_gif(frames: Sequence[np.ndarray], path: str | Path, fps: float = 10) -> Path:
    """Write ``frames`` (``(H, W, 3)`` uint8 each) as a looping GIF playing at ``fps``.

    Creates ``path``'s folder if needed; returns ``path`` as a :class:`~pathlib.Path`.
    """
    image = _pillow_image()
    duration = frame_duration_ms(fps)
    if len(frames) == 0:
        raise ValueError("no frames to write")
    images = [image.fromarray(np.asarray(frame, dtype=np.uint8)) for frame in frames]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    images[0].save(
        path, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0
    )
    return path


def _pillow_image():
    try:
        from PIL import Image
    except ImportError:
        raise DependencyNotInstalled(
            f"writing GIFs needs Pillow, which is not installed: {RENDER_EXTRA_HINT}"
        ) from None
    return Image
