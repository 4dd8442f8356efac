"""Frames of one chosen game and GIFs of an episode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpu_vecenv.tag_render import RUNNER, TAGGER, record_episode
from tests.tag.makers import make_tag, make_tag_grid


def test_rgb_array_frame_of_the_chosen_game():
    env = make_tag(2, device="cpu", render_mode="rgb_array", render_game=1, num_runners=2)
    env.reset(seed=0)
    env.set_state({"x": torch.tensor([[1.0, 2.0, 3.0], [5.0, 5.0, 9.0]]),
                   "y": torch.tensor([[1.0, 2.0, 3.0], [5.0, 1.0, 9.0]]),
                   "in_game": torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.int32)})
    (frame,) = env.render()
    assert frame.shape == (400, 400, 3) and frame.dtype == np.uint8
    scale = 380 / 10.0
    centre = (int(400 - 10 - 5.0 * scale), int(10 + 5.0 * scale))  # tagger of game 1 (row, col)
    assert tuple(frame[centre]) == TAGGER
    assert tuple(frame[int(400 - 10 - 1.0 * scale), int(10 + 5.0 * scale)]) == RUNNER
    assert tuple(frame[int(400 - 10 - 2.0 * scale), int(10 + 2.0 * scale)]) != RUNNER  # game 0
    with pytest.warns(UserWarning, match="render_mode"):
        assert make_tag(1, device="cpu").render() is None


def test_grid_frame_and_gif(tmp_path):
    env = make_tag_grid(1, device="cpu", render_mode="rgb_array", num_taggers=2)
    env.reset(seed=0)
    (frame,) = env.render()
    assert frame.ndim == 3 and (frame == np.array(TAGGER, np.uint8)).all(-1).any()
    path = record_episode("GPUTagGrid-v0", tmp_path / "grid.gif", device="cpu", num_taggers=2,
                          max_steps=5)
    import imageio.v3 as iio

    frames = iio.imread(path)
    assert frames.shape[0] == 6
    path = record_episode("GPUTag-v0", tmp_path / "tag.gif", device="cpu", num_runners=3,
                          episode_length=8)
    assert iio.imread(path).shape[0] == 9
