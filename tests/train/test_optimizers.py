"""The learners' Adam and RMSprop against torch.optim, their state dicts, and the reason
they exist: building them does not import torch._dynamo."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from gpu_vecenv.train.optimizers import Adam, RMSprop


def _twins(seed: int = 0):
    torch.manual_seed(seed)
    ours = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def _train(model, optimizer, set_lr, steps: int = 12) -> None:
    gen = torch.Generator().manual_seed(1)
    for k in range(steps):
        if k == 6:
            set_lr(3e-3)
        x = torch.randn(16, 4, generator=gen)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def _set_torch_lr(optimizer, value):
    for group in optimizer.param_groups:
        group["lr"] = value


def test_adam_matches_torch_fused_adam_bit_for_bit():
    ours, theirs = _twins()
    mine = Adam(ours.parameters(), 1e-2, eps=1e-5)
    # the reference also holds its rate in a float32 tensor (the kernel's tensor-rate form)
    ref = torch.optim.Adam(theirs.parameters(), lr=torch.tensor(1e-2), eps=1e-5, fused=True)
    _train(ours, mine, mine.set_learning_rate)
    _train(theirs, ref, lambda v: ref.param_groups[0]["lr"].fill_(v))
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(a, b)
    assert mine.learning_rate == pytest.approx(3e-3)


def test_rmsprop_matches_torch_rmsprop():
    ours, theirs = _twins(2)
    mine = RMSprop(ours.parameters(), 7e-4, alpha=0.99, eps=1e-5)
    ref = torch.optim.RMSprop(theirs.parameters(), lr=7e-4, alpha=0.99, eps=1e-5,
                              foreach=True)
    _train(ours, mine, mine.set_learning_rate)
    _train(theirs, ref, lambda v: _set_torch_lr(ref, v))
    moved = False
    for a, b, start in zip(ours.parameters(), theirs.parameters(), _twins(2)[0].parameters(),
                           strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)
        moved |= not torch.equal(a, start)
    assert moved


def test_state_dict_round_trip_and_torch_layout():
    ours, theirs = _twins()
    mine = Adam(ours.parameters(), 1e-2)
    _train(ours, mine, mine.set_learning_rate, steps=3)
    saved = mine.state_dict()
    assert saved["param_groups"][0]["params"] == [0, 1, 2, 3]
    assert float(saved["state"][0]["step"]) == 3.0
    again = Adam(_twins()[0].parameters(), 5.0)
    exp_avg_address = again.state["exp_avg"][0].data_ptr()
    again.load_state_dict(saved)
    assert again.state["exp_avg"][0].data_ptr() == exp_avg_address  # copied in place
    assert again.learning_rate == mine.learning_rate
    assert float(again.step_count) == 3.0
    for a, b in zip(again.state["exp_avg_sq"], mine.state["exp_avg_sq"], strict=True):
        assert torch.equal(a, b)
    # torch.optim.Adam's own state dict loads too (same names and layout)
    ref = torch.optim.Adam(theirs.parameters(), lr=1e-2)
    _train(theirs, ref, lambda v: _set_torch_lr(ref, v), steps=2)
    again.load_state_dict(ref.state_dict())
    assert float(again.step_count) == 2.0


def test_mismatched_state_dict_is_refused_and_changes_nothing():
    ours, _ = _twins()
    mine = Adam(ours.parameters(), 1e-2)
    _train(ours, mine, mine.set_learning_rate, steps=2)
    before = [t.clone() for t in mine.state["exp_avg"]]
    small = Adam(torch.nn.Linear(3, 3).parameters(), 1e-2)
    with pytest.raises(ValueError, match="parameters"):
        mine.load_state_dict(small.state_dict())
    bad = mine.state_dict()
    bad["state"][1]["exp_avg"] = torch.zeros(5)
    with pytest.raises(ValueError, match="wrong shape"):
        mine.load_state_dict(bad)
    with pytest.raises(ValueError, match="not an optimizer state dict"):
        mine.load_state_dict({"nothing": 1})
    assert all(torch.equal(a, b) for a, b in zip(before, mine.state["exp_avg"], strict=True))
    assert float(mine.step_count) == 2.0


def test_step_without_gradients_is_a_clear_error():
    mine = Adam(torch.nn.Linear(2, 2).parameters(), 1e-3)
    with pytest.raises(RuntimeError, match="no gradient"):
        mine.step()


def test_building_the_optimizers_does_not_import_dynamo():
    code = ("import sys, torch\n"
            "from gpu_vecenv.train.optimizers import Adam, RMSprop\n"
            "m = torch.nn.Linear(2, 2)\n"
            "Adam(m.parameters(), 1e-3); RMSprop(m.parameters(), 1e-3)\n"
            "m(torch.ones(1, 2)).sum().backward()\n"
            "Adam(m.parameters(), 1e-3).step()\n"
            "assert 'torch._dynamo' not in sys.modules\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
