"""RecordVideo: which frames go into which video, for a chosen env, in both autoreset
modes; the GIF written; clear errors."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from PIL import Image

import gpu_vecenv
from gpu_vecenv.wrappers import RecordVideo, record_video


@pytest.fixture
def written(monkeypatch):
    """Videos written, as ``{file name: frames}``, instead of files."""
    videos: dict[str, list[np.ndarray]] = {}

    def fake_write(frames, path, fps):
        videos[path.rsplit("/", 1)[-1]] = list(frames)

    monkeypatch.setattr(record_video, "write_video", fake_write)
    return videos


def cartpole(mode=AutoresetMode.NEXT_STEP, **kwargs):
    return gpu_vecenv.make_vec(
        "GPUCartPole-v1",
        3,
        device="cpu",
        render_mode="rgb_array",
        autoreset_mode=mode,
        max_episode_steps=12,
        **kwargs,
    )


def run(envs, steps):
    # env 0 always pushes left and falls at step 9; envs 1, 2 alternate and are cut by
    # the time limit at step 12 (then 24 or 25)
    for t in range(1, steps + 1):
        envs.step(torch.tensor([0, t % 2, t % 2]))


@pytest.mark.parametrize(
    ("mode", "frames"),
    [(AutoresetMode.NEXT_STEP, [13, 13, 1]), (AutoresetMode.SAME_STEP, [12, 12, 3])],
)
def test_whole_episodes_of_the_chosen_env(tmp_path, written, mode, frames):
    # NEXT_STEP: reset frame + 12 steps, the last frame included; the step after the
    # episode is the next one's reset frame. SAME_STEP: the last frame is already the
    # next episode's first (as in Gymnasium).
    env = cartpole(mode, render_env_indices=(0, 2))
    envs = RecordVideo(env, str(tmp_path), env_index=2, episode_trigger=lambda e: True)
    envs.reset(seed=0)
    first = env.render()[1]
    run(envs, 26)
    envs.close()
    names = [f"rl-video-episode-{i}.gif" for i in range(3)]
    assert sorted(written) == names
    assert [len(written[n]) for n in names] == frames
    np.testing.assert_array_equal(written[names[0]][0], first)  # env 2's frame, not env 0's
    assert envs.video_paths == [str(tmp_path / n) for n in names]


def test_default_trigger_and_step_trigger(tmp_path, written):
    # env 0 (the default) falls at steps 9, 19, 29, 39; episodes 0, 1, 8, ... are recorded
    envs = RecordVideo(cartpole(), str(tmp_path))
    assert envs.env_index == 0
    envs.reset(seed=0)
    run(envs, 40)
    envs.close()
    assert sorted(written) == ["rl-video-episode-0.gif", "rl-video-episode-1.gif"]
    assert len(written["rl-video-episode-1.gif"]) == 10

    written.clear()
    envs = RecordVideo(
        cartpole(),
        str(tmp_path),
        step_trigger=lambda s: s in (3, 30),
        video_length=4,
        name_prefix="clip",
    )
    envs.reset(seed=0)
    run(envs, 40)
    assert {n: len(f) for n, f in written.items()} == {"clip-step-3.gif": 4, "clip-step-30.gif": 4}


def test_writes_a_gif_at_the_env_fps(tmp_path):
    envs = RecordVideo(cartpole(), str(tmp_path), video_length=5, step_trigger=lambda s: s == 0)
    envs.reset(seed=0)
    run(envs, 6)
    with Image.open(envs.video_paths[0]) as gif:
        # pillow merges equal neighbouring frames and adds up their durations
        durations = []
        for i in range(gif.n_frames):
            gif.seek(i)
            durations.append(gif.info["duration"])
    assert envs.frames_per_sec == 50  # CartPole's render_fps
    assert sum(durations) == pytest.approx(5 * 20)


def test_tag_records_whole_games(tmp_path, written):
    env = gpu_vecenv.make_vec(
        "GPUTag-v0", 2, device="cpu", render_mode="rgb_array", render_game=1, episode_length=5
    )
    envs = RecordVideo(env, str(tmp_path), episode_trigger=lambda e: True)
    assert envs.env_index == env.num_agents  # agent 0 (a tagger) of game 1
    envs.reset(seed=0)
    for _ in range(12):
        envs.step(torch.zeros(env.num_envs, 2, dtype=torch.int64))
    envs.close()
    assert [len(written[f"rl-video-episode-{i}.gif"]) for i in range(2)] == [6, 6]


def test_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        RecordVideo(gpu_vecenv.make_vec("GPUCartPole-v1", 2, device="cpu"), str(tmp_path))
    with pytest.raises(ValueError, match=r"render_env_indices=\(2,\)"):
        RecordVideo(cartpole(), str(tmp_path), env_index=2)
    with pytest.raises(ValueError, match=r"env_index must be an int in \[0, 3\)"):
        RecordVideo(cartpole(), str(tmp_path), env_index=3)
    tag = gpu_vecenv.make_vec("GPUTag-v0", 2, device="cpu", render_mode="rgb_array")
    with pytest.raises(ValueError, match="render_game=1"):
        RecordVideo(tag, str(tmp_path), env_index=tag.num_agents + 1)
    with pytest.raises(ValueError, match="video_format"):
        RecordVideo(cartpole(), str(tmp_path), video_format="avi")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "imageio_ffmpeg" else find_spec(name, *a),
    )
    with pytest.raises(gym.error.DependencyNotInstalled, match="imageio-ffmpeg"):
        RecordVideo(cartpole(), str(tmp_path), video_format="mp4")
