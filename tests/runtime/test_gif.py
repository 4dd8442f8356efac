"""The one GIF writer: a GIF at ``fps`` lasts ``frames / fps`` seconds to within half a
centisecond (GIF's delays are whole centiseconds: the rounding is spread over the frames),
read back with Pillow; Tag's recorded episodes play at the env's ``render_fps``."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from gymnasium.error import DependencyNotInstalled
from PIL import Image, ImageSequence

from gpu_vecenv.gif import gif_schedule, save_gif
from gpu_vecenv.tag_render import record_episode


def gif_durations(path) -> list[int]:
    """Milliseconds of every frame stored in the GIF at ``path``."""
    with Image.open(path) as image:
        return [frame.info["duration"] for frame in ImageSequence.Iterator(image)]


@pytest.mark.parametrize(
    "fps, first_delays",
    [(50, [2, 2, 2]), (30, [3, 4, 3]), (15, [7, 6, 7]), (10, [10, 10, 10]), (4, [25, 25, 25]),
     (29.97, [3, 4, 3])],
)
@pytest.mark.parametrize("frames", [1, 2, 3, 7, 200, 1001])
def test_the_gif_lasts_frames_over_fps(fps, first_delays, frames):
    kept, delays = gif_schedule(frames, fps)
    assert kept == list(range(frames))  # 50 fps or less: every frame shown
    assert delays[:3] == first_delays[:frames]
    # the whole GIF lasts frames / fps to within half a centisecond, however long
    assert abs(sum(delays) - 100 * frames / fps) <= 0.5
    # and so does every prefix: no drift within the GIF
    for n in range(1, frames + 1):
        assert abs(sum(delays[:n]) - 100 * n / fps) <= 0.5
    assert min(delays) >= 2


@pytest.mark.parametrize("fps", [60, 100, 1000])
def test_above_50_fps_frames_are_dropped_not_slowed(fps):
    kept, delays = gif_schedule(600, fps)
    assert min(delays) >= 2 and len(kept) == len(delays) < 600
    assert kept[0] == 0 and kept == sorted(set(kept))
    assert abs(sum(delays) - 100 * 600 / fps) <= 0.5  # real time


def test_pendulum_at_30_fps_plays_6_67_seconds(tmp_path):
    # 200 distinct frames (Pillow merges a frame identical to the one before it)
    frames = [np.full((4, 4, 3), i, dtype=np.uint8) for i in range(200)]
    durations = gif_durations(save_gif(frames, tmp_path / "pendulum.gif", fps=30))
    assert len(durations) == 200 and set(durations) == {30, 40}
    assert sum(durations) == 6670  # 200 / 30 s, to the centisecond (was 6,000: 30 ms each)


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
