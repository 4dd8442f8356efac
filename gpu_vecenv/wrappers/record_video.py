"""``RecordVideo``: videos of the episodes of one chosen env of a vector env.

Gymnasium's ``gymnasium.wrappers.vector.RecordVideo`` records every env of the vector and
follows env 0's episodes; it asserts one frame per env (ours draw only the envs chosen
at construction) and writes with moviepy. This one follows Gymnasium's triggers, names
and autoreset handling for one env you choose (``env_index``) and writes GIFs (imageio +
pillow, the ``render`` extra) or MP4s (imageio-ffmpeg).

Host reads: a frame is drawn on the host, so a recorded step reads that env's state. To
follow episodes (``episode_trigger``, or ``video_length=0`` while recording) the wrapper
reads the chosen env's ``done`` flag every step: one bool, but a sync on a GPU. With only
``step_trigger`` and ``video_length > 0``, steps that are not recorded read nothing.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from gpu_vecenv.wrappers.base import TensorVectorWrapper

VIDEO_FORMATS = {"gif": ("imageio", "PIL"), "mp4": ("imageio", "imageio_ffmpeg")}


def capped_cubic_video_schedule(episode_id: int) -> bool:
    """Gymnasium's default episode trigger: episodes 0, 1, 8, 27, ..., 729, 1000, 2000, ..."""
    if episode_id < 1000:
        return int(round(episode_id ** (1.0 / 3))) ** 3 == episode_id
    return episode_id % 1000 == 0


def write_video(frames: list[np.ndarray], path: str, fps: float) -> None:
    """Write ``frames`` (``(H, W, 3)`` uint8 each) to ``path`` (``.gif``: looping, ``1/fps``
    s per frame; ``.mp4``: ``fps`` frames per second)."""
    if path.endswith(".gif"):
        import imageio.v3 as iio

        # the pillow plugin takes the frame duration in milliseconds
        iio.imwrite(path, np.stack(frames), duration=1000.0 / fps, loop=0)
    else:
        import imageio.v2 as imageio

        imageio.mimwrite(path, frames, fps=fps)


class RecordVideo(TensorVectorWrapper):
    """Record videos of episodes (or step ranges) of one env of the vector.

    Args:
        env: one of our vector envs made with ``render_mode="rgb_array"``.
        video_folder: where the videos go (created if needed).
        env_index: the env whose episodes are followed and drawn. Default: the first env
            the env draws (``render_env_indices[0]``; for Tag, agent 0, a tagger, of
            ``render_game``, so that an episode is a whole game). It must be one the env
            draws: make the env with ``render_env_indices=(k,)`` (Tag:
            ``render_game=k // num_agents``).
        episode_trigger: ``episode_id -> bool``: start recording at this episode.
        step_trigger: ``step_id -> bool``: start recording at this step. With neither
            trigger, :func:`capped_cubic_video_schedule` picks episodes (as Gymnasium).
        video_length: frames per video; 0 records whole episodes.
        name_prefix: file names are ``{name_prefix}-episode-{id}`` or ``-step-{id}``.
        fps: frames per second; default the env's ``metadata["render_fps"]`` (else 30).
        video_format: ``"gif"`` (imageio and pillow: ``pip install 'gpu-vecenv[render]'``)
            or ``"mp4"`` (also imageio-ffmpeg).

    As in Gymnasium, in SAME_STEP mode an episode's last frame is not recorded: the env
    has already reset when the step returns.
    """

    def __init__(
        self,
        env: VectorEnv,
        video_folder: str,
        env_index: int | None = None,
        episode_trigger: Callable[[int], bool] | None = None,
        step_trigger: Callable[[int], bool] | None = None,
        video_length: int = 0,
        name_prefix: str = "rl-video",
        fps: float | None = None,
        video_format: str = "gif",
    ):
        super().__init__(env)
        if env.render_mode != "rgb_array":
            raise ValueError(
                f"RecordVideo needs an env made with render_mode='rgb_array', "
                f"got render_mode={env.render_mode!r}"
            )
        if video_format not in VIDEO_FORMATS:
            raise ValueError(
                f"video_format must be one of {sorted(VIDEO_FORMATS)}, got {video_format!r}"
            )
        missing = [m for m in VIDEO_FORMATS[video_format] if importlib.util.find_spec(m) is None]
        if missing:
            extra = "pip install 'gpu-vecenv[render]'"
            if "imageio_ffmpeg" in missing:
                extra += " imageio-ffmpeg"
            raise gym.error.DependencyNotInstalled(
                f"RecordVideo: {video_format} videos need {', '.join(missing)}: {extra}"
            )
        if isinstance(video_length, bool) or not isinstance(video_length, int) or video_length < 0:
            raise ValueError(f"video_length must be an int >= 0, got {video_length!r}")
        self.env_index, self._frame_position = self._drawn_env(env_index)
        if episode_trigger is None and step_trigger is None:
            episode_trigger = capped_cubic_video_schedule
        self.episode_trigger = episode_trigger
        self.step_trigger = step_trigger
        self.video_length = video_length if video_length else math.inf
        self.name_prefix = name_prefix
        self.video_format = video_format
        self.frames_per_sec = fps if fps is not None else self.metadata.get("render_fps", 30)
        self.video_folder = os.path.abspath(video_folder)
        os.makedirs(self.video_folder, exist_ok=True)
        self.recording = False
        self.recorded_frames: list[np.ndarray] = []
        self.video_paths: list[str] = []
        self._video_name: str | None = None
        self._has_autoreset = False
        self.step_id = -1
        self.episode_id = -1

    def _drawn_env(self, env_index: int | None) -> tuple[int, int]:
        """``(env_index, position of its frame in env.render()'s tuple)``."""
        unwrapped = self.env.unwrapped
        if self._games_agents is not None:  # Tag: render() draws one game
            agents = self._games_agents[1]
            game = int(unwrapped.render_game)
            env_index = game * agents if env_index is None else env_index
            self._check_index(env_index)
            if env_index // agents != game:
                raise ValueError(
                    f"RecordVideo: slot {env_index} is in game "
                    f"{env_index // agents}, but the env draws game {game}: make "
                    f"it with render_game={env_index // agents}"
                )
            return env_index, 0
        drawn = tuple(getattr(unwrapped, "render_env_indices", range(self.num_envs)))
        env_index = drawn[0] if env_index is None else env_index
        self._check_index(env_index)
        if env_index not in drawn:
            raise ValueError(
                f"RecordVideo: the env draws envs {list(drawn)}, not "
                f"{env_index}: make it with render_env_indices=({env_index},)"
            )
        return env_index, drawn.index(env_index)

    def _check_index(self, env_index: int) -> None:
        if (
            isinstance(env_index, bool)
            or not isinstance(env_index, int)
            or not 0 <= env_index < self.num_envs
        ):
            raise ValueError(f"env_index must be an int in [0, {self.num_envs}), got {env_index!r}")

    # -- reset / step --

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env; a reset of the chosen env starts its next episode."""
        restarted = self._reset_slots(options)
        if restarted is None or bool(restarted[self.env_index]):
            self._new_episode()
        obs, info = self.env.reset(seed=seed, options=options)
        self._active_after(info)
        if self.recording:
            self._capture_frame()
        self._has_autoreset = False
        return obs, info

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step the env; start, extend or finish a video as the triggers say."""
        obs, rewards, terminations, truncations, info = self.env.step(actions)
        self.step_id += 1
        following = self.episode_trigger is not None or (
            self.recording and self.video_length == math.inf
        )
        if following:
            i = self.env_index
            done = bool(terminations[i] | truncations[i])  # the per-step host read
            if self.autoreset_mode == AutoresetMode.NEXT_STEP:
                if self._has_autoreset:  # this step reset the env
                    self._new_episode()
                self._has_autoreset = done
            elif self.autoreset_mode == AutoresetMode.SAME_STEP and done:
                self._new_episode()
        else:
            self._has_autoreset = False
        if self.step_trigger is not None and self.step_trigger(self.step_id):
            self.start_recording(f"{self.name_prefix}-step-{self.step_id}")
        if self.recording:
            self._capture_frame()
        self._active_after(info)
        return obs, rewards, terminations, truncations, info

    def _new_episode(self) -> None:
        self.episode_id += 1
        if self.recording and self.video_length == math.inf:
            self.stop_recording()
        if self.episode_trigger is not None and self.episode_trigger(self.episode_id):
            self.start_recording(f"{self.name_prefix}-episode-{self.episode_id}")

    def _capture_frame(self) -> None:
        frames = self.env.render()
        if frames is None:
            raise RuntimeError("RecordVideo: the env's render() returned None")
        self.recorded_frames.append(np.asarray(frames[self._frame_position]))
        if len(self.recorded_frames) >= self.video_length:  # Gymnasium's keeps one more
            self.stop_recording()

    # -- recordings --

    def start_recording(self, video_name: str) -> None:
        """Start a video named ``video_name`` (finishing the one in progress)."""
        if self.recording:
            self.stop_recording()
        self.recording = True
        self._video_name = video_name

    def stop_recording(self) -> None:
        """Write the video in progress to ``video_folder``; its path is appended to
        :attr:`video_paths`."""
        if not self.recording:
            raise RuntimeError("stop_recording() called, but no recording was started")
        if self.recorded_frames:
            path = os.path.join(self.video_folder, f"{self._video_name}.{self.video_format}")
            write_video(self.recorded_frames, path, self.frames_per_sec)
            self.video_paths.append(path)
        else:
            gym.logger.warn("RecordVideo: no frames to save; no video written")
        self.recorded_frames = []
        self.recording = False
        self._video_name = None

    def close(self, **kwargs: Any) -> None:
        """Write the video in progress, then close the env."""
        if self.recording:
            self.stop_recording()
        super().close(**kwargs)

    def __del__(self) -> None:
        if getattr(self, "recorded_frames", None):
            gym.logger.warn("RecordVideo: the last video was not saved; call close()")
