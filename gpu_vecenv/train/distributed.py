"""Data-parallel training over ``torch.distributed``: one process (rank) per GPU.

A run started by ``torchrun`` (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` in the
environment) or inside a process group the caller made trains data-parallel:

- each rank steps its own envs and samples its own roll-out, seeded by
  :func:`rank_seed` (rank 0 = the config's seed, so a 1-rank run equals a plain run's
  data);
- every optimizer step averages the gradients of all ranks in one flat all-reduce
  (:func:`average_gradients`), after backward and before clipping, so every rank applies
  the same step to the same weights (broadcast from rank 0 at the start,
  :func:`broadcast_module`);
- advantage normalisation, the observation normaliser and every logged statistic use the
  moments of all ranks' samples (:func:`mean_var`, :func:`all_reduce_sum_`), not a rank's.

Outside such a run every helper here is a no-op (:func:`active` is false) and a
single-process run computes exactly what it did before.

Backend: NCCL on CUDA devices, gloo on the CPU (tests, CI). Rank ``r`` uses
``cuda:LOCAL_RANK``. Collectives time out after :data:`TIMEOUT_ENV` seconds (default
:data:`DEFAULT_TIMEOUT_S`), so a rank that dies or hangs ends the job instead of
blocking the others for ever; ``torchrun`` itself stops the other workers when one fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

TIMEOUT_ENV = "GPU_VECENV_DIST_TIMEOUT"
"""Environment variable: seconds a collective (and the rendezvous) may wait."""
DEFAULT_TIMEOUT_S = 300
RANK_SEED_STRIDE = 1_000_003
"""Rank ``r`` of a run with seed ``s`` seeds its envs and its sampling generator with
``s + r * RANK_SEED_STRIDE`` (a prime): rank-distinct, reproducible, and rank ``r`` sees
the envs a plain run with that seed would see."""


def launched() -> bool:
    """Whether this process was started by ``torchrun`` (its environment variables)."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def active() -> bool:
    """Whether a process group is up (this run is data-parallel, 1 rank or more)."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if active() else 0


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def is_main() -> bool:
    """Rank 0, the one that writes logs, checkpoints' model and the progress bar (also
    true outside a data-parallel run)."""
    return rank() == 0


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def rank_seed(seed: int, rank_index: int | None = None) -> int:
    """The seed of rank ``rank_index`` (default: this rank): ``seed + rank *
    RANK_SEED_STRIDE``."""
    r = rank() if rank_index is None else rank_index
    return seed + r * RANK_SEED_STRIDE


def rank_device(device: torch.device) -> torch.device:
    """The device of this rank for the configured ``device``: ``cuda`` (no index) becomes
    ``cuda:LOCAL_RANK``; an explicit index is refused with several ranks on one host."""
    if device.type != "cuda" or not launched():
        return device
    local = local_rank()
    if device.index is not None and device.index != local and int(
            os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
        raise ValueError(f"trainer.device is {device}, but in a run of several processes "
                         f"per host each uses cuda:LOCAL_RANK (this one cuda:{local}): set "
                         "trainer.device to auto or cuda")
    if local >= torch.cuda.device_count():
        raise RuntimeError(f"LOCAL_RANK {local} but torch sees {torch.cuda.device_count()} "
                           "CUDA GPU(s): start at most that many processes per node")
    return torch.device("cuda", local)


def timeout() -> timedelta:
    return timedelta(seconds=float(os.environ.get(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))


def init(device: torch.device) -> bool:
    """Join the process group of a ``torchrun`` launch (NCCL on CUDA, else gloo), unless
    one is up already or this is no such launch; returns :func:`active`."""
    if active() or not launched():
        return active()
    if device.type == "cuda":
        torch.cuda.set_device(device)
        # device_id binds the group to this rank's GPU (barriers and collectives use it)
        dist.init_process_group("nccl", timeout=timeout(), device_id=device)
    else:
        dist.init_process_group("gloo", timeout=timeout())
    return True


SHUTDOWN_TIMEOUT_ENV = "GPU_VECENV_SHUTDOWN_TIMEOUT"
"""Environment variable: seconds leaving the process group may take."""
DEFAULT_SHUTDOWN_TIMEOUT_S = 60.0


def shutdown(succeeded: bool = True) -> bool:
    """Leave the process group (end of a ``torchrun`` worker); ``True`` when done, or when
    there was none.

    Close every trainer of the group first (:meth:`Trainer.close
    <gpu_vecenv.train.trainer.Trainer.close>`): NCCL cannot destroy a communicator while a
    CUDA graph that captured its all-reduces is alive, and waits for ever. The queued work
    is finished (a device sync), then the group destroyed; after a failure
    (``succeeded=False``) it is aborted instead, which waits for no other rank. Both run in
    a helper thread bounded by :data:`SHUTDOWN_TIMEOUT_ENV` seconds (default
    :data:`DEFAULT_SHUTDOWN_TIMEOUT_S`): past it, one line on stderr says so and ``False``
    is returned (the caller exits at once, non-zero)."""
    import gc
    import sys
    import threading

    if not active():
        return True
    gc.collect()  # graphs of trainers nobody holds any more (a reference cycle keeps them)
    limit = float(os.environ.get(SHUTDOWN_TIMEOUT_ENV, DEFAULT_SHUTDOWN_TIMEOUT_S))
    nccl = backend() == "nccl"
    abort = getattr(dist.distributed_c10d, "_abort_process_group", None)

    def leave() -> None:
        if succeeded:
            if nccl:
                torch.cuda.synchronize()
            dist.destroy_process_group()
        else:
            (abort if nccl and abort else dist.destroy_process_group)()

    worker = threading.Thread(target=_quietly(leave), name="gpu-vecenv-shutdown", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        print(f"gpu-vecenv: rank {rank()} could not leave the process group within "
              f"{limit:g} s ({SHUTDOWN_TIMEOUT_ENV}); exiting without waiting for it",
              file=sys.stderr, flush=True)
        return False
    return True


def _quietly(fn):
    """``fn`` with any exception printed in one line (a thread's traceback is noise here:
    the group is being left anyway)."""
    import sys

    def run() -> None:
        try:
            fn()
        except Exception as exc:  # noqa: BLE001
            print(f"gpu-vecenv: rank {rank()}: leaving the process group: "
                  f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                  file=sys.stderr, flush=True)
    return run


def envs_per_rank(global_num_envs: int, ranks: int) -> int:
    """``trainer.num_envs_global`` split evenly over ``ranks``; a ``ValueError`` that says
    what would divide when it does not."""
    if global_num_envs < ranks or global_num_envs % ranks:
        lower = max(ranks, global_num_envs // ranks * ranks)
        raise ValueError(
            f"trainer.num_envs_global={global_num_envs} does not split evenly over {ranks} "
            f"ranks; use a multiple of {ranks} (e.g. {lower} or {lower + ranks}), or "
            "trainer.num_envs for the envs of each rank")
    return global_num_envs // ranks


def backend() -> str | None:
    return str(dist.get_backend()) if active() else None


# -- collectives: no-ops outside a data-parallel run --

def all_reduce_sum_(tensor: torch.Tensor) -> torch.Tensor:
    """Sum ``tensor`` over the ranks, in place."""
    if active():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_max_(tensor: torch.Tensor) -> torch.Tensor:
    """The largest value over the ranks, elementwise, in place."""
    if active():
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor


def all_reduce_mean_(tensor: torch.Tensor) -> torch.Tensor:
    """Average ``tensor`` over the ranks, in place (sum, then divide: gloo has no AVG)."""
    if active():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor.div_(dist.get_world_size())
    return tensor


def average_gradients(params: Iterable[torch.nn.Parameter]) -> None:
    """Replace every parameter's gradient by its mean over the ranks: the gradients are
    copied into one flat buffer, all-reduced once, and the parameters' ``.grad`` become
    views into it (a parameter without a gradient counts as zeros)."""
    if not active():
        return
    params = [p for p in params if p.requires_grad]
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    all_reduce_mean_(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p)
        offset += n


def mean_var(x: torch.Tensor, dim: int | None = None, unbiased: bool = True
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean and variance of the samples of ``x`` over all ranks, and their count: over
    every element (``dim=None``, scalars) or along ``dim`` (the rest kept). Two passes
    (mean, then squared deviations), as accurate as a single process's ``torch.var``."""
    # new_full, not torch.tensor: no host-to-device copy, so a CUDA graph can hold it.
    n = x.new_full((1,), float(x.numel() if dim is None else x.shape[dim]))
    total = x.sum() if dim is None else x.sum(dim)
    packed = all_reduce_sum_(torch.cat([total.reshape(-1), n]))
    count = packed[-1]
    mean = (packed[:-1] / count).reshape(total.shape)
    centred = x - (mean if dim is None else mean.unsqueeze(dim))
    sq = all_reduce_sum_(centred.square().sum() if dim is None else centred.square().sum(dim))
    var = sq / (count - 1.0 if unbiased else count)
    return mean, var, count


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """:func:`gpu_vecenv.train.losses.normalize_advantages` with the mean and (unbiased)
    std of all ranks' advantages."""
    from gpu_vecenv.train import losses

    if not active():
        return losses.normalize_advantages(advantages, eps)
    mean, var, _ = mean_var(advantages)
    return (advantages - mean) / (var.sqrt() + eps)


def agree_any(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` is true on any rank (one host sync)."""
    if not active():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def agree_min(value: int, device: torch.device) -> int:
    """The smallest ``value`` over the ranks (one host sync)."""
    if not active():
        return value
    t = torch.tensor([value], dtype=torch.int64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return int(t.item())


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank."""
    if not active():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_module(module: torch.nn.Module) -> None:
    """Rank 0's parameters and buffers copied into ``module`` on every rank."""
    if not active():
        return
    with torch.no_grad():
        for tensor in module.state_dict().values():
            if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                dist.broadcast(tensor, src=0)


class RanksNotAgreeing(RuntimeError):
    """After a stop request (a signal), the ranks could not agree to stop in time
    (:mod:`gpu_vecenv.train.stop_agreement`): another rank died or hangs."""


_PEER_FAILURE_TEXT = ("Connection closed by peer", "Connection reset by peer",
                      "remote worker", "Watchdog caught collective operation timeout",
                      "NCCL communicator was aborted", "timed out")


def is_peer_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective that failed because another rank died or hung
    (that rank reports the cause; this one only stops)."""
    return active() and (isinstance(exc, (RanksNotAgreeing, getattr(dist, "DistError", ())))
                         or any(text in str(exc) for text in _PEER_FAILURE_TEXT))


def stop_after_peer_failure(exc: BaseException, prefix: str) -> int:
    """Say in one line that this rank stops because another failed, give that rank a
    moment to exit first (so ``torchrun`` names it as the root cause) and return the
    exit status, 1."""
    import sys
    import time

    print(f"{prefix}: rank {rank()} stopped: another rank failed or hung "
          f"({type(exc).__name__}); that rank's error is the cause", file=sys.stderr,
          flush=True)
    time.sleep(2.0)
    return 1


def barrier() -> None:
    if active():
        dist.barrier()
