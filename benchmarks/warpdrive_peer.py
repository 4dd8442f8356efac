"""WarpDrive's Tag, timed the way its trainer runs it, for side-by-side benchmarks in one process.

WarpDrive (rl-warp-drive 2.7.1, Salesforce) steps ``TagContinuous`` with a PyCUDA kernel
(one block per game, one thread per agent) and draws actions with its own ``CUDASampler``
(one curand state per agent thread, from probabilities in a torch tensor). Its trainer runs,
per step (``warp_drive/training/trainers/trainer_base.py``, ``_generate_rollout_batch``):
the policy, ``sample()`` once per action type with the copy into ``sampled_actions``, then
``step_all_envs()``. :func:`time_tag` times that loop without the policy (uniform
probabilities made once) and the step kernel alone, with CUDA events, median of repeats.
Used by ``scripts/bench_tag.py --vs warpdrive`` (through :func:`gpu_vecenv.bench.load_peer`);
WarpDrive, its old ``gym`` and PyCUDA are imported only here, only when asked for.

One process, one context: importing WarpDrive's PyCUDA managers runs
``warp_drive/utils/autoinit_pycuda.py``, which calls ``torch.cuda.init()`` and pushes the
device's *primary* context (the one torch and our kernels use), so torch tensors, our
kernels and WarpDrive's share it. We import it after our env ran, on torch's current device.
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import time
from dataclasses import fields
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from gpu_vecenv.envs.tag import TagParams

WARPDRIVE_TAG_KWARGS = frozenset({
    "num_taggers", "num_runners", "grid_length", "episode_length", "starting_location_x",
    "starting_location_y", "starting_directions", "seed", "max_speed", "skill_level_runner",
    "skill_level_tagger", "max_acceleration", "min_acceleration", "max_turn", "min_turn",
    "num_acceleration_levels", "num_turn_levels", "edge_hit_penalty", "use_full_observation",
    "num_other_agents_observed", "tagging_distance", "tag_reward_for_tagger",
    "step_penalty_for_tagger", "tag_penalty_for_runner", "step_reward_for_runner",
    "end_of_game_reward_for_runner", "runner_exits_game_after_tagged", "env_backend",
})
"""The keyword arguments of WarpDrive 2.7.1's ``TagContinuous.__init__``
(``example_envs/tag_continuous/tag_continuous.py``)."""

OURS_ONLY = frozenset({"observe_own_role", "observe_own_state", "egocentric",
                       "fixed_start_positions"})
""":class:`TagParams` fields WarpDrive has no argument for. Its rules are
``observe_own_role=False`` (one observation float less per agent) and
``fixed_start_positions=True`` (no start drawn at reset)."""

MAX_THREADS_PER_BLOCK = 1024
"""Games of more agents need WarpDrive's multi-block mode, which :func:`time_tag` does not run."""

CURAND_HEAP_BYTES_PER_AGENT = 256
"""Device-heap bytes reserved per agent thread: ``init_random`` (``cuda_includes/core/
random.cu``) ``new``s one 48-byte ``curandState_t`` per thread; 256 leaves room for the
allocator's own overhead."""

INSTALL_HINT = ("rl-warp-drive 2.7.1, the old gym it imports and pycuda must import; on the "
                "GPU machine: source .device-kit/peers/setup.sh; "
                "PYTHONPATH=$PEERS_PATH python3 ...")


def warpdrive_problem() -> str | None:
    """Why WarpDrive's Tag cannot be timed here (None: it can)."""
    try:
        import pycuda.driver  # noqa: F401
        import warp_drive  # noqa: F401
        from example_envs.tag_continuous.tag_continuous import TagContinuous  # noqa: F401
    except ImportError as exc:
        return f"{INSTALL_HINT} ({exc})"
    import torch

    if not torch.cuda.is_available():
        return "WarpDrive's PyCUDA backend needs a CUDA device"
    return None


def warpdrive_env_kwargs(params: TagParams, seed: int = 0) -> dict[str, Any]:
    """WarpDrive's ``TagContinuous(**kwargs)`` for the same game as ``params``: every field
    of :class:`TagParams` but :data:`OURS_ONLY` has WarpDrive's name and meaning."""
    kwargs = {f.name: getattr(params, f.name) for f in fields(params) if f.name not in OURS_ONLY}
    unknown = set(kwargs) - WARPDRIVE_TAG_KWARGS
    if unknown:
        raise ValueError(f"TagParams fields with no WarpDrive counterpart: {sorted(unknown)}")
    return dict(kwargs, seed=seed, env_backend="pycuda")


def register_cap(threads_per_block: int) -> int | None:
    """``-maxrregcount`` that lets a block of ``threads_per_block`` threads launch (65,536
    registers per block, allocated per warp in multiples of 8 per thread); None: no cap
    needed (255 is the hardware's own limit)."""
    threads = -(-threads_per_block // 32) * 32
    cap = 65536 // threads // 8 * 8
    return cap if cap < 255 else None


def curand_heap_bytes(agent_threads: int) -> int:
    """Device malloc heap for ``agent_threads`` curand states (all the games of every case
    that runs in the process: the heap is sized once, before the first ``init_random``)."""
    return agent_threads * CURAND_HEAP_BYTES_PER_AGENT + (64 << 20)


def _raise_heap(nbytes: int) -> int:
    import pycuda.driver as drv

    if drv.Context.get_limit(drv.limit.MALLOC_HEAP_SIZE) < nbytes:
        with contextlib.suppress(drv.Error):  # refused once a kernel used malloc: checked below
            drv.Context.set_limit(drv.limit.MALLOC_HEAP_SIZE, nbytes)
    heap = drv.Context.get_limit(drv.limit.MALLOC_HEAP_SIZE)
    if heap < nbytes:
        raise RuntimeError(f"the device malloc heap is {heap} bytes and cannot grow to {nbytes} "
                           "(size it before the first WarpDrive game of the process)")
    return heap


@contextlib.contextmanager
def _nvcc_flags(extra: str):
    """nvcc (11.5+) appends ``NVCC_APPEND_FLAGS`` to every command line, WarpDrive's too."""
    before = os.environ.get("NVCC_APPEND_FLAGS")
    if extra:
        os.environ["NVCC_APPEND_FLAGS"] = f"{before or ''} {extra}".strip()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("NVCC_APPEND_FLAGS", None)
        else:
            os.environ["NVCC_APPEND_FLAGS"] = before


def _timed(run, steps: int, reset, repeats: int) -> dict[str, float]:
    """Median over ``repeats`` windows of ``steps`` calls of ``run``, each from a fresh reset
    (WarpDrive's step kernel asserts ``t <= episode_length``, so a window never passes it)."""
    import torch

    walls, hosts = [], []
    for _ in range(repeats):
        reset()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        began = time.perf_counter()
        for _ in range(steps):
            run()
        hosts.append((time.perf_counter() - began) / steps)
        end.record()
        end.synchronize()
        walls.append(start.elapsed_time(end) / 1000 / steps)
    median = statistics.median(walls)
    return {"seconds_per_step": median, "host_seconds_per_step": statistics.median(hosts),
            "spread": (max(walls) - min(walls)) / median}


def time_tag(games: int, params: TagParams, steps: int, repeats: int, heap_bytes: int,
             seed: int = 0) -> dict[str, Any]:
    """WarpDrive's ``TagContinuous`` of ``games`` games of ``params``, PyCUDA backend.

    Two forms, each a median over ``repeats`` windows of ``min(steps, episode_length)``
    steps after a warm-up: ``sampler+step`` (per step, its ``CUDASampler.sample`` once per
    action type from a fixed uniform probability tensor on the device, the copy into
    ``sampled_actions`` as its trainer does, then ``step_all_envs()``) and ``step`` (the step
    kernel alone, actions as last sampled). Left out of both, as they are not env work: the
    policy, the trainer's batch copies, its ``torch.cuda.synchronize()`` after each phase and
    its per-step ``done.any()`` read; games are reset between windows, not in them. So these
    are upper bounds of the rate WarpDrive's own trainer loop reaches.

    Returns ``games``, ``agents``, ``steps``, ``repeats``, ``trainer`` and ``step_only``
    (:func:`_timed` records, with ``env_steps_per_s``), ``registers``, ``register_cap``,
    ``heap_bytes``, ``warp_drive`` (version)."""
    problem = warpdrive_problem()
    if problem:
        raise RuntimeError(problem)
    agents = params.num_agents
    if agents > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"{agents} agents a game: WarpDrive's multi-block mode is not timed here")
    import numpy as np
    import torch

    os.environ.setdefault("CUDA_DEVICE", str(torch.cuda.current_device()))  # autoinit's device
    import pycuda.driver as drv
    from example_envs.tag_continuous.tag_continuous import TagContinuous
    from warp_drive.env_wrapper import EnvWrapper
    from warp_drive.managers.pycuda_managers.pycuda_function_manager import PyCUDASampler
    from warp_drive.training.utils.data_loader import create_and_push_data_placeholders
    from warp_drive.utils.constants import Constants

    heap = _raise_heap(heap_bytes)
    cap = register_cap(agents)
    with _nvcc_flags(f"-maxrregcount={cap}" if cap else ""):
        env = EnvWrapper(env_obj=TagContinuous(**warpdrive_env_kwargs(params, seed)),
                         num_envs=games, env_backend="pycuda")
    step_kernel = env.env.cuda_step
    registers = step_kernel.get_attribute(drv.function_attribute.NUM_REGS)
    if step_kernel.get_attribute(drv.function_attribute.MAX_THREADS_PER_BLOCK) < agents:
        raise RuntimeError(f"WarpDrive's step kernel ({registers} registers) cannot launch "
                           f"{agents} threads a block")
    first_obs = env.reset_all_envs()  # on the host once, then pushed to the device
    # The placeholder helper resets the (host) env once per game for an observation that is
    # the same every time (fixed starts): hand it that one, minutes sooner at 2,000 games.
    env.obs_at_reset = lambda: first_obs
    sampler = PyCUDASampler(env.cuda_function_manager)
    try:
        create_and_push_data_placeholders(
            env_wrapper=env, action_sampler=sampler,
            policy_tag_to_agent_id_map={"tagger": list(env.env.taggers),
                                        "runner": list(env.env.runners)},
            push_data_batch_placeholders=False)
        del env.obs_at_reset
        sampler.init_random(seed)
        _check_curand_states(env.cuda_function_manager, games * agents)
        data = env.cuda_data_manager
        nvec = env.env.action_space[0].nvec
        probabilities = [torch.full((games, agents, int(n)), 1.0 / int(n), device="cuda")
                         for n in nvec]
        actions = data.data_on_device_via_torch(Constants.ACTIONS)

        def sample_and_step():  # trainer_base.py _sample_actions_helper, then the step
            for i, probs in enumerate(probabilities):
                name = f"{Constants.ACTIONS}_{i}"
                sampler.sample(data, probs, name)
                actions[:, :, i] = data.data_on_device_via_torch(name)[:, :, 0]
            env.step_all_envs()

        window = min(steps, params.episode_length)
        _timed(sample_and_step, min(window, 20), env.reset_all_envs, 1)  # warm-up
        trainer = _timed(sample_and_step, window, env.reset_all_envs, repeats)
        step_only = _timed(env.step_all_envs, window, env.reset_all_envs, repeats)
        if not np.isfinite(data.pull_data_from_device(Constants.REWARDS)).all():
            raise RuntimeError("WarpDrive's rewards are not finite: its step did not run right")
    finally:
        sampler = None  # its __del__ frees the curand states (once), from WarpDrive's module:
        with contextlib.suppress(Exception):  # let that finish before the module unloads
            torch.cuda.synchronize()
        env = None
        gc.collect()
    for record in (trainer, step_only):
        record["env_steps_per_s"] = games / record["seconds_per_step"]
        record["agent_steps_per_s"] = games * agents / record["seconds_per_step"]
    return {"games": games, "agents": agents, "steps": window, "repeats": repeats,
            "trainer": trainer, "step_only": step_only, "registers": registers,
            "register_cap": cap, "heap_bytes": heap,
            "warp_drive": _version("rl-warp-drive")}


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "?"


def _check_curand_states(function_manager, count: int) -> None:
    """Every agent thread got its curand state (a ``new`` that found the heap full leaves a
    null pointer, which ``sample_actions`` would dereference and take the context down)."""
    import numpy as np
    import pycuda.driver as drv

    try:
        pointer, nbytes = function_manager._CUDA_module.get_global("states")
    except drv.Error as exc:  # not fatal: the heap is sized with a wide margin
        print(f"note: WarpDrive's curand states not checked ({exc})", flush=True)
        return
    states = np.empty(nbytes // 8, dtype=np.uint64)
    drv.memcpy_dtoh(states, pointer)
    missing = int((states[:count] == 0).sum())
    if missing:
        raise RuntimeError(f"{missing} of {count} curand states not allocated: raise the heap")
