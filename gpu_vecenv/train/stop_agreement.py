"""Every rank of a data-parallel run stops after the same iteration when any got a signal.

A scheduler (Slurm, Kubernetes) sends SIGTERM to every rank, ``torchrun`` forwards Ctrl-C
to every worker, and a user may ``kill`` a single rank; each rank sees its signal at its
own moment. The ranks must still stop after one and the same iteration: a rank that went
on would wait for ever in the next all-reduce of a rank that stopped.

:class:`StopAgreement` is asked once per iteration, after the iteration is queued. Alone,
it answers with this process's request at once. Data-parallel, each rank all-reduces (MAX)
its request flag on the device, without waiting for it, and reads the flag of the
*previous* iteration, which the GPU has finished or nearly so: so every rank decides on
the same all-reduced values, stops at most two iterations after the first signal, and the
host waits for no more than the previous iteration (a per-iteration host sync would idle
the GPU while the host queues the next iteration).

A rank that died or hangs never completes the all-reduce. So the waits of a rank poll the
device instead of blocking in CUDA (:func:`wait_for_event`; the trainer's metric reads
wait the same way, :func:`wait_for_device`), so the signal handler runs, and once this
rank has a stop request a wait longer than :data:`STUCK_AFTER_SIGNAL_S` raises
:class:`RanksNotAgreeing`: the ranks cannot agree, there is nothing consistent to save.
"""

from __future__ import annotations

import os
import time

import torch

from gpu_vecenv.train import distributed
from gpu_vecenv.train.distributed import RanksNotAgreeing
from gpu_vecenv.train.stopping import InterruptRequest

STUCK_ENV = "GPU_VECENV_STOP_WAIT"
"""Environment variable: seconds a rank with a stop request waits for the others."""
STUCK_AFTER_SIGNAL_S = 10.0
SPIN_S = 2e-2
"""Seconds a wait spins (yielding) before it sleeps between polls: longer than the wait
for a logged row's iterations of a small run (a 100-microsecond sleep overshoots by about
its length, 0.5 % of a 20 ms wait)."""
POLL_S = 1e-4


class StopAgreement:
    """``agreement(request)`` once per iteration: the signal (its number; 0: none) for which
    every rank stops after this iteration (see the module docstring). Where ranks got
    different signals, the larger number wins (SIGTERM, 15, over SIGINT, 2).

    Args:
        device: the rank's device (CUDA: the vote is all-reduced with NCCL, read through
            pinned memory; CPU: gloo, which completes at once).
        data_parallel: whether this run has a process group (else: no vote).
    """

    def __init__(self, device: torch.device, data_parallel: bool):
        self.device = device
        self.data_parallel = data_parallel
        self._votes: list[torch.Tensor] = []
        self._pending: tuple[torch.Tensor, torch.cuda.Event | None] | None = None
        self._iteration = 0
        if data_parallel:
            pinned = device.type == "cuda"
            self._votes = [torch.zeros(1, device=device) for _ in range(2)]
            self._host = [torch.zeros(1, pin_memory=pinned) for _ in range(2)]

    def __call__(self, request: InterruptRequest) -> int:
        """The signal to stop for now, or 0; ``request``: this process's signals
        (``requested``, ``signum`` and ``when``, read again while waiting)."""
        if not self.data_parallel:
            return (request.signum or 0) if request.requested else 0
        slot = self._iteration % 2
        self._iteration += 1
        vote, host = self._votes[slot], self._host[slot]
        # a fill kernel: no host-to-device copy
        vote.fill_(float(request.signum or 0) if request.requested else 0.0)
        distributed.all_reduce_max_(vote)
        host.copy_(vote, non_blocking=True)
        event = None
        if self.device.type == "cuda":
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(self.device))
        previous, self._pending = self._pending, (host, event)
        if previous is None:
            return 0
        previous_host, previous_event = previous
        if previous_event is not None:
            wait_for_event(previous_event, request)
        return int(previous_host.item())



def wait_for_device(device: torch.device, request: InterruptRequest | None) -> None:
    """Wait until the work queued so far on ``device``'s current stream is done, as
    :func:`wait_for_event` does (nothing to wait for on the CPU)."""
    if device.type != "cuda":
        return
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    wait_for_event(event, request)


def wait_for_event(event: torch.cuda.Event, request: InterruptRequest | None) -> None:
    """Wait for ``event`` by polling, not in a blocking CUDA call, so that a signal handler
    runs while this rank waits for one that died; once ``request`` holds a signal, wait at
    most :data:`STUCK_ENV` seconds (default :data:`STUCK_AFTER_SIGNAL_S`) from it, then
    raise :class:`RanksNotAgreeing`. Spins (yielding) for the first :data:`SPIN_S`, as a
    blocking wait would, then sleeps :data:`POLL_S` between polls."""
    limit = float(os.environ.get(STUCK_ENV, STUCK_AFTER_SIGNAL_S))
    start = time.monotonic()
    while not event.query():
        now = time.monotonic()
        if request is not None and request.requested and now - request.when > limit:
            raise RanksNotAgreeing(
                f"rank {distributed.rank()}: the ranks did not agree to stop within "
                f"{limit:g} s of the signal (another rank failed or hangs); nothing was "
                "saved at this point")
        time.sleep(0.0 if now - start < SPIN_S else POLL_S)
