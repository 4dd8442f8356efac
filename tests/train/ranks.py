"""Start the ranks of a data-parallel run with a hard time limit.

:class:`Ranks` starts them as plain processes with what ``torchrun --standalone`` sets
up (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``), without torchrun in between: a test sees each rank's own exit status
and output and can signal one rank. :func:`torchrun` starts ``torchrun --standalone``
itself. Either way a hang kills every process of the launch (each rank leads a process
session of its own, as torchrun's workers do, so they are found and killed one by one)
and fails with their last output instead of blocking the suite.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(text: str, chars: int = 3000) -> str:
    return text[-chars:]


class Ranks:
    """``processes`` ranks of ``python args...`` (e.g. ``-m gpu_vecenv.train ...``)."""

    def __init__(self, *args: str, processes: int = 2, env: dict[str, str] | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="ranks-"))
        port = str(free_port())
        base = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                "WORLD_SIZE": str(processes), "LOCAL_WORLD_SIZE": str(processes),
                "GPU_VECENV_DIST_TIMEOUT": "60", **(env or {})}
        self.procs: list[subprocess.Popen] = []
        for r in range(processes):
            out = open(self.dir / f"rank{r}.out", "w")  # noqa: SIM115 (closed in wait)
            err = open(self.dir / f"rank{r}.err", "w")  # noqa: SIM115
            self.procs.append(subprocess.Popen(
                [sys.executable, *args], stdout=out, stderr=err, cwd=ROOT,
                env={**base, "RANK": str(r), "LOCAL_RANK": str(r)},
                start_new_session=True))
            out.close()
            err.close()

    def stdout(self, r: int) -> str:
        return (self.dir / f"rank{r}.out").read_text()

    def stderr(self, r: int) -> str:
        return (self.dir / f"rank{r}.err").read_text()

    def output(self) -> str:
        return "\n".join(f"--- rank {r} stdout:\n{tail(self.stdout(r))}\n--- rank {r} "
                         f"stderr:\n{tail(self.stderr(r))}" for r in range(len(self.procs)))

    def send(self, r: int, signum: int) -> None:
        self.procs[r].send_signal(signum)

    def wait(self, timeout: float) -> list[int]:
        """Every rank's exit status; past ``timeout`` seconds every rank is killed and an
        ``AssertionError`` shows their last output."""
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"ranks still running after {timeout:g} s (a hang); "
                                     f"killed.\n{self.output()}") from None
        return [proc.returncode for proc in self.procs]

    def kill(self) -> None:
        for proc in self.procs:
            kill_tree(proc.pid)
            proc.wait()


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (Linux's /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its session and every process it started."""
    for target in [pid, *descendants(pid)]:
        for kill in (lambda p: os.killpg(p, signal.SIGKILL), lambda p: os.kill(p, signal.SIGKILL)):
            try:
                kill(target)
            except (ProcessLookupError, PermissionError):
                pass


class Finished:
    """What :func:`torchrun` returns (as ``subprocess.CompletedProcess``)."""

    def __init__(self, returncode: int, stdout: str, stderr: str):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def torchrun(*args: str, timeout: float, processes: int = 2,
             env: dict[str, str] | None = None) -> Finished:
    """``torchrun --standalone --nproc-per-node processes args...``, its output captured;
    past ``timeout`` seconds it and its workers are killed and an ``AssertionError``
    shows their last output."""
    run_env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
               "GPU_VECENV_DIST_TIMEOUT": "60", **(env or {})}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        run_env.pop(name, None)
    folder = Path(tempfile.mkdtemp(prefix="torchrun-"))
    with open(folder / "out", "w") as out, open(folder / "err", "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "torch.distributed.run", "--standalone",
             f"--nproc-per-node={processes}", *args], stdout=out, stderr=err, cwd=ROOT,
            env=run_env, start_new_session=True)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.wait()
        raise AssertionError(
            f"torchrun still running after {timeout:g} s (a hang); killed.\n--- stdout:\n"
            f"{tail((folder / 'out').read_text())}\n--- stderr:\n"
            f"{tail((folder / 'err').read_text())}") from None
    return Finished(proc.returncode, (folder / "out").read_text(),
                    (folder / "err").read_text())


def wait_for(condition, timeout: float, what: str) -> None:
    """Poll ``condition()`` every 50 ms until true; ``AssertionError`` after
    ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)
