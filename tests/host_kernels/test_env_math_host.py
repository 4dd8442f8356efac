"""The kernels' per-env code (cuda_src/<env>.cu with common/single_agent_kernels.cuh),
compiled for the host, against the torch reference backend on the CPU, by state injection.

States are ones the reference visits in random roll-outs; elapsed steps, pending autoresets,
RNG counters and invalid actions are mixed in so every branch of the generic step runs:
time limits, all three autoreset modes, resets from the RNG, invalid actions left unchanged.
Host libm and torch's CPU kernels may differ in the last bit of sin/cos and torch's CPU
division is exact where the kernels multiply by torch-on-CUDA's reciprocal, so floats are
compared to 1e-6 + 1e-5 relative; integer and bool outputs are exact except for the few envs whose
termination test sits within that rounding of its threshold (counted and bounded).
"""

from __future__ import annotations

import zlib

import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv.buffers import StepOutputs
from gpu_vecenv.env_ids import load_module, shipped_ids
from gpu_vecenv.vector_env import GpuVectorEnv

from . import harness

ENV_IDS = shipped_ids(single_agent=True)
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
NUM_STATES = 4096


def _make(env_id: str, n: int, mode=AutoresetMode.NEXT_STEP) -> GpuVectorEnv:
    definition = load_module(env_id).DEFINITION
    return GpuVectorEnv(definition, n, device="cpu", backend="torch", autoreset_mode=mode,
                        strict=False)


def _random_actions(env: GpuVectorEnv, gen: torch.Generator, invalid_fraction: float):
    n, space = env.num_envs, env.single_action_space
    if env.actions.kind == "discrete":
        action = torch.randint(0, int(space.n), (n,), generator=gen)
        bad = torch.rand(n, generator=gen) < invalid_fraction
        junk = torch.tensor([-1, int(space.n), 2**40, -(2**40)])
        action[bad] = junk[torch.randint(0, 4, (int(bad.sum()),), generator=gen)]
        return action
    # Box: beyond the bounds too (valid: the env clips), plus NaN and +-inf (invalid).
    high = float(space.high.max())
    action = (torch.rand((n, *space.shape), generator=gen) * 2 - 1) * 1.5 * high
    bad = torch.rand(n, generator=gen) < invalid_fraction
    junk = torch.tensor([float("nan"), float("inf"), -float("inf")])
    action[bad, 0] = junk[torch.randint(0, 3, (int(bad.sum()),), generator=gen)]
    return action


def visited_states(env_id: str, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """``NUM_STATES`` states the reference reaches in random roll-outs (with autoresets)."""
    env = _make(env_id, 512)
    env.reset(seed=int(torch.randint(0, 2**31, (1,), generator=gen)))
    snapshots = []
    for t in range(80):
        env.backend.step(_random_actions(env, gen, 0.0), env._outputs)
        if t % 10 == 9:
            snapshots.append({k: v.clone() for k, v in env.buffers.state.items()})
    pool = {k: torch.cat([s[k] for s in snapshots]) for k in snapshots[0]}
    pick = torch.randint(0, len(next(iter(pool.values()))), (NUM_STATES,), generator=gen)
    return {k: v[pick] for k, v in pool.items()}


def _inject(env: GpuVectorEnv, states, gen: torch.Generator) -> None:
    n = env.num_envs
    limit = env.max_episode_steps or 1000
    elapsed = torch.randint(0, limit, (n,), generator=gen, dtype=torch.int32)
    elapsed[torch.rand(n, generator=gen) < 0.2] = limit - 1  # truncate on this step
    env.set_state({
        **states,
        "elapsed_steps": elapsed,
        "rng_counter": torch.randint(0, 2**40, (n,), generator=gen),
        "rng_seed": torch.randint(-(2**62), 2**62, (n,), generator=gen),
        "autoreset_pending": torch.rand(n, generator=gen) < 0.25,
    })
    env.buffers.error_count.zero_()


def _close(actual, expected, what, keep):
    torch.testing.assert_close(actual[keep], expected[keep], atol=1e-6, rtol=1e-5,
                               equal_nan=True, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_step_matches_reference(host_harness, tmp_path, env_id):
    gen = torch.Generator().manual_seed(zlib.crc32(env_id.encode()))
    states = visited_states(env_id, gen)
    for mode in MODES:
        env = _make(env_id, NUM_STATES, mode)
        _inject(env, states, gen)
        action = _random_actions(env, gen, 0.03)
        host = harness.run_env(host_harness, tmp_path, env, harness.OP_STEP, action)
        out = StepOutputs.allocate(env.num_envs, env.obs_dim, env.device,
                                   mode == AutoresetMode.SAME_STEP)
        env.backend.step(action, out)
        b = env.buffers

        assert torch.equal(host.invalid_action, b.invalid_action), mode
        assert host.error_count == int(b.error_count) == int(b.invalid_action.sum()) > 0
        # Termination is a threshold test: allow the rare env whose rounding decides it.
        differs = (host.terminated != out.terminated) | (host.truncated != out.truncated)
        assert int(differs.sum()) <= 3, f"{mode}: {int(differs.sum())} flags differ"
        keep = ~differs
        for name in ("elapsed", "rng_counter", "autoreset_pending"):
            assert torch.equal(getattr(host, name)[keep], getattr(b, name)[keep]), (mode, name)
        assert torch.equal(host.truncated[keep], out.truncated[keep])
        for name, value in b.state.items():
            _close(host.state[name], value, f"{mode} state {name}", keep)
        _close(host.obs, out.obs, f"{mode} obs", keep)
        _close(host.reward, out.reward, f"{mode} reward", keep)
        if mode == AutoresetMode.SAME_STEP:
            _close(host.final_obs, out.final_obs, f"{mode} final_obs", keep)
        # Invalid actions left their envs exactly as they were.
        bad = b.invalid_action
        for name in b.state:
            assert torch.equal(host.state[name][bad], states[name][bad])


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_and_observe_match_reference(host_harness, tmp_path, env_id):
    """Masked resets draw bit-identical initial states (same RNG, same float32 ops)."""
    gen = torch.Generator().manual_seed(7)
    env = _make(env_id, 2048)
    env.reset(seed=99)
    env.buffers.invalid_action.fill_(True)
    mask = torch.rand(env.num_envs, generator=gen) < 0.5
    host = harness.run_env(host_harness, tmp_path, env, harness.OP_RESET, mask=mask)
    obs = torch.empty(env.num_envs, env.obs_dim)
    env.backend.reset(mask, obs)
    b = env.buffers
    for name, value in b.state.items():
        assert torch.equal(host.state[name], value), name
    for name in ("elapsed", "rng_counter", "autoreset_pending", "invalid_action"):
        assert torch.equal(getattr(host, name), getattr(b, name)), name
    torch.testing.assert_close(host.obs, obs, atol=1e-6, rtol=1e-6)

    host = harness.run_env(host_harness, tmp_path, env, harness.OP_OBSERVE)
    torch.testing.assert_close(host.obs, obs, atol=1e-6, rtol=1e-6)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t


# (num_envs, state row stride, actions offset by one element): every chunk on the block
# path; the block path and a tail of n % E envs, with aligned state rows (padded) and with
# rows as EnvBuffers lays them out (unaligned for n % E != 0: value by value); actions
# unaligned, so every env takes the one-env path; a single env.
LAYOUTS = [(4096, None, False), (4099, 4100, False), (4099, None, False), (4096, None, True),
           (1, None, False)]


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_envs_per_thread_is_bitwise_the_same(host_harness, tmp_path, env_id):
    """Kernels built with GV_ENVS_PER_THREAD = 2 or 4 (block loads and stores, the tail,
    unaligned state rows and unaligned actions), and the small-launch step (seeds and RNG
    counters loaded up front), write exactly what one env per thread writes, in every
    mode."""
    gen = torch.Generator().manual_seed(zlib.crc32(env_id.encode()) + 1)
    states = visited_states(env_id, gen)
    for n, stride, offset_action in LAYOUTS:
        for mode in MODES:
            env = _make(env_id, n, mode)
            _inject(env, {k: v[torch.arange(n) % NUM_STATES] for k, v in states.items()}, gen)
            action = _random_actions(env, gen, 0.03)
            one = harness.run_env(host_harness, tmp_path, env, harness.OP_STEP, action)
            for per_thread, prefetch in ((1, True), (2, False), (4, False)):
                many = harness.run_env(host_harness, tmp_path, env, harness.OP_STEP, action,
                                       envs_per_thread=per_thread, state_row_stride=stride,
                                       offset_action=offset_action, prefetch_rng=prefetch)
                what = (f"n={n} stride={stride} offset_action={offset_action} {mode} "
                        f"E={per_thread} prefetch_rng={prefetch}")
                assert one.error_count == many.error_count, what
                for name in ("elapsed", "rng_counter", "autoreset_pending", "invalid_action",
                             "obs", "reward", "terminated", "truncated", "final_obs"):
                    assert torch.equal(_bits(getattr(one, name)), _bits(getattr(many, name))), \
                        f"{what}: {name}"
                for name in one.state:
                    assert torch.equal(_bits(one.state[name]), _bits(many.state[name])), \
                        f"{what}: state {name}"
