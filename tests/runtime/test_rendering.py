"""Render modes: Gymnasium's metadata conventions, ``human`` windows (on SDL's dummy
driver here), a missing pygame named with the extra to install, and quiet headless
``rgb_array`` frames."""

from __future__ import annotations

import os
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.error import DependencyNotInstalled

from gpu_vecenv import rendering
from gpu_vecenv.entry_points import make_vec
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING
from tests.tag.makers import make_tag


@pytest.fixture
def dummy_display(monkeypatch):
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    import pygame

    yield pygame
    pygame.display.quit()


def _window_pixels(pygame) -> np.ndarray:
    return pygame.surfarray.array3d(pygame.display.get_surface()).swapaxes(0, 1)


def test_metadata_follows_gymnasium():
    env = make_vec("GPUAcrobot-v1", 2, device="cpu")
    assert env.metadata["render_modes"] == ["human", "rgb_array"]
    assert env.metadata["render_fps"] == 15  # Gymnasium's Acrobot
    assert make_tag(1, device="cpu").metadata["render_fps"] == 10
    assert gym.make("GPUPendulum-v1").metadata["render_modes"] == ["human", "rgb_array"]
    assert GpuVectorEnv(COUNTING, 2, device="cpu").metadata["render_modes"] == []


def test_unsupported_render_modes_are_refused():
    with pytest.raises(
        ValueError,
        match=r"render_mode must be None or one of \['human', "
        r"'rgb_array'\], got 'ansi'",
    ):
        make_vec("GPUCartPole-v1", 2, device="cpu", render_mode="ansi")
    with pytest.raises(ValueError, match="counting cannot render .*got 'human'"):
        GpuVectorEnv(COUNTING, 2, device="cpu", render_mode="human")
    with pytest.raises(ValueError, match="render_mode"):
        make_tag(1, device="cpu", render_mode="rgb_array_list")


def test_human_window_shows_the_rgb_array_frame_after_each_step(dummy_display):
    pygame = dummy_display
    env = make_vec("GPUCartPole-v1", 3, device="cpu", render_mode="human", render_env_indices=(2,))
    drawn = make_vec(
        "GPUCartPole-v1", 3, device="cpu", render_mode="rgb_array", render_env_indices=(2,)
    )
    env.reset(seed=0)
    assert pygame.display.get_surface().get_size() == (600, 400)
    for action in ([0, 1, 1], [1, 1, 0]):
        env.step(np.array(action))
        drawn.set_state(env.get_state())
        np.testing.assert_array_equal(_window_pixels(pygame), drawn.render()[0])
    assert env.render() is None  # human mode draws and returns nothing, as Gymnasium's
    env.close()
    assert pygame.display.get_surface() is None


def test_human_tag_and_single_env(dummy_display):
    pygame = dummy_display
    tag = make_tag(2, device="cpu", render_mode="human", render_game=1, num_runners=2)
    tag.reset(seed=0)
    tag.step(tag.action_space.sample())
    state = {k: v[1:] for k, v in tag.get_state().items()}
    one = make_tag(1, device="cpu", render_mode="rgb_array", num_runners=2)
    one.set_state(state)
    np.testing.assert_array_equal(_window_pixels(pygame), one.render()[0])
    tag.close()

    single = gym.make("GPUMountainCar-v0", render_mode="human")
    single.reset(seed=0)
    single.step(2)
    assert single.render() is None and pygame.display.get_surface().get_size() == (600, 400)
    single.close()


def test_missing_pygame_names_the_render_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pygame", None)  # import pygame -> ImportError
    monkeypatch.setattr(rendering, "_cache", {})
    env = make_vec("GPUCartPole-v1", 1, device="cpu", render_mode="rgb_array")
    env.reset(seed=0)
    hint = r"needs pygame, which is not installed: pip install 'gpu-vecenv\[render\]'"
    with pytest.raises(DependencyNotInstalled, match=hint):
        env.render()
    with pytest.raises(DependencyNotInstalled, match=hint):
        make_vec("GPUTag-v0", 1, device="cpu", render_mode="human")


_HEADLESS_SCRIPT = """
import os, numpy as np, gpu_vecenv, pygame
env = gpu_vecenv.make_vec("GPUPendulum-v1", 1, device="cpu", render_mode="rgb_array")
env.reset(seed=0)
frame = env.render()[0]
print(frame.shape, os.environ.get("SDL_VIDEODRIVER"), pygame.display.get_driver())
human = gpu_vecenv.make_vec("GPUCartPole-v1", 1, device="cpu", render_mode="human")
human.reset(seed=0)
human.step(np.array([1]))
print(pygame.display.get_driver(), pygame.display.get_surface().get_size())
"""


def _headless_run(**env) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")
    }
    return subprocess.run(
        [sys.executable, "-c", _HEADLESS_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **env},
    )


def test_headless_rendering_prints_nothing_and_keeps_the_users_driver():
    proc = _headless_run()
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # no "error: XDG_RUNTIME_DIR is invalid" from SDL
    # rgb_array frames started pygame on the dummy driver and left the variable unset;
    # the human window (no display here) opened on the dummy driver too.
    assert proc.stdout.splitlines() == ["(500, 500, 3) None dummy", "dummy (600, 400)"]
    proc = _headless_run(SDL_VIDEODRIVER="offscreen")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["(500, 500, 3) offscreen offscreen", "offscreen (600, 400)"]


def test_pickled_renderer_draws_the_same_frame():
    import pickle

    env = make_vec("GPUAcrobot-v1", 1, device="cpu", render_mode="rgb_array")
    env.reset(seed=2)
    twin = pickle.loads(pickle.dumps(env))
    assert isinstance(env.definition.render_frame, rendering.GymnasiumRenderer)
    np.testing.assert_array_equal(twin.render()[0], env.render()[0])
    assert torch.equal(twin.step(np.array([2]))[0], env.step(np.array([2]))[0])
