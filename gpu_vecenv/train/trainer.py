"""The training loop: roll-out on the device, update, log, checkpoint, evaluate.

An iteration is ``num_steps`` vector steps (PPO, A2C) or ``train_frequency`` vector
steps (DDPG) followed by each policy's update. :meth:`Trainer.run` reads top to bottom;
what each algorithm does at each step is its :class:`~gpu_vecenv.train.learner.Learner`'s
(:mod:`.ppo`, :mod:`.a2c`, :mod:`.ddpg`), whether the roll-out and update run as CUDA
graphs is :mod:`.graphs`', the timing windows are :mod:`.logger`'s.

The loop never reads a tensor on the host except every ``log_interval`` iterations
(metrics, episode statistics) and at checkpoints, so on a GPU the host runs ahead and
only queues work.

A run ends at ``total_steps``, or earlier when the mean recent return reaches
``stop_at_return`` or on Ctrl-C or SIGTERM (:mod:`gpu_vecenv.train.stopping`, in a
data-parallel run agreed by :mod:`gpu_vecenv.train.stop_agreement`); it always ends on an
iteration boundary with a checkpoint.

Started by ``torchrun`` (or in a process group the caller made), the same loop runs on
every rank, data-parallel (:mod:`gpu_vecenv.train.distributed`): ``global_step`` and
``total_steps`` count every rank's env steps, logged rows are global, rank 0 writes the
outputs and each rank its own checkpoint file.

The env and the device a config names are built by :mod:`.training_env`; a run in one
call, ``train(...)``, is :mod:`.train_function`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

from gpu_vecenv.train import checkpoint as ckpt
from gpu_vecenv.train import distributed, run_directory
from gpu_vecenv.train.config import Config
from gpu_vecenv.train.config_loading import save_yaml
from gpu_vecenv.train.divergence import blame_divergence, check_finite, finite_flag
from gpu_vecenv.train.graphs import GraphedLoop, iteration_phases
from gpu_vecenv.train.logger import IterationTimer, MetricsWriter, NoMetricsWriter
from gpu_vecenv.train.policies import PolicyGroup, build_groups, join_actions, joint_actions
from gpu_vecenv.train.progress import Progress
from gpu_vecenv.train.stop_agreement import StopAgreement, wait_for_device
from gpu_vecenv.train.stopping import (
    InterruptRequest,
    ReturnWindow,
    TrainingInterrupted,
    check_with_evaluation,
    threshold_reached,
    thresholds_by_policy,
)
from gpu_vecenv.train.training_env import cpu_size_warning, make_env, trainer_device

CPU_SLOTS_WARNING = 4096
"""Vector slots from which a run on the CPU gets a warning: a GPU-sized config there
moves its progress only every few seconds to minutes and runs for hours."""


@dataclass
class TrainResult:
    """What :meth:`Trainer.run` (and :func:`gpu_vecenv.train.train`) returns."""

    run_dir: Path
    global_step: int
    seconds: float
    metrics: list[dict[str, Any]] = field(default_factory=list)
    """every logged row (as in ``metrics.jsonl``)"""
    evaluation: dict[str, Any] | None = None
    """:func:`gpu_vecenv.train.evaluation.evaluate` result, if ``eval_episodes > 0``"""
    stopped: str = "total_steps"
    """why the run ended: ``total_steps``, ``stop_at_return``, ``callback``, or
    ``already_finished`` (a resumed run with nothing left to train)"""
    recent_returns: dict[str, tuple[float, int]] = field(default_factory=dict)
    """policy -> (mean return, episodes) over its last 100 or more finished episodes"""


class Trainer:
    """Builds the env and the policies of ``config``; :meth:`run` trains.

    Args:
        config: a validated :class:`Config`.
        resume: continue from ``<run_dir>/checkpoints/latest.pt``.
        callback: called with each logged row; returning ``False`` stops training
            (a checkpoint is written first).
        env: train on this vector env instead of making one from ``config`` (see
            :func:`gpu_vecenv.train.train`); ``config.trainer`` must describe it.
        overwrite: start afresh in a run directory that already holds a run (its
            checkpoints, logs and evaluation are deleted when :meth:`run` starts).

    Warns (``UserWarning``) when a GPU-sized config (:data:`CPU_SLOTS_WARNING` vector
    slots or more) is to run on the CPU.
    """

    def __init__(self, config: Config, resume: bool = False,
                 callback: Callable[[dict[str, Any]], bool | None] | None = None,
                 env: Any = None, overwrite: bool = False):
        self.config = config
        t = config.trainer
        if resume and overwrite:
            raise ValueError("resume or overwrite a run directory, not both")
        self.device = distributed.rank_device(trainer_device(t.device))
        self.distributed = distributed.init(self.device)
        self.rank, self.world_size = distributed.rank(), distributed.world_size()
        if t.torch_threads > 0 or self.device.type == "cpu":
            torch.set_num_threads(t.torch_threads or 1)
        self.callback = callback
        self.overwrite = overwrite
        # An id may hold ':' (module:Env-v0, not valid in Windows paths) and '/' (a
        # namespace): the default directory name replaces both.
        env_name = t.env.replace(":", "_").replace("/", "_")
        run_dir = Path(t.run_dir) if t.run_dir else Path("runs") / (
            f"{env_name}__{t.algo}__{t.seed}__{datetime.now():%Y%m%d-%H%M%S}")
        self.run_dir = Path(distributed.broadcast_object(str(run_dir)))  # rank 0's name
        if self.rank == 0:
            run_directory.check_usable(self.run_dir, new_run=not resume and not overwrite)
        if t.num_envs_global is not None:  # the global batch, split over the ranks
            if t.num_envs == "auto":
                raise ValueError("trainer.num_envs_global and trainer.num_envs=auto: give "
                                 "one of them")
            self.config = config = dataclasses.replace(config, trainer=dataclasses.replace(
                t, num_envs=distributed.envs_per_rank(t.num_envs_global, self.world_size)))
            t = config.trainer
        if t.num_envs == "auto":  # chosen now, before anything is built; saved as a number
            from gpu_vecenv.train.autoscale import resolve_num_envs

            # Each rank searches on its own GPU; all use the smallest choice.
            self.config = config = resolve_num_envs(
                config, self.device, Trainer, self.run_dir if resume else None,
                log=print if self.rank == 0 else None,
                agree=lambda n: distributed.agree_min(n, self.device))
            t = config.trainer
        self._owns_env = env is None
        self.env = make_env(config, self.device) if env is None else env
        # Every rank draws the same initial weights (and gets rank 0's below); envs and
        # sampling follow the rank's own seed (rank 0: the config's).
        seed = distributed.rank_seed(t.seed)
        torch.manual_seed(t.seed)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.groups: list[PolicyGroup] = build_groups(config, self.env, self.device,
                                                      self.generator)
        for g in self.groups:
            distributed.broadcast_module(g.learner.model)
        if self.rank > 0:
            torch.manual_seed(seed)
        self.steps_per_iteration = self.groups[0].learner.steps_per_iteration
        self.num_slots = self.env.num_envs
        self.batch = self.steps_per_iteration * self.num_slots * self.world_size
        self.num_iterations = max(1, t.total_steps // self.batch)
        self.iteration = 0
        self.global_step = 0
        self.obs, _ = self.env.reset(seed=seed)
        self.obs = self.obs.clone()
        self._joint_actions = joint_actions(self.groups, self.num_slots, self.device)
        names = [g.name for g in self.groups]
        self.return_thresholds = thresholds_by_policy(t.stop_at_return, names)
        self.return_windows = {name: ReturnWindow() for name in names}
        self.stop_check: dict[str, Any] | None = None
        """The last check of ``trainer.stop_check_episodes``: ``{"step", "thresholds",
        "returns", "passed", "evaluation"}`` (``evaluation`` not after a resume)."""
        self.resumed_from: int | None = None
        self.saved_step: int | None = None
        self._interrupt: InterruptRequest | None = None  # while run() runs
        if resume:
            self._load(run_directory.prepare_resume(self.run_dir, tidy=self.rank == 0))
        self.phases = iteration_phases(
            self._collect, self._update, self.generator, self.device, t.cuda_graphs,
            getattr(self.env, "backend_name", "?"),
            {g.name: config.policy_config(g.name) for g in self.groups})
        size_warning = self._cpu_size_warning()
        if size_warning:
            warnings.warn(size_warning, stacklevel=2)
        # last, so that a constructor that fails leaves the process's setting alone
        self._matmul_precision_before = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision(t.matmul_precision)

    def _cpu_size_warning(self) -> str | None:
        if self.device.type != "cpu" or self.num_slots < CPU_SLOTS_WARNING:
            return None
        return cpu_size_warning(self.config, self.num_slots, self.batch)

    @property
    def finished(self) -> str | None:
        """Why there is nothing left to train (``"total_steps"`` or ``"stop_at_return"``;
        a resumed run can be finished), else ``None``."""
        if self.iteration >= self.num_iterations:
            return "total_steps"
        if threshold_reached(self.return_windows, self.return_thresholds) and (
                self.config.trainer.stop_check_episodes <= 0 or self._checked_here()):
            return "stop_at_return"
        return None

    def _checked_here(self) -> bool:
        """The stop check passed at this step for these thresholds."""
        c = self.stop_check
        return (c is not None and c["passed"] and c["step"] == self.global_step
                and c["thresholds"] == self.return_thresholds)

    def recent_returns(self) -> dict[str, tuple[float, int]]:
        """Policy -> (mean return, episodes) over its last 100 or more finished episodes
        (policies without a finished episode are left out)."""
        out = {}
        for name, window in self.return_windows.items():
            mean = window.mean()
            if mean is not None:
                out[name] = (mean, window.count)
        return out

    @property
    def graphs(self) -> GraphedLoop | None:
        """The CUDA-graph runner of the roll-out and update, if this run uses one."""
        return self.phases if isinstance(self.phases, GraphedLoop) else None

    def run(self) -> TrainResult:
        """Train until ``total_steps`` (or ``stop_at_return``); returns the logged rows and
        the evaluation. Ctrl-C or SIGTERM stops at the end of the current iteration (in a
        data-parallel run: of the same iteration on every rank), saves a checkpoint and
        raises :class:`TrainingInterrupted`."""
        if self.finished is not None:
            return self._nothing_to_train()
        t = self.config.trainer
        rows: list[dict[str, Any]] = []
        stopped = None
        requested = 0  # the signal to stop for (of any rank, in a data-parallel run)
        agreement = StopAgreement(self.device, self.distributed)
        with InterruptRequest(quiet=self.rank > 0) as interrupt, \
                self._outputs() as (writer, progress), \
                blame_divergence(self.groups, lambda: f"at step {self.global_step:,}"):
            self._interrupt = interrupt
            timer = IterationTimer(self.global_step, self._sync if t.sync_timing else None)
            while self.iteration < self.num_iterations and not requested:
                for g in self.groups:
                    g.learner.begin_iteration(self.global_step,
                                              self.iteration / self.num_iterations)
                with timer.phase("rollout"):
                    self.phases.collect()  # self._collect, eager or as a CUDA graph
                with timer.phase("update"):
                    metrics = self.phases.update()  # self._update, likewise
                self.iteration += 1
                self.global_step += self.batch
                last = self.iteration == self.num_iterations
                if self.iteration % t.log_interval == 0 or last:
                    row = self._row(metrics, timer.read(self.global_step))
                    rows.append(row)
                    stopped = self._after_row(row, progress)  # may add the stop check
                    writer.write(row)
                progress.update(self.global_step)
                requested = agreement(interrupt)
                if stopped or last or requested or (
                        t.checkpoint_interval and self.iteration % t.checkpoint_interval == 0):
                    self.save()
                if stopped:
                    break
            if requested and self.saved_step != self.global_step:
                self.save()  # a signal before the first iteration ended: still resumable
            seconds = timer.elapsed()
        if requested:
            raise TrainingInterrupted(self.run_dir, self.global_step,
                                      self.run_dir / "checkpoints" / "latest.pt", requested)
        evaluation = self._evaluate() if stopped in (None, "stop_at_return") else None
        return TrainResult(self.run_dir, self.global_step, seconds, rows, evaluation,
                           stopped or "total_steps", self.recent_returns())

    def close(self, graphs_only: bool = False) -> None:
        """Release the CUDA graphs, restore the process's float32 matmul precision
        (``trainer.matmul_precision``), and close the env the trainer made (not with
        ``graphs_only``). Call it (or use the trainer as a context manager) before a
        data-parallel run destroys its process group: NCCL waits for ever to destroy a
        communicator whose all-reduces a live CUDA graph holds."""
        self.phases.release()
        before = self.__dict__.pop("_matmul_precision_before", None)
        if before is not None:  # the process's setting, as it was before this trainer
            torch.set_float32_matmul_precision(before)
        close_env = getattr(self.env, "close", None)
        if close_env is not None and self._owns_env and not graphs_only:
            close_env()

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, exc_type, *exc) -> None:
        # Leaving on an error, the device may hold work that never ends (an all-reduce
        # with a rank that died): release only what never waits for it.
        self.close(graphs_only=exc_type is not None)

    def _collect(self) -> None:
        """The roll-out: ``steps_per_iteration`` vector steps; every policy acts for its
        slots and records what the env returned."""
        for step in range(self.steps_per_iteration):
            actions = [g.learner.act(step, g.select(self.obs)) for g in self.groups]
            obs, reward, terminated, truncated, info = self.env.step(
                join_actions(self.groups, actions, self._joint_actions))
            done = terminated | truncated
            final_obs = info["final_obs"]
            active = info.get("active")  # multi-agent envs: False for idle slots
            for g in self.groups:
                r, d = g.select(reward), g.select(done)
                live = None if active is None else g.select(active)
                g.learner.record(step, r, g.select(terminated), d, g.select(final_obs), live)
                g.stats.update(r, d, live)
            self.obs = obs

    def _update(self) -> dict[str, dict[str, torch.Tensor]]:
        """Every ready policy's update: ``{policy: {metric: device scalar}}``."""
        steps_done = self.global_step + self.batch  # after this iteration's roll-out
        return {g.name: g.learner.update() if g.learner.ready(steps_done) else {}
                for g in self.groups}

    # -- around the loop: outputs, rows, stopping --

    @contextmanager
    def _outputs(self) -> Iterator[tuple[MetricsWriter, Progress]]:
        """The run directory prepared (cleared with ``overwrite``, the config saved); the
        metrics writer and the progress display, closed on leaving."""
        t = self.config.trainer
        if self.rank > 0:  # rank 0 writes a data-parallel run's outputs
            progress = Progress(False, self.num_iterations * self.batch, self.global_step)
            yield NoMetricsWriter(), progress  # type: ignore[misc]
            return
        if self.overwrite:
            run_directory.clear_outputs(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        save_yaml(self.config, self.run_dir / "config.yaml")
        if self.distributed:
            run_directory.record_world_size(self.run_dir / "config.yaml", self.world_size,
                                            distributed.backend())
        writer = MetricsWriter(self.run_dir, t.tensorboard, resume_step=self.resumed_from)
        progress = Progress(t.progress, self.num_iterations * self.batch, self.global_step,
                            t.progress_interval)
        try:
            yield writer, progress
        finally:
            progress.close()
            writer.close()

    def _nothing_to_train(self) -> TrainResult:
        warnings.warn(f"run {self.run_dir} is already finished ({self.finished} reached "
                      f"at step {self.global_step:,}); nothing to train", stacklevel=3)
        return TrainResult(self.run_dir, self.global_step, 0.0, stopped="already_finished",
                           recent_returns=self.recent_returns())

    def _after_row(self, row: dict[str, Any], progress: Progress) -> str | None:
        """Count the row's episodes, show them; why to stop now (``callback``,
        ``stop_at_return``) or ``None``."""
        self._add_to_return_windows(row)
        progress.set_stats(row["steps_per_second"],
                           {k: v[0] for k, v in self.recent_returns().items()})
        if self.callback is not None:
            # Rank 0's callback decides for every rank.
            stop = self.callback(row) is False if self.rank == 0 else None
            if distributed.broadcast_object(stop):
                return "callback"
        if threshold_reached(self.return_windows, self.return_thresholds):
            if self.config.trainer.stop_check_episodes <= 0 or self._stop_check(row):
                return "stop_at_return"
        return None

    def _stop_check(self, row: dict[str, Any]) -> bool:
        """``trainer.stop_check_episodes`` (:func:`~.stopping.check_with_evaluation`): the
        deterministic policy's mean return reaches every threshold. Adds
        ``stop_check_return`` (per policy: ``<name>/stop_check_return``) to ``row``."""
        passed, returns, evaluation = check_with_evaluation(
            self.config, self.groups, self.return_thresholds, self.device, self.rank)
        single = len(self.groups) == 1
        for name, value in returns.items():
            row[("" if single else f"{name}/") + "stop_check_return"] = value
        self.stop_check = {"step": self.global_step, "thresholds": dict(self.return_thresholds),
                           "returns": returns, "passed": passed, "evaluation": evaluation}
        return passed

    def _evaluate(self) -> dict[str, Any] | None:
        """The evaluation after training (``eval_episodes``), also written to
        ``eval.json``; a stop check of as many episodes at this step is that very
        evaluation (the same policy, env seed and episodes), so it is not played again."""
        t = self.config.trainer
        if t.eval_episodes <= 0 or self.rank > 0:
            return None
        from gpu_vecenv.train.evaluation import evaluate, write_evaluation

        check = self.stop_check
        if (check is not None and check.get("evaluation") is not None
                and check["step"] == self.global_step
                and t.stop_check_episodes == t.eval_episodes):
            evaluation = check["evaluation"]
        else:
            evaluation = evaluate(self.config, self.groups, t.eval_episodes, self.device)
        write_evaluation(evaluation, self.run_dir / "eval.json")
        return evaluation

    def _add_to_return_windows(self, row: dict[str, Any]) -> None:
        single = len(self.groups) == 1
        for name, window in self.return_windows.items():
            prefix = "" if single else f"{name}/"
            if f"{prefix}episodes" in row:
                window.add(row[f"{prefix}episode_return"], row[f"{prefix}episodes"])

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _row(self, metrics: dict[str, dict[str, torch.Tensor]], timing: dict[str, float]
             ) -> dict[str, Any]:
        """The logged row: counters, ``timing`` (:meth:`IterationTimer.read`), each
        policy's metrics and episode statistics (prefixed ``<policy>/`` when several)."""
        # A diverged network (NaN weights) makes NaN actions, which the env refuses; say
        # which it is, here where the row's read syncs anyway. Queued before the wait, so
        # the check's kernels and host work overlap the iterations still running.
        finite = finite_flag(self.groups, metrics)
        # Wait for the device by polling: a rank whose peer died stays able to take a
        # signal here (instead of blocking in CUDA for ever).
        wait_for_device(self.device, self._interrupt)
        check_finite(self.groups, metrics, f"at step {self.global_step:,}", finite)
        check_errors = getattr(self.env, "check_errors", None)
        if check_errors is not None:
            check_errors()
        row: dict[str, Any] = {"global_step": self.global_step, "iteration": self.iteration,
                               **timing}
        if self.distributed:
            row["world_size"] = self.world_size
        single = len(self.groups) == 1
        for g in self.groups:
            prefix = "" if single else f"{g.name}/"
            names = list(metrics[g.name])
            if names:
                values = distributed.all_reduce_mean_(torch.stack(
                    [metrics[g.name][k].to(self.device).float() for k in names])).tolist()
                row.update({prefix + k: v for k, v in zip(names, values, strict=True)})
            episodes = g.stats.read()
            if episodes is not None:
                row.update({prefix + k: v for k, v in episodes.items()})
        return row

    # -- checkpoints --

    def save(self, path: str | Path | None = None) -> Path:
        """Write a checkpoint (default ``<run_dir>/checkpoints/latest.pt``)."""
        path = Path(path) if path else self.run_dir / "checkpoints" / "latest.pt"
        get_state = getattr(self.env, "get_state", None)
        payload = {
            "config": self.config.to_dict(),
            "counters": {"iteration": self.iteration, "global_step": self.global_step},
            "policies": {g.name: g.learner.state_dict() for g in self.groups},
            "episode_stats": {g.name: g.stats.state_dict() for g in self.groups},
            "rng": {"generator": self.generator.get_state(), "torch": torch.get_rng_state()},
            "env": {"state": get_state() if get_state else {}, "obs": self.obs.clone()},
            "return_windows": {name: w.state() for name, w in self.return_windows.items()},
        }
        if self.stop_check is not None:  # whether a resumed run is finished
            payload["stop_check"] = {k: self.stop_check[k]
                                     for k in ("step", "thresholds", "returns", "passed")}
        if self.distributed:
            # Each rank's envs, RNG, episode counters (and DDPG's replay) are its own:
            # ranks > 0 write theirs beside ``path`` first, rank 0 writes ``path`` last,
            # so ``path`` only exists beside a complete set.
            payload.update(world_size=self.world_size, rank=self.rank)
            if self.rank > 0:
                ckpt.save_checkpoint(payload, ckpt.rank_file(path, self.rank))
            distributed.barrier()
            if self.rank == 0:
                ckpt.save_checkpoint(payload, path)
        else:
            ckpt.save_checkpoint(payload, path)
        if path == self.run_dir / "checkpoints" / "latest.pt":
            self.saved_step = self.global_step
            if self.config.trainer.keep_checkpoints:
                kept = path.with_name(f"step_{self.global_step:012d}.pt")
                ckpt.keep_copy(ckpt.rank_file(path, self.rank) if self.rank else path,
                               ckpt.rank_file(kept, self.rank) if self.rank else kept)
        return path

    def _load(self, path: Path) -> None:
        payload = ckpt.load_checkpoint(path, self.device)
        run_directory.check_compatible(payload["config"], self.config, path)
        payload = ckpt.rank_payload(payload, path, self.rank, self.world_size, self.device)
        ckpt.check_batch(payload["counters"], self.batch, path)
        try:
            for g in self.groups:
                g.learner.load_state_dict(payload["policies"][g.name])
                g.stats.load_state_dict(payload["episode_stats"][g.name])
            self.generator.set_state(payload["rng"]["generator"].cpu())
            torch.set_rng_state(payload["rng"]["torch"].cpu())
            if payload["env"]["state"]:
                self.env.set_state(payload["env"]["state"])
            self.obs = ckpt.fitted(payload["env"]["obs"], self.obs, "env.obs")
            # Checkpoints from before stop_at_return have no windows: they start empty.
            for name, rows in payload.get("return_windows", {}).items():
                self.return_windows[name].load(rows)
            self.stop_check = payload.get("stop_check")
        except (KeyError, IndexError, AttributeError, RuntimeError, ValueError, TypeError
                ) as exc:
            raise ckpt.CheckpointError(f"checkpoint {path} does not fit this run: "
                                       f"{ckpt.first_line(exc, 300)}") from None
        self.iteration = int(payload["counters"]["iteration"])
        self.global_step = int(payload["counters"]["global_step"])
        self.resumed_from = self.saved_step = self.global_step
