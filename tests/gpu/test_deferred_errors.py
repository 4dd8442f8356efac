"""Deferred invalid-action reports reach the host without a sync or an explicit check."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv import make_vec
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.backends.flag_copy import FlagCopy
from gpu_vecenv.vector_env import GpuVectorEnv

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("backend", ["cuda", "torch"])
def test_deferred_error_surfaces_within_a_few_steps(backend):
    env = make_vec("GPUCartPole-v1", 64, device="cuda", backend=backend, strict=False)
    env.reset(seed=0)
    good = torch.zeros(64, dtype=torch.int64, device="cuda")
    bad = good.clone()
    bad[5] = 9
    before = env.get_state()
    env.step(bad)
    after = env.get_state()
    for key in before:
        assert torch.equal(before[key][5], after[key][5]), key
    assert not torch.equal(before["x"], after["x"]), "the other envs stepped"
    steps = 0
    with pytest.raises(InvalidActionError, match="1 invalid action"):
        while steps < 4 * GpuVectorEnv.ERROR_FLAG_INTERVAL:
            steps += 1
            torch.cuda.synchronize()
            env.step(good)
    assert steps <= 2 * GpuVectorEnv.ERROR_FLAG_INTERVAL + 1
    env.step(good)  # reported once, then cleared
    env.check_errors()


def test_the_flag_copy_waits_for_the_work_queued_before_it_and_then_lands():
    count = torch.zeros((), dtype=torch.int32, device="cuda")
    host = torch.full((), -1, dtype=torch.int32, pin_memory=True)
    copy = FlagCopy(count, host)
    assert copy.arrived()  # none started
    torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time queued before the copy
    count.fill_(7)
    copy.start()
    assert not copy.arrived() and int(host) == -1
    copy.wait()
    assert copy.arrived() and int(host) == 7
    count.fill_(3)  # a copy of the current value each time
    copy.start()
    copy.wait()
    assert int(host) == 3


def test_the_flag_copy_follows_the_current_stream_of_its_device():
    count = torch.zeros((), dtype=torch.int32, device="cuda")
    host = torch.zeros((), dtype=torch.int32, pin_memory=True)
    copy = FlagCopy(count, host)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        count.fill_(5)
        copy.start()  # after the fill on `side`, not on the default stream
    assert not copy.arrived()
    copy.wait()
    assert int(host) == 5


def test_a_sync_check_is_not_followed_by_a_second_report_from_a_copy_in_flight():
    env = make_vec("GPUCartPole-v1", 64, device="cuda", backend="cuda", strict=False)
    env.reset(seed=0)
    good = torch.zeros(64, dtype=torch.int64, device="cuda")
    bad = good.clone()
    bad[3] = 9
    torch.cuda._sleep(200_000_000)  # about 0.1 s: the copies below wait behind it
    env.step(bad)  # the first step after reset() starts a copy
    for _ in range(GpuVectorEnv.ERROR_FLAG_INTERVAL):
        env.step(good)  # the copy has not landed: no report; the last step starts another
    with pytest.raises(InvalidActionError, match="1 invalid action"):
        env.check_errors()
    for _ in range(3 * GpuVectorEnv.ERROR_FLAG_INTERVAL):
        torch.cuda.synchronize()
        env.step(good)  # the copies that were in flight read 1 before the count was zeroed
    env.check_errors()
