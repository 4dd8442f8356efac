"""Frames for the classic-control envs, drawn by Gymnasium's own renderers (pygame).

Each env definition gets a ``render_frame(params, state_values)`` from
:func:`gymnasium_renderer`: it writes one env's state into a cached Gymnasium env
created with ``render_mode="rgb_array"`` and returns that env's frame, so our pictures
are exactly Gymnasium's. The renderer is a small frozen dataclass, not a closure, so an
env definition (and with it an env) pickles.

pygame comes with the ``render`` extra (``gymnasium[classic-control]``); without it,
drawing raises :class:`gymnasium.error.DependencyNotInstalled` naming that extra.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium.error import DependencyNotInstalled

RENDER_EXTRA_HINT = "pip install 'gpu-vecenv[render]'"
"""How to get every library rendering needs (pygame through gymnasium[classic-control],
Pillow for GIFs)."""

_cache: dict[str, Any] = {}


@contextlib.contextmanager
def headless_sdl() -> Iterator[None]:
    """Run pygame's display set-up on SDL's ``dummy`` video driver unless the user chose
    a driver (``SDL_VIDEODRIVER``).

    Gymnasium's renderers initialise pygame's display even for ``rgb_array`` frames; on
    a machine without a desktop session SDL then prints ``error: XDG_RUNTIME_DIR is
    invalid`` while it looks for a Wayland server it will not use. Off-screen frames need
    no video driver, so the dummy one is right for them. The variable is restored
    afterwards, so a window opened later (``render_mode="human"``) gets a real driver.
    """
    if "SDL_VIDEODRIVER" in os.environ:
        yield
        return
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    try:
        yield
    finally:
        os.environ.pop("SDL_VIDEODRIVER", None)


def require_pygame() -> None:
    """Raise ``DependencyNotInstalled`` (naming the ``render`` extra) if pygame is missing."""
    try:
        importlib.import_module("pygame")
    except ImportError:
        raise DependencyNotInstalled(
            f"rendering needs pygame, which is not installed: {RENDER_EXTRA_HINT}"
        ) from None


@dataclass(frozen=True)
class GymnasiumRenderer:
    """A ``render_frame`` that draws with Gymnasium's env at ``entry_point``
    (``"module:Class"``), whose ``state`` attribute holds ``fields`` in order.

    Called as ``renderer(params, values)`` with ``values`` one env's state as floats;
    returns the ``(H, W, 3)`` uint8 frame Gymnasium draws for that state.
    """

    entry_point: str
    fields: tuple[str, ...]

    def __call__(self, params: Any, values: dict[str, float]) -> np.ndarray:
        env = _gymnasium_env(self.entry_point)
        env.state = np.array([values[f] for f in self.fields], dtype=np.float64)
        with headless_sdl():
            return env.render()


def gymnasium_renderer(entry_point: str, fields: Sequence[str]) -> GymnasiumRenderer:
    """The :class:`GymnasiumRenderer` of Gymnasium's env at ``entry_point``."""
    return GymnasiumRenderer(entry_point, tuple(fields))


def _gymnasium_env(entry_point: str) -> Any:
    env = _cache.get(entry_point)
    if env is None:
        require_pygame()
        module_name, class_name = entry_point.split(":")
        env_cls = getattr(importlib.import_module(module_name), class_name)
        env = env_cls(render_mode="rgb_array")
        env.reset(seed=0)
        _cache[entry_point] = env
    return env


RENDER_MODES = ["human", "rgb_array"]
"""What an env that can draw itself supports (``metadata["render_modes"]``)."""


def check_render_mode(render_mode: str | None, env_name: str, can_draw: bool) -> list[str]:
    """The env's ``metadata["render_modes"]``: :data:`RENDER_MODES` if it ``can_draw``
    (has a ``render_frame``), else none; raises ``ValueError`` if ``render_mode`` is not
    ``None`` or one of them."""
    modes = list(RENDER_MODES) if can_draw else []
    if render_mode is None or render_mode in modes:
        return modes
    if not can_draw:
        raise ValueError(
            f"{env_name} cannot render (its definition has no render_frame), so "
            f"render_mode must be None, got {render_mode!r}"
        )
    raise ValueError(f"render_mode must be None or one of {modes}, got {render_mode!r}")
