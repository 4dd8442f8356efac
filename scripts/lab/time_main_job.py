"""Where the README's main job spends its seconds, from process start to exit.

    python scripts/lab/time_main_job.py out.json [gpu-vecenv train arguments]
    python scripts/lab/time_main_job.py out.json --env GPUCartPole-v1 --run-dir /tmp/r --overwrite

Runs ``gpu-vecenv train`` in this process (the arguments as the command takes them;
default ``--env GPUCartPole-v1``), starting as the command does (torch is imported by the
command, while it validates its config), and records, in seconds since the process
started (``/proc``): the CLI imported, the config validated (torch imported), the CUDA
warm-up thread's start and end (:mod:`gpu_vecenv.cuda_warmup`), the trainer built, its
first and last logged rows, the stop check's evaluation (the first one's start, the last
one's end; every check with its verdict under ``stop_checks``), the run's end and the
command's return; also how many checkpoints were written and how long they took. Writes
JSON, prints a table.
"""

from __future__ import annotations

import time

_T0 = time.time()

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_train import process_start_time  # noqa: E402


def main() -> int:
    out, args = sys.argv[1], sys.argv[2:] or ["--env", "GPUCartPole-v1"]
    start = process_start_time()
    marks: dict[str, float] = {"script_started": _T0 - start}
    saves: list[float] = []
    checks: list[dict] = []

    def mark(name: str) -> None:
        marks.setdefault(name, time.time() - start)

    from gpu_vecenv import cuda_warmup
    from gpu_vecenv.cli import main as cli_main
    from gpu_vecenv.train import config_loading

    mark("cli_imported")  # torch not yet
    validate, retain = config_loading.config_from_dict, cuda_warmup.retain_primary_context

    def timed_validate(*a, **k):
        result = validate(*a, **k)
        mark("config_validated")  # the env's definition and torch imported
        time_the_trainer(mark, marks, start, saves, checks)
        return result

    def timed_retain(*a, **k):
        mark("cuda_warmup_started")
        result = retain(*a, **k)
        mark("cuda_context_ready" if result else "cuda_warmup_failed")
        return result

    config_loading.config_from_dict = timed_validate  # what train's main calls
    cuda_warmup.retain_primary_context = timed_retain  # what the warm-up thread calls
    code = cli_main(["train", *args])
    mark("command_returned")
    import torch

    result = {"args": args, "exit_code": code, "seconds_since_process_start": marks,
              "checkpoints": {"count": len(saves), "seconds": sum(saves)},
              "stop_checks": checks,
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
              "torch": torch.__version__}
    Path(out).write_text(json.dumps(result, indent=1))
    for name, seconds in sorted(marks.items(), key=lambda item: item[1]):
        print(f"{seconds:8.3f} s  {name}")
    print(f"checkpoints: {len(saves)} in {sum(saves):.3f} s")
    for c in checks:
        print(f"stop check {c['started']:.3f} -> {c['done']:.3f} s: "
              f"{'passed' if c['passed'] else 'fell short'}")
    return code


def time_the_trainer(mark, marks: dict[str, float], start: float, saves: list[float],
                     checks: list[dict]) -> None:
    """Marks from the Trainer's methods (patched once torch is imported: the trainer's
    module imports it); each stop check's start, end and verdict into ``checks``."""
    from gpu_vecenv.train import stopping, trainer

    cls = trainer.Trainer
    if getattr(cls, "_timed", False):
        return
    init, run, save, row = cls.__init__, cls.run, cls.save, cls._row
    check = stopping.check_with_evaluation

    def timed_init(self, *a, **k):
        mark("trainer_init_started")
        init(self, *a, **k)
        mark("trainer_built")

    def timed_row(self, *a, **k):
        result = row(self, *a, **k)
        mark("first_row")
        marks["last_row"] = time.time() - start
        return result

    def timed_save(self, *a, **k):
        t = time.perf_counter()
        result = save(self, *a, **k)
        saves.append(time.perf_counter() - t)
        return result

    def timed_check(*a, **k):
        began = time.time() - start
        mark("stop_check_started")
        result = check(*a, **k)
        marks["stop_check_done"] = time.time() - start
        checks.append({"started": began, "done": marks["stop_check_done"],
                       "passed": bool(result[0])})
        return result

    def timed_run(self, *a, **k):
        result = run(self, *a, **k)
        mark("run_returned")
        return result

    cls.__init__, cls.run, cls.save, cls._row = timed_init, timed_run, timed_save, timed_row
    cls._timed = True
    trainer.check_with_evaluation = timed_check  # the trainer's own reference


if __name__ == "__main__":
    sys.exit(main())
