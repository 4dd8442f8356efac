"""Every classic kernel against the torch reference on the same GPU.

- State injection: >= 100,000 states the reference visits, with mixed elapsed steps,
  pending autoresets, RNG counters and 3% invalid actions, one step in each autoreset mode.
- Whole roll-outs, step by step, same seed: 10,000 steps x 4,096 envs (NEXT_STEP) and
  1,000 steps in SAME_STEP and DISABLED, across autoresets (the shared RNG makes the
  resets identical).

Both backends run float32 ops that round alike (-fmad=false, torch's reciprocal for
division by a constant, CUDA's libm on both sides), so results are expected bit-identical;
the injection test holds floats to 1e-5 and flags exactly, the roll-outs report the first
step and size of any difference.
"""

from __future__ import annotations

import pytest
import torch
from gymnasium.vector import AutoresetMode

from .classic import CLASSIC_IDS, MODES, make_pair, random_actions

pytestmark = pytest.mark.gpu

NUM_INJECTED = 131_072


def _visited_states(env_id: str, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """``NUM_INJECTED`` states from a 4,096-env reference roll-out (32 snapshots)."""
    _, ref = make_pair(env_id, 4096)
    ref.reset(seed=11)
    snaps = []
    for t in range(32 * 7):
        ref.step(random_actions(ref, gen))
        if t % 7 == 6:
            snaps.append({k: v.clone() for k, v in ref.buffers.state.items()})
    return {k: torch.cat([s[k] for s in snaps]) for k in snaps[0]}


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_state_injection(env_id):
    gen = torch.Generator(device="cuda").manual_seed(5)
    states = _visited_states(env_id, gen)
    n = NUM_INJECTED
    for mode in MODES:
        cuda_env, ref = make_pair(env_id, n, mode)
        limit = ref.max_episode_steps
        elapsed = torch.randint(0, limit, (n,), device="cuda", generator=gen, dtype=torch.int32)
        elapsed[::5] = limit - 1
        injected = {
            **states,
            "elapsed_steps": elapsed,
            "rng_counter": torch.randint(0, 2**40, (n,), device="cuda", generator=gen),
            "rng_seed": torch.randint(-(2**62), 2**62, (n,), device="cuda", generator=gen),
            "autoreset_pending": torch.rand(n, device="cuda", generator=gen) < 0.25,
        }
        obs_c = cuda_env.set_state(injected)
        obs_r = ref.set_state(injected)
        assert torch.equal(obs_c, obs_r), f"{mode}: observe differs"
        action = random_actions(ref, gen, invalid_fraction=0.03)
        out_c = cuda_env.step(action)
        out_r = ref.step(action)
        ref_errors, cuda_errors = int(ref.buffers.error_count), int(cuda_env.buffers.error_count)
        assert cuda_errors == ref_errors == int((~ref.actions.valid_mask(action)).sum()) > 0

        for name in ("terminated", "truncated"):
            i = 2 if name == "terminated" else 3
            assert torch.equal(out_c[i], out_r[i]), f"{mode} {name}"
        for key, value in ref.get_state().items():
            got = cuda_env.get_state()[key]
            if value.dtype.is_floating_point:
                torch.testing.assert_close(got, value, atol=1e-5, rtol=0,
                                           msg=lambda m, k=key, md=mode: f"{md} {k}: {m}")
            else:
                assert torch.equal(got, value), f"{mode} {key}"
        torch.testing.assert_close(out_c[0], out_r[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(out_c[1], out_r[1], atol=1e-5, rtol=0)
        assert torch.equal(cuda_env.buffers.invalid_action, ref.buffers.invalid_action)
        if mode == AutoresetMode.SAME_STEP:
            torch.testing.assert_close(out_c[4]["final_obs"], out_r[4]["final_obs"],
                                       atol=1e-5, rtol=0)
        exact = all(torch.equal(a, b) for a, b in zip(out_c[:4], out_r[:4], strict=True))
        print(f"{env_id} {mode.name}: {n} injected states, bit-identical outputs: {exact}")


def _rollout(env_id: str, mode: AutoresetMode, steps: int, n: int = 4096) -> None:
    cuda_env, ref = make_pair(env_id, n, mode)
    gen = torch.Generator(device="cuda").manual_seed(3)
    obs_c, _ = cuda_env.reset(seed=2024)
    obs_r, _ = ref.reset(seed=2024)
    assert torch.equal(obs_c, obs_r)
    mismatch = torch.zeros(steps, dtype=torch.int64, device="cuda")
    max_diff = torch.zeros(steps, dtype=torch.float32, device="cuda")
    episodes = torch.zeros((), dtype=torch.int64, device="cuda")
    for t in range(steps):
        action = random_actions(ref, gen)
        c = cuda_env.step(action)
        r = ref.step(action)
        diff = (c[0] - r[0]).abs().amax() + (c[1] - r[1]).abs().amax()
        bad = (c[0] != r[0]).any(dim=1) | (c[1] != r[1]) | (c[2] != r[2]) | (c[3] != r[3])
        if mode == AutoresetMode.SAME_STEP:
            bad |= (c[4]["final_obs"] != r[4]["final_obs"]).any(dim=1)
        mismatch[t] = bad.sum()
        max_diff[t] = diff
        done = r[2] | r[3]
        episodes += done.sum()
        if mode == AutoresetMode.DISABLED and t % 10 == 9:
            # Reset the finished envs on both (a device mask; no host round trip).
            pending = ref.buffers.autoreset_pending.clone()
            pending[0] = True  # never empty
            cuda_env.reset(options={"reset_mask": pending})
            ref.reset(options={"reset_mask": pending})
    for key, value in ref.get_state().items():
        assert torch.equal(cuda_env.get_state()[key], value), f"final state {key} differs"
    bad_steps = torch.nonzero(mismatch).flatten()
    print(f"{env_id} {mode.name}: {steps} steps x {n} envs, {int(episodes)} episodes ended, "
          f"steps with any difference: {len(bad_steps)}, max |diff| {float(max_diff.max()):.3g}")
    assert len(bad_steps) == 0, (
        f"first difference at step {int(bad_steps[0])} in {int(mismatch[bad_steps[0]])} envs")
    assert int(episodes) > 0


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_rollout_next_step_10k(env_id):
    _rollout(env_id, AutoresetMode.NEXT_STEP, 10_000)


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_rollout_other_modes(env_id, mode):
    _rollout(env_id, mode, 1_000)
