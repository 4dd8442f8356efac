"""Where the README's main job spends its seconds, from process start to exit.

    python scripts/lab/time_main_job.py out.json [gpu-vecenv train arguments]
    python scripts/lab/time_main_job.py out.json --env GPUCartPole-v1 --run-dir /tmp/r --overwrite

Runs ``gpu-vecenv train`` in this process (the arguments as the command takes them;
default ``--env GPUCartPole-v1``) and records, in seconds since the process started
(``/proc``): torch imported, our modules imported, CUDA initialized, its first tensor
made (the imports and CUDA init done), the trainer built, its first and last logged rows,
the stop check's evaluation, the run's end and the command's return; also how many
checkpoints were written and how long they took. Writes JSON, prints a table.
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

    def mark(name: str) -> None:
        marks.setdefault(name, time.time() - start)

    import torch

    mark("torch_imported")
    from gpu_vecenv.cli import main as cli_main
    from gpu_vecenv.train import stopping, trainer

    mark("gpu_vecenv_imported")
    if torch.cuda.is_available():
        torch.cuda.init()
        mark("cuda_initialized")
        torch.zeros(1, device="cuda")
    mark("imports_and_cuda_init")
    saves: list[float] = []
    cls = trainer.Trainer
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
        mark("stop_check_started")
        result = check(*a, **k)
        marks["stop_check_done"] = time.time() - start
        return result

    def timed_run(self, *a, **k):
        result = run(self, *a, **k)
        mark("run_returned")
        return result

    cls.__init__, cls.run, cls.save, cls._row = timed_init, timed_run, timed_save, timed_row
    trainer.check_with_evaluation = timed_check  # the trainer's own reference
    code = cli_main(["train", *args])
    mark("command_returned")
    result = {"args": args, "exit_code": code, "seconds_since_process_start": marks,
              "checkpoints": {"count": len(saves), "seconds": sum(saves)},
              "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
              "torch": torch.__version__}
    Path(out).write_text(json.dumps(result, indent=1))
    for name, seconds in sorted(marks.items(), key=lambda item: item[1]):
        print(f"{seconds:8.3f} s  {name}")
    print(f"checkpoints: {len(saves)} in {sum(saves):.3f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
