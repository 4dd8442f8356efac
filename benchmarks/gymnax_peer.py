"""gymnax, timed the way its users run it, for side-by-side benchmarks in one process.

A gymnax roll-out is ``jax.jit(lax.scan(vmap(step)))``: ``num_steps`` steps of ``n`` envs
with random actions drawn inside the scan (as PureJaxRL does), one compiled program per
call. :func:`time_rollout` times such calls on whatever device JAX uses (the GPU where
``jax[cuda]`` is installed). Used by ``gpu-vecenv bench --vs gymnax`` and
``scripts/bench_capture.py --vs gymnax`` (through :func:`gpu_vecenv.bench.load_peer`); JAX
and gymnax are imported only here, only when asked for.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

GYMNAX_IDS = {
    "GPUCartPole-v1": "CartPole-v1",
    "GPUAcrobot-v1": "Acrobot-v1",
    "GPUMountainCar-v0": "MountainCar-v0",
    "GPUMountainCarContinuous-v0": "MountainCarContinuous-v0",
    "GPUPendulum-v1": "Pendulum-v1",
}
"""Our ids and gymnax's names for the same envs."""


def gymnax_problem() -> str | None:
    """Why gymnax cannot be timed here (None: it can)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with torch
    try:
        import gymnax  # noqa: F401
        import jax
    except ImportError as exc:
        return f"jax and gymnax must import ({exc})"
    if jax.devices()[0].platform != "gpu":
        print(f"note: jax runs on {jax.devices()[0].platform}, not a GPU", flush=True)
    return None


def time_calls(run: Callable[[], None], sync: Callable[[], None], calls: int
               ) -> tuple[float, float]:
    """``(wall seconds, host seconds)`` of ``calls`` calls of ``run``: from a synchronized
    start to a synchronized end, and until the last call returned (queued, on a GPU)."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        run()
    queued = time.perf_counter()
    sync()
    return time.perf_counter() - start, queued - start


def measure(run: Callable[[], None], sync: Callable[[], None], seconds: float,
            repeats: int) -> dict[str, Any]:
    """Median over ``repeats`` timed runs of as many calls as fill ``seconds``."""
    probe, _ = time_calls(run, sync, 3)
    calls = int(min(max(seconds / (probe / 3), 3), 100_000))
    runs = [time_calls(run, sync, calls) for _ in range(repeats)]
    walls = [wall for wall, _ in runs]
    return {"calls_per_repeat": calls, "repeats": repeats,
            "seconds_per_call": statistics.median(walls) / calls,
            "host_seconds_per_call": statistics.median(host for _, host in runs) / calls,
            "spread": (max(walls) - min(walls)) / statistics.median(walls)}


def time_rollout(env_id: str, n: int, num_steps: int, seconds: float, repeats: int,
                 trajectory: bool = False) -> dict[str, Any]:
    """gymnax's ``env_id`` (one of :data:`GYMNAX_IDS`): ``num_steps`` vmapped steps of ``n``
    envs with uniform random actions as one jitted scan, per call. With ``trajectory`` the
    scan also returns the stacked (obs, action, reward, flags), as a storage would hold.

    Returns :func:`measure`'s record plus ``name``, ``num_envs``, ``env_steps_per_s``."""
    import gymnax
    import jax

    env, params = gymnax.make(GYMNAX_IDS[env_id])
    step = jax.vmap(env.step, in_axes=(0, 0, 0, None))
    reset = jax.vmap(env.reset, in_axes=(0, None))
    space = env.action_space(params)

    def actions(key):  # one draw for all envs, as a vmapped sample() would give
        if hasattr(space, "n"):  # Discrete
            return jax.random.randint(key, (n,), 0, space.n)
        return jax.random.uniform(key, (n, *space.shape), minval=space.low, maxval=space.high)

    def body(carry, _):
        key, state = carry
        key, key_action, key_step = jax.random.split(key, 3)
        action = actions(key_action)
        result = step(jax.random.split(key_step, n), state, action, params)
        obs, state, reward = result[:3]
        flags = result[3:-1]  # (terminated, truncated) since gymnax 1.0, (done,) before
        return (key, state), ((obs, action, reward, *flags) if trajectory else None)

    @jax.jit
    def rollout(key, state):
        return jax.lax.scan(body, (key, state), None, length=num_steps)

    key, reset_key = jax.random.split(jax.random.PRNGKey(0))
    _, state = reset(jax.random.split(reset_key, n), params)
    carry = (key, state)
    for _ in range(2):  # compile, then one call as timed
        carry, _ = rollout(*carry)
    jax.block_until_ready(carry)

    def run():
        nonlocal carry
        carry, _ = rollout(*carry)

    record = measure(run, lambda: jax.block_until_ready(carry), seconds, repeats)
    name = "gymnax-scan-trajectory" if trajectory else "gymnax-scan"
    record.update(name=name, env=env_id, num_envs=n, num_steps=num_steps,
                  backend=f"{name} (jax {jax.__version__}, {jax.devices()[0].platform})",
                  gymnax=getattr(gymnax, "__version__", "?"),
                  env_steps_per_s=n * num_steps / record["seconds_per_call"])
    return record
