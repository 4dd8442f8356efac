"""``render_mode="human"``: a pygame window showing an env's frames as it steps.

Gymnasium's convention: a ``human`` env draws itself after every ``reset()`` and
``step()``, paced at ``metadata["render_fps"]``, and ``render()`` returns ``None``. Our envs
draw the same ``rgb_array`` frames as always (Gymnasium's pictures for classic control,
:mod:`gpu_vecenv.tag_render` for Tag) and show them here, so one window serves every env.

Without pygame, making a ``human`` env raises ``DependencyNotInstalled`` naming the
``render`` extra. Without a display (Linux with ``DISPLAY`` and ``WAYLAND_DISPLAY`` unset,
and no ``SDL_VIDEODRIVER`` chosen) the window opens on SDL's ``dummy`` driver: nothing is
seen and nothing fails, as with Gymnasium's own envs (SDL picks an off-screen driver
there by itself, after printing ``XDG_RUNTIME_DIR is invalid``). Refusing instead would
break what works with Gymnasium's envs on a server: ``gymnasium.utils.env_checker.check_env``
makes the env in every declared render mode, and scripts written on a desktop run in CI.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

import numpy as np

from gpu_vecenv.rendering import headless_sdl, require_pygame


def has_display() -> bool:
    """Whether a window opened here can be seen, as far as can be told (a chosen
    ``SDL_VIDEODRIVER`` is the user's call; outside Linux/BSD there is a desktop)."""
    if os.environ.get("SDL_VIDEODRIVER") or not sys.platform.startswith(("linux", "freebsd")):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


class HumanWindow:
    """A window, opened on the first frame, that shows frames at most ``fps`` a second.

    Made with the env, so a missing pygame is reported before anything has run.

    Args:
        caption: the window's title.
        fps: frames per second (the env's ``render_fps``); :meth:`show` waits to keep it.
    """

    def __init__(self, caption: str, fps: int):
        require_pygame()
        self.caption = caption
        self.fps = int(fps)
        self._screen = None
        self._clock = None

    def show(self, frames: Sequence[np.ndarray]) -> None:
        """Show ``frames`` (``(H, W, 3)`` uint8 each, same size) side by side."""
        import pygame

        frame = np.concatenate(list(frames), axis=1) if len(frames) > 1 else frames[0]
        if self._screen is None:
            self._open(pygame, frame.shape[1], frame.shape[0])
        pygame.event.pump()  # an unserviced window is "not responding" to the desktop
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
        self._screen.blit(surface, (0, 0))
        pygame.display.flip()
        self._clock.tick(self.fps)

    def _open(self, pygame, width: int, height: int) -> None:
        visible = has_display()
        # Off-screen frames may have started pygame's display on the dummy driver (see
        # rendering.headless_sdl); a window that can be seen needs it restarted.
        if (
            visible
            and pygame.display.get_init()
            and pygame.display.get_driver() == "dummy"
            and os.environ.get("SDL_VIDEODRIVER") != "dummy"
        ):
            pygame.display.quit()
        with contextlib.nullcontext() if visible else headless_sdl():
            pygame.display.init()
            pygame.display.set_caption(self.caption)
            self._screen = pygame.display.set_mode((width, height))
        self._clock = pygame.time.Clock()

    @property
    def surface(self):
        """The window's pygame surface (``None`` before the first frame)."""
        return self._screen

    def close(self) -> None:
        """Close the window (a later :meth:`show` opens a new one)."""
        if self._screen is not None:
            import pygame

            pygame.display.quit()
            self._screen = self._clock = None
