"""GIFs of whole episodes of a multi-agent env: :func:`record_episode`.

Plays one game with a policy (random actions by default), draws it with the env's
``render_frame`` and writes a GIF with :func:`gpu_vecenv.gif.save_gif` (needs Pillow:
``pip install 'gpu-vecenv[render]'``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_vecenv.gif import check_gif_writer, save_gif


def record_episode(
    env_id: str,
    path: str | Path,
    policy: Callable[[Any], Any] | None = None,
    seed: int = 0,
    fps: float | None = None,
    max_steps: int | None = None,
    **env_kwargs: Any,
) -> Path:
    """Play one game of ``env_id`` and write it to ``path`` as a GIF.

    Args:
        env_id: a multi-agent id, e.g. ``"GPUTag-v0"`` or ``"GPUTagGrid-v0"``.
        path: the GIF file.
        policy: ``obs (num_agents, obs_dim) tensor -> actions`` for every agent of the
            game (a tensor or array in agent order); default: uniform random actions.
        seed: the game's seed.
        fps: frames per second of the GIF (default: the env's ``render_fps``).
        max_steps: stop earlier than the game's end.
        **env_kwargs: device, backend, preset, env params.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    from gpu_vecenv.entry_points import make_vec

    check_gif_writer()
    env = make_vec(env_id, 1, autoreset_mode="NextStep", render_mode="rgb_array",
                   **env_kwargs)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    frames = [env.render()[0]]
    done = None
    steps = 0
    while max_steps is None or steps < max_steps:
        actions = env.action_space.sample() if policy is None else policy(obs)
        obs, _, terminated, truncated, _ = env.step(actions)
        frames.append(env.render()[0])
        steps += 1
        # Every slot reports exactly one done per game, the last ones when the game ends.
        done = terminated | truncated if done is None else done | terminated | truncated
        if bool(done.all()):
            break
    env.close()
    return save_gif(frames, path, env.metadata["render_fps"] if fps is None else fps)
