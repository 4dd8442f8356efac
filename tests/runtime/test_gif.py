"""The one GIF writer: frames last ``1000 / fps`` ms (GIF's 10 ms steps), read back with
Pillow; Tag's recorded episodes play at the env's ``render_fps``."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from gymnasium.error import DependencyNotInstalled
from PIL import Image, ImageSequence

from gpu_vecenv.gif import frame_duration_ms, save_gif
from gpu_vecenv.tag_render import record_episode


def gif_durations(path) -> list[int]:
    """Milliseconds of every frame stored in the GIF at ``path``."""
    with Image.open(path) as image:
        return [frame.info["duration"] for frame in ImageSequence.Iterator(image)]


@pytest.mark.parametrize(
    "fps, ms", [(50, 20), (30, 30), (15, 70), (10, 100), (4, 250), (60, 20), (1000, 20)]
)
def test_frame_duration_is_the_nearest_playable_gif_delay(fps, ms):
    assert frame_duration_ms(fps) == ms


def test_saved_frames_and_durations_read_back(tmp_path):
    frames = [np.full((8, 12, 3), 40 * i, dtype=np.uint8) for i in range(5)]
    path = save_gif(frames, tmp_path / "sub" / "ramp.gif", fps=50)
    assert gif_durations(path) == [20] * 5
    with Image.open(path) as image:
        assert image.info["loop"] == 0 and image.size == (12, 8)
        image.seek(3)
        assert np.asarray(image.convert("RGB"))[0, 0].tolist() == [120, 120, 120]
    with pytest.raises(ValueError, match="fps must be > 0"):
        save_gif(frames, tmp_path / "x.gif", fps=0)
    with pytest.raises(ValueError, match="no frames"):
        save_gif([], tmp_path / "x.gif")


def test_tag_episode_plays_at_render_fps(tmp_path):
    path = record_episode(
        "GPUTag-v0", tmp_path / "tag.gif", device="cpu", num_runners=3, episode_length=6
    )
    assert gif_durations(path) == [100] * 7  # Tag's render_fps is 10


def test_missing_pillow_names_the_render_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(
        DependencyNotInstalled,
        match=r"needs Pillow, which is not installed: pip install "
        r"'gpu-vecenv\[render\]'",
    ):
        save_gif([np.zeros((2, 2, 3), np.uint8)], tmp_path / "x.gif")
