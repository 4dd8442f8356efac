"""Compile every shipped kernel into the cache, so no run waits for a compiler.

Examples:
  gpu-vecenv compile                          (for the visible GPU)
  gpu-vecenv compile --arch sm_80 --arch sm_90   (no GPU needed: a Docker build, a login node)
  gpu-vecenv compile --kernel my_env.cu       (a custom env's kernel file too)

Builds each env's kernel file and, for every shipped PPO config whose network fits the
fused trainer kernels on that GPU, ``ppo_mlp.cu`` sized for it; prints what it built,
where, and how long it took. ``GPU_VECENV_COMPILER`` (auto, nvrtc, nvcc) chooses the
compiler and ``GPU_VECENV_CACHE_DIR`` the cache, as at run time.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Job:
    """One kernel file to build: ``name`` (``cuda_src/<name>.cu`` or ``path``), ``-D``
    flags, and what it serves (for the report)."""

    name: str
    label: str
    flags: tuple[str, ...] = ()
    path: str | None = None


def env_jobs() -> list[Job]:
    """Every env kernel file of the package; a file whose game binding builds one kernel at
    a time (``tag.cu``) kernel by kernel, as its backend builds it; a single-agent env's
    with the flags its backend adds (:func:`gpu_vecenv.backends.cuda.kernel_flags`)."""
    from gpu_vecenv.backends.compiler import CUDA_SRC
    from gpu_vecenv.backends.cuda import kernel_flags
    from gpu_vecenv.env_ids import list_ids, load_definition
    from gpu_vecenv.kernel_binding import KernelBinding
    from gpu_vecenv.multi_agent.kernel_binding import GameKernelBinding

    by_kernel: dict[str, GameKernelBinding] = {}
    single_agent = set()
    for env_id in list_ids():
        definition = load_definition(env_id)
        binding = getattr(definition, "kernel_binding", None)
        if isinstance(binding, GameKernelBinding) and binding.kernel_flags is not None:
            by_kernel[definition.name] = binding
        elif isinstance(binding, KernelBinding) and binding.path is None:
            single_agent.add(binding.source)
    jobs = []
    for path in sorted(CUDA_SRC.glob("*.cu")):
        binding = by_kernel.get(path.stem)
        if binding is not None:
            jobs += [Job(path.stem, f"{path.name} [{k}]", binding.flags_for(k))
                     for k in binding.kernels]
        elif path.stem != "ppo_mlp":
            flags = kernel_flags() if path.stem in single_agent else ()
            jobs.append(Job(path.stem, path.name, flags))
    return jobs


def fused_ppo_jobs(capability: tuple[int, int]) -> tuple[list[Job], list[str]]:
    """``ppo_mlp.cu`` for each network of the shipped PPO configs that fits on a GPU of
    ``capability`` (sized as the trainer sizes it), and notes on those skipped."""
    from gpu_vecenv.entry_points import make_vec
    from gpu_vecenv.train.config import PPOConfig
    from gpu_vecenv.train.config_loading import load_config
    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.policies import agent_roles, slot_assignment
    from gpu_vecenv.train.ppo_mlp_kernels import (
        SOURCE,
        choose_tile,
        compile_flags,
        mma_precision,
        shared_limit_of,
    )
    from gpu_vecenv.train.shipped_configs import shipped_config_paths

    limit = shared_limit_of(capability)
    jobs: dict[tuple[str, ...], Job] = {}
    notes = []
    for path in shipped_config_paths():
        config = load_config(path)
        t = config.trainer
        env = make_vec(t.env, 1, device="cpu", backend="torch", **t.env_kwargs)
        obs_dim = int(env.single_observation_space.shape[0])
        spec = ActionSpec.from_space(env.single_action_space)
        # A multi-agent env's policies train on torch ops: the kernels do not mask idle slots.
        multi_agent = agent_roles(env) is not None
        for name in slot_assignment(config, env):
            c = config.policy_config(name)
            if not isinstance(c, PPOConfig) or t.fused_kernels is False or multi_agent:
                continue
            hidden = tuple(c.hidden_sizes)
            tile = choose_tile(obs_dim, hidden, spec, limit)
            shape = "x".join(map(str, hidden))
            if tile is None:
                notes.append(f"{path.stem} ({shape}): does not fit the fused kernels on "
                             f"sm_{capability[0]}{capability[1]}; it trains on torch ops")
                continue
            flags = compile_flags(obs_dim, hidden, c.activation, spec, c.normalize_obs, tile,
                                  mma_precision(t.matmul_precision))
            label = f"ppo_mlp.cu [{path.stem}: {obs_dim}-{shape}, tile {tile}]"
            jobs.setdefault(flags, Job(SOURCE, label, flags))
        env.close()
    return list(jobs.values()), list(dict.fromkeys(notes))


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--arch", action="append", default=[], metavar="sm_XY",
                        help="GPU architecture to build for (repeatable); default: the "
                             "visible GPU's")
    parser.add_argument("--kernel", action="append", default=[], metavar="FILE.cu",
                        help="also build this kernel file (e.g. a custom env's)")
    parser.add_argument("--no-trainer", action="store_true",
                        help="skip the fused PPO kernels of the shipped configs")
    parser.add_argument("--strict", action="store_true",
                        help="fail (exit 1) if a compiler prints a warning")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="builds in parallel (default: the CPU count)")


def _capabilities(archs: list[str]) -> list[tuple[int, int]]:
    from gpu_vecenv.backends.compiler import parse_arch

    if archs:
        return list(dict.fromkeys(parse_arch(a) for a in archs))
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is visible: name the architectures with --arch "
                           "(e.g. --arch sm_90)")
    return [torch.cuda.get_device_capability()]


def main(args: argparse.Namespace) -> int:
    from gpu_vecenv.backends.compiler import (
        CudaCompileError,
        cache_dir,
        choose_compiler,
        compile_kernel,
    )

    capabilities = _capabilities(args.arch)
    compiler = choose_compiler()
    print(f"compiler: {compiler.describe()}\ncache: {cache_dir()}")
    work, notes = [], []
    for capability in capabilities:
        jobs = env_jobs() + [Job(Path(k).stem, Path(k).name, path=k) for k in args.kernel]
        if not args.no_trainer:
            try:
                ppo, skipped = fused_ppo_jobs(capability)
            except ImportError as exc:  # the train extra (PyYAML) is not installed
                ppo, skipped = [], [f"fused PPO kernels skipped: {exc}"]
            jobs += ppo
            notes += skipped
        work += [(capability, job) for job in jobs]

    def build(item):
        capability, job = item
        try:
            return item, compile_kernel(job.name, capability, job.flags, path=job.path,
                                        compiler=compiler), None
        except (CudaCompileError, FileNotFoundError, RuntimeError) as exc:
            return item, None, exc

    start = time.perf_counter()
    failed = warned = 0
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for (capability, job), result, error in pool.map(build, work):
            if error is not None:
                failed += 1
                print(f"FAILED  sm_{capability[0]}{capability[1]}  {job.label}\n{error}",
                      file=sys.stderr)
                continue
            status = "cached" if result.cached else f"built {result.seconds:5.1f} s"
            print(f"{status:13s} {result.target.name:11s} {job.label}  -> {result.path.name}")
            if result.log:
                warned += 1
                print(f"  compiler messages:\n{result.log}", file=sys.stderr)
    for note in notes:
        print(f"note: {note}")
    print(f"{len(work) - failed} of {len(work)} kernel builds ready in "
          f"{time.perf_counter() - start:.1f} s ({len(capabilities)} architecture(s)); "
          f"{failed} failed, {warned} with compiler messages")
    return 1 if failed or (args.strict and warned) else 0
