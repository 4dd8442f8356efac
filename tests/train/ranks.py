"""Start the ranks of a data-parallel run as plain processes, with a hard time limit.

What ``torchrun --standalone`` sets up (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), without torchrun in between: a
test sees each rank's own exit status and output, can signal one rank, and on a hang
kills every rank (each leads a process session of its own, so whatever it started goes
too) and fails with the ranks' last output instead of blocking the suite.
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
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            proc.wait()


def wait_for(condition, timeout: float, what: str) -> None:
    """Poll ``condition()`` every 50 ms until true; ``AssertionError`` after
    ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)
