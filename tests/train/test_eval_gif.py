"""``gpu-vecenv eval --gif`` as a subprocess: the GIF plays at the env's ``render_fps``,
nothing is printed on a headless machine, and a missing optional library is one line
naming the extra to install (exit 2, no traceback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.runtime.test_gif import gif_durations

_HEADLESS = {
    k: v
    for k, v in os.environ.items()
    if k not in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "SDL_VIDEODRIVER")
}


def _cli(*args, hide_module: str | None = None) -> subprocess.CompletedProcess:
    """Run ``gpu-vecenv ARGS``; ``hide_module`` is made unimportable first, as if it were
    not installed."""
    hide = f"sys.modules[{hide_module!r}] = None; " if hide_module else ""
    code = f"import sys; {hide}from gpu_vecenv.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=240,
        env=_HEADLESS,
    )


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("eval_gif") / "run"
    proc = _cli(
        "train",
        "--env",
        "GPUCartPole-v1",
        "--num-envs",
        "4",
        "--total-steps",
        "64",
        "--run-dir",
        run_dir,
        "--device",
        "cpu",
        "--no-progress",
        "--set",
        "trainer.backend=torch",
        "--set",
        "ppo.num_steps=16",
        "--set",
        "trainer.eval_episodes=1",
    )
    assert proc.returncode == 0, proc.stderr
    return run_dir


def test_eval_gif_plays_at_render_fps(cartpole_run, tmp_path):
    gif, result = tmp_path / "cartpole.gif", tmp_path / "eval.json"
    proc = _cli(
        "eval", cartpole_run, "--episodes", "1", "--gif", gif, "--device", "cpu", "--json", result
    )
    assert proc.returncode == 0, proc.stderr
    assert "XDG_RUNTIME_DIR" not in proc.stderr
    length = json.loads(result.read_text())["mean_length"]
    durations = gif_durations(gif)
    # 50 fps is 20 ms a frame; Pillow merges a frame identical to the one before it into
    # that one's duration, so the total is what pins the speed.
    assert all(d > 0 and d % 20 == 0 for d in durations)
    assert sum(durations) == 20 * length


@pytest.mark.parametrize("module, library", [("pygame", "pygame"), ("PIL", "Pillow")])
def test_eval_gif_without_a_library_is_one_line(cartpole_run, tmp_path, module, library):
    proc = _cli(
        "eval",
        cartpole_run,
        "--episodes",
        "1",
        "--gif",
        tmp_path / "x.gif",
        "--device",
        "cpu",
        hide_module=module,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"gpu-vecenv eval: error: {'rendering' if module == 'pygame' else 'writing GIFs'} "
        f"needs {library}, which is not installed: pip install 'gpu-vecenv[render]'"
    ]
    assert not (tmp_path / "x.gif").exists()


def test_eval_gif_of_an_env_that_draws_nothing_says_so(tmp_path, capsys):
    import torch

    import gpu_vecenv
    from gpu_vecenv.cli import main as cli_main
    from gpu_vecenv.train import PPOConfig, evaluate, load_models, train
    from tests.runtime.counting_env import COUNTING  # no render_frame

    gpu_vecenv.register("FramelessCounting-v0", COUNTING)
    run = tmp_path / "run"
    train("FramelessCounting-v0", PPOConfig(num_steps=4, num_minibatches=1), num_envs=2,
          total_steps=8, run_dir=str(run), device="cpu", progress=False, tensorboard=False,
          eval_episodes=0)
    gif = tmp_path / "x.gif"
    assert cli_main(["eval", str(run), "--episodes", "1", "--gif", str(gif),
                     "--device", "cpu"]) == 2
    assert capsys.readouterr().err == (
        "gpu-vecenv eval: error: --gif: FramelessCounting-v0 draws no frames (its definition "
        "has no render_frame), so there is no GIF to write; leave out --gif, or give the "
        "definition a render_frame (docs/custom_env.md)\n")
    config, models, _ = load_models(run, torch.device("cpu"))
    with pytest.raises(ValueError, match="^gif_path: FramelessCounting-v0 draws no frames"):
        evaluate(config, models, 1, torch.device("cpu"), gif_path=gif)
    assert not gif.exists()
