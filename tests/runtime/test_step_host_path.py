"""The cheap paths of ``step()`` keep its semantics: ``copy=True`` outputs (carved from an
:class:`~gpu_vecenv.buffers.OutputRing`) never share memory and are never overwritten;
canonical actions pass ``convert`` as they are and everything else is still converted or
refused; deferred invalid-action flags are still reported once their copy arrives."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gpu_vecenv import buffers
from gpu_vecenv.actions import InvalidActionError
from gpu_vecenv.buffers import OutputRing
from gpu_vecenv.deferred_errors import ERROR_FLAG_INTERVAL
from gpu_vecenv.vector_env import GpuVectorEnv
from tests.runtime.counting_env import COUNTING
from tests.tag.makers import make_tag

STEPS = 3 * OutputRing.MAX_STEPS + 5  # across several chunks


def _span(t: torch.Tensor) -> tuple[int, int]:
    return t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()


def _assert_disjoint(tensors: list[torch.Tensor]) -> None:
    spans = sorted(_span(t) for t in tensors)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end <= start, "two outputs share memory"


def _keep_all_outputs(env, action_of, steps: int):
    """Every output tensor of a reset and ``steps`` steps."""
    kept = []
    obs, _ = env.reset(seed=3)
    kept.append(obs)
    for k in range(steps):
        obs, reward, terminated, truncated, info = env.step(action_of(k))
        step_outputs = [obs, reward, terminated, truncated]
        step_outputs += [info[key] for key in ("final_obs", "active") if key in info]
        kept += step_outputs
    return kept


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_copy_true_outputs_never_alias_nor_change(mode):
    env = GpuVectorEnv(COUNTING, 3, device="cpu", autoreset_mode=mode)
    assert env._output_ring.steps >= 2  # small outputs: carved from chunks
    actions = [np.array([k % 2, 1, 0]) for k in range(2)]
    kept = _keep_all_outputs(env, lambda k: actions[k % 2], STEPS)
    snapshot = [t.clone() for t in kept]
    for k in range(STEPS):  # later steps must not write into what was returned
        env.step(actions[k % 2])
    for before, t in zip(snapshot, kept, strict=True):
        assert torch.equal(before, t)
    _assert_disjoint(kept)
    # The rows come from chunks of ring.steps calls each (the reset's obs is one).
    obs_chunks = {t.untyped_storage().data_ptr() for t in kept if t.dim() == 2}
    chunks = -(-(STEPS + 1) // env._output_ring.steps)
    assert len(obs_chunks) == chunks * (2 if mode == AutoresetMode.SAME_STEP else 1)


def test_copy_true_multi_agent_outputs_never_alias_nor_change():
    env = make_tag(2, device="cpu", num_runners=3, autoreset_mode="SAME_STEP")
    gen = torch.Generator().manual_seed(0)
    nvec = torch.as_tensor(env.single_action_space.nvec)
    pool = [(torch.rand((env.num_envs, 2), generator=gen) * nvec).long() for _ in range(4)]
    kept = _keep_all_outputs(env, lambda k: pool[k % 4], STEPS)
    snapshot = [t.clone() for t in kept]
    for k in range(STEPS):
        env.step(pool[k % 4])
    for before, t in zip(snapshot, kept, strict=True):
        assert torch.equal(before, t)
    _assert_disjoint(kept)


def test_ring_rows_are_aligned_and_their_pointers_right():
    ring = OutputRing(3, 5, torch.device("cpu"), with_final_obs=True, with_active=True)
    rows = [ring.next() for _ in range(ring.steps + 1)]
    for out in rows:
        tensors = (out.obs, out.reward, out.terminated, out.truncated, out.final_obs,
                   out.active)
        assert out.pointers == tuple(t.data_ptr() for t in tensors)
        assert all(p % OutputRing.ALIGN_BYTES == 0 for p in out.pointers)
        assert out.obs.shape == (3, 5) and out.obs.is_contiguous()
        assert out.reward.dtype == torch.float32 and out.truncated.dtype == torch.bool
    _assert_disjoint([t for out in rows for t in (out.obs, out.reward, out.terminated,
                                                    out.truncated, out.final_obs, out.active)])


def test_large_outputs_graph_capture_and_streams(monkeypatch):
    big = OutputRing(OutputRing.MAX_CHUNK_BYTES // 4, 1, torch.device("cpu"), False)
    assert big.steps < 2
    a, b = big.next(), big.next()
    assert a.obs.untyped_storage().data_ptr() != b.obs.untyped_storage().data_ptr()
    assert a.obs.untyped_storage().nbytes() == a.obs.numel() * 4  # its own allocation
    ring = OutputRing(1, 4, torch.device("cpu"), False)
    ring.next()  # a chunk is started
    ring._cuda = True  # as on a GPU, while the current stream captures a graph:
    monkeypatch.setattr(buffers, "CAPTURING", lambda: True)
    captured = ring.next()
    assert captured.obs.untyped_storage().nbytes() == 16  # not a row of the chunk
    monkeypatch.setattr(buffers, "CAPTURING", lambda: False)
    monkeypatch.setattr(buffers, "current_raw_stream", lambda index: 0)
    first = ring.next()
    assert first.obs.untyped_storage().nbytes() > 16  # a chunk again
    assert ring.next().obs.untyped_storage().data_ptr() == \
        first.obs.untyped_storage().data_ptr()
    monkeypatch.setattr(buffers, "current_raw_stream", lambda index: 1234)  # another stream:
    assert ring.next().obs.untyped_storage().data_ptr() != \
        first.obs.untyped_storage().data_ptr()  # a chunk of its own


def test_canonical_actions_pass_as_they_are_and_others_are_converted():
    env = GpuVectorEnv(COUNTING, 3, device="cpu")
    canonical = torch.tensor([0, 1, 0])
    assert env.actions.convert(canonical) is canonical
    converted = env.actions.convert(torch.tensor([0, 1, 0], dtype=torch.int32))
    assert converted.dtype == torch.int64
    assert env.actions.convert(np.array([0, 1, 0])).dtype == torch.int64
    with pytest.raises(InvalidActionError, match="shape"):
        env.actions.convert(torch.tensor([0, 1]))
    with pytest.raises(InvalidActionError, match="dtype"):
        env.actions.convert(torch.tensor([0.0, 1.0, 0.0]))


def test_non_contiguous_canonical_actions_step_like_contiguous_ones():
    envs = [GpuVectorEnv(COUNTING, 3, device="cpu") for _ in range(2)]
    for env in envs:
        env.reset(seed=1)
    strided = torch.tensor([[1, 9], [0, 9], [1, 9]])[:, 0]
    assert not strided.is_contiguous()
    a = envs[0].step(strided)
    b = envs[1].step(strided.contiguous())
    for x, y in zip(a[:4], b[:4], strict=True):
        assert torch.equal(x, y)


def _as_on_a_gpu(env):
    """The env's deferred errors as on a GPU: flag copies that arrive when ``arrived``
    says so (``env._errors._copy``); counts ``take`` calls."""
    errors = env._errors
    errors._host = torch.zeros((), dtype=torch.int32)
    errors.may_report = False
    state = types.SimpleNamespace(arrived=True, takes=0)
    errors._copy = types.SimpleNamespace(start=lambda: errors._host.copy_(errors.error_count),
                                         wait=lambda: None, arrived=lambda: state.arrived)
    take = errors.take

    def counting_take(sync):
        state.takes += 1
        return take(sync)

    errors.take = counting_take
    return state


def test_deferred_flags_are_reported_once_their_copy_arrives():
    env = GpuVectorEnv(COUNTING, 3, device="cpu", strict=False)
    env.reset(seed=0)
    state = _as_on_a_gpu(env)
    for _ in range(3 * ERROR_FLAG_INTERVAL):  # valid actions: flags copied, never raised
        env.step(np.array([0, 1, 0]))
    # Between copies step() does not look at the flag: one look per copy.
    assert state.takes == 3
    state.arrived = False
    env.step(np.array([0, 7, 0]))  # invalid: env 1 frozen, reported later
    for _ in range(2 * ERROR_FLAG_INTERVAL):  # the copy has not arrived: no report
        env.step(np.array([0, 1, 0]))
    state.arrived = True
    with pytest.raises(InvalidActionError, match="left unchanged"):
        for _ in range(ERROR_FLAG_INTERVAL + 1):
            env.step(np.array([0, 1, 0]))
    env.step(np.array([0, 1, 0]))  # reported once, then cleared
