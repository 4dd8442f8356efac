"""WarpDrive's own trainer (``TrainerA2C``, PyCUDA backend) on its Tag config, in-process.

Runs rl-warp-drive 2.7.1's ``TrainerA2C`` as its ``example_training_script_pycuda.py``
does (``EnvWrapper(TagContinuous(**env), num_envs, env_backend="pycuda")``, taggers and
runners as two policies), for a wall-clock budget or a number of iterations, and returns
its own ``perf_stats`` and its trained networks. WarpDrive, its old ``gym`` and PyCUDA
are imported only inside :func:`run_warpdrive_trainer`.

Two fixes, applied here so that it runs beside torch in one process:

- ``CUDA_DEVICE`` is set to torch's current device before WarpDrive is imported: its
  ``autoinit_pycuda`` then pushes that device's primary context (torch's) instead of
  making one of its own, whose tensors torch refuses ("invalid device context");
- ``trainer.seed`` is set to a Python int: its default, ``np.int32(time.time())``, is
  refused by Python 3.12's ``random.seed``.

The loop is ``TrainerBase.train()``'s (``warp_drive/training/trainers/trainer_base.py``):
per iteration ``_generate_rollout_batch()`` then ``_update_model_params(iteration)``,
timed into ``perf_stats`` exactly as there, then ``_log_metrics`` and
``save_model_checkpoint`` outside the timed span. :func:`train_for` only adds the stop:
after ``iterations`` iterations, or once ``perf_stats.total_time`` (its training time)
reaches ``seconds``.
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from gpu_vecenv.bench import load_peer

warpdrive_peer = load_peer("warpdrive_peer")  # beside this file, as the scripts load it
INSTALL_HINT = warpdrive_peer.INSTALL_HINT
warpdrive_problem = warpdrive_peer.warpdrive_problem

TIMED_KEYS = ("policy_eval_time", "action_sample_time", "env_step_time", "training_time",
              "total_time")
"""``PerfStats`` fields in seconds (``total_time``: roll-out + update)."""


def load_warpdrive_run_config(name: str = "tag_continuous") -> dict[str, Any]:
    """WarpDrive's installed ``run_configs/<name>.yaml``, as its example script loads it."""
    import yaml
    from warp_drive.utils.common import get_project_root

    path = Path(get_project_root()) / "warp_drive" / "training" / "run_configs" / f"{name}.yaml"
    with open(path, encoding="utf8") as f:
        return yaml.safe_load(f)


def prepare_run_config(config: dict[str, Any], *, seed: int, iterations: int | None,
                       results_dir: str) -> dict[str, Any]:
    """A copy of WarpDrive's run config ready for :func:`train_for`: an int seed, enough
    episodes for ``iterations`` (or, for a time budget, a million iterations), no
    checkpoints but the first and last, its results under ``results_dir``.

    WarpDrive's trainer runs ``episode_length * num_episodes // train_batch_size``
    iterations (10 for the shipped 500 episodes)."""
    out = copy.deepcopy(config)
    trainer = out["trainer"]
    batch = int(trainer["train_batch_size"])
    wanted = iterations if iterations is not None else 10**6
    episode_length = int(out["env"]["episode_length"])
    trainer["num_episodes"] = -(-wanted * batch // episode_length)
    trainer["seed"] = int(seed)
    trainer.setdefault("num_gpus", 1)
    out["saving"] = dict(out.get("saving", {}), basedir=str(results_dir),
                         model_params_save_freq=10**9)
    return out


def train_for(trainer: Any, seconds: float | None, iterations: int | None) -> list[float]:
    """``TrainerBase.train()``'s loop until ``iterations`` iterations or ``seconds`` of
    ``perf_stats.total_time``; returns each iteration's seconds (as it adds them)."""
    if seconds is None and iterations is None:
        raise ValueError("give seconds or iterations")
    trainer.cuda_envs.reset_all_envs()
    times: list[float] = []
    iteration = 0
    while iteration < trainer.num_iters:
        start = time.time()
        sample_params = trainer._generate_rollout_batch()
        metrics = trainer._update_model_params(iteration)
        trainer.perf_stats.iters = iteration + 1
        trainer.perf_stats.steps = trainer.perf_stats.iters * trainer.training_batch_size
        times.append(time.time() - start)
        trainer.perf_stats.total_time += times[-1]
        trainer._log_metrics(metrics, sample_params)
        trainer.save_model_checkpoint(iteration)
        iteration += 1
        if iterations is not None and iteration >= iterations:
            break
        if seconds is not None and trainer.perf_stats.total_time >= seconds:
            break
    return times


def perf_summary(perf_stats: Any, agents: int, iteration_seconds: list[float]) -> dict:
    """Its ``perf_stats`` as JSON, with agent-steps/s: over every iteration (its own
    "Mean steps per sec (total)" times ``agents``) and past the first (warm-up)."""
    out = {"iterations": perf_stats.iters, "env_steps": perf_stats.steps,
           "agent_steps": perf_stats.steps * agents,
           **{k: getattr(perf_stats, k) for k in TIMED_KEYS}}
    out["env_steps_per_s"] = perf_stats.steps / perf_stats.total_time
    out["agent_steps_per_s"] = out["env_steps_per_s"] * agents
    if len(iteration_seconds) > 1:
        per_iteration = perf_stats.steps / perf_stats.iters
        out["agent_steps_per_s_after_first"] = (per_iteration * agents * (
            len(iteration_seconds) - 1) / sum(iteration_seconds[1:]))
    out["iteration_seconds"] = iteration_seconds
    return out


def run_warpdrive_trainer(config: dict[str, Any], *, seconds: float | None = None,
                          iterations: int | None = None, seed: int = 1) -> dict[str, Any]:
    """Train WarpDrive's ``TrainerA2C`` on ``config`` (its tag_continuous run config) for
    ``seconds`` of its training time or ``iterations`` iterations.

    Returns ``perf`` (:func:`perf_summary`), ``models`` (policy -> its torch module, on the
    GPU), ``state_dicts`` (policy -> state dict on the CPU), ``taggers``/``runners`` (its
    agent ids of each role), ``run_config`` (as run), ``build_seconds`` (env wrapper with
    its nvcc build, and trainer), ``warp_drive`` (version)."""
    problem = warpdrive_problem()
    if problem:
        raise RuntimeError(problem)
    import torch

    os.environ.setdefault("CUDA_DEVICE", str(torch.cuda.current_device()))  # fix 1
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.training.trainers.trainer_a2c import TrainerA2C
    from warp_drive.utils import autoinit_pycuda  # noqa: F401  (pushes torch's context)

    with tempfile.TemporaryDirectory() as results:
        run_config = prepare_run_config(config, seed=seed, iterations=iterations,
                                        results_dir=results)  # fix 2: the int seed
        env_section = run_config["env"]
        games = run_config["trainer"]["num_envs"]
        agents = env_section["num_taggers"] + env_section["num_runners"]
        warpdrive_peer._raise_heap(warpdrive_peer.curand_heap_bytes(games * agents))
        began = time.time()
        env = EnvWrapper(TagContinuous(**env_section), num_envs=games, env_backend="pycuda")
        roles = {"tagger": sorted(env.env.taggers), "runner": sorted(env.env.runners)}
        trainer = TrainerA2C(env_wrapper=env, config=run_config,
                             policy_tag_to_agent_id_map=roles, verbose=False,
                             results_dir="warpdrive_trainer")
        built = time.time() - began
        times = train_for(trainer, seconds, iterations)
        torch.cuda.synchronize()
        perf = perf_summary(trainer.perf_stats, env.env.num_agents, times)
        models = dict(trainer.models)
        state_dicts = {name: {k: v.detach().cpu().clone() for k, v in m.state_dict().items()}
                       for name, m in models.items()}
        trainer.graceful_close()  # frees its curand states
    return {"perf": perf, "models": models, "state_dicts": state_dicts,
            "taggers": roles["tagger"], "runners": roles["runner"], "run_config": run_config,
            "build_seconds": built, "warp_drive": warpdrive_peer._version("rl-warp-drive")}


__all__ = ["INSTALL_HINT", "load_warpdrive_run_config", "perf_summary", "prepare_run_config",
           "run_warpdrive_trainer", "train_for", "warpdrive_problem"]
