"""Frames for the classic-control envs, drawn by Gymnasium's own renderers (pygame).

Each env definition gets a ``render_frame(params, state_values)`` from
:func:`gymnasium_renderer`: it writes one env's state into a cached Gymnasium env
created with ``render_mode="rgb_array"`` and returns that env's frame, so our pictures
are exactly Gymnasium's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

_cache: dict[str, Any] = {}


def gymnasium_renderer(
    entry_point: str, fields: Sequence[str]
) -> Callable[[Any, dict[str, float]], np.ndarray]:
    """A ``render_frame`` that draws with Gymnasium's env at ``entry_point``
    (``"module:Class"``), whose ``state`` attribute holds ``fields`` in order."""

    def render_frame(params: Any, values: dict[str, float]) -> np.ndarray:
        env = _cache.get(entry_point)
        if env is None:
            module_name, class_name = entry_point.split(":")
            env_cls = getattr(importlib.import_module(module_name), class_name)
            env = env_cls(render_mode="rgb_array")
            env.reset(seed=0)
            _cache[entry_point] = env
        env.state = np.array([values[f] for f in fields], dtype=np.float64)
        return env.render()

    return render_frame
