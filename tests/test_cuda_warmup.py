"""The CUDA driver started while torch is imported (:mod:`gpu_vecenv.cuda_warmup`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from gpu_vecenv import cuda_warmup
from gpu_vecenv.cli import main as cli_main


@pytest.mark.parametrize("device, environ, ordinal", [
    ("auto", {}, 0),
    ("cuda", {}, 0),
    (" CUDA ", {}, 0),
    ("cuda:3", {}, 3),
    ("auto", {"LOCAL_RANK": "2"}, 2),  # torchrun: the trainer's cuda:LOCAL_RANK
    ("cuda", {"LOCAL_RANK": "1"}, 1),
    ("cpu", {}, None),
    ("mps", {}, None),
    ("cuda:x", {}, None),
    ("auto", {"LOCAL_RANK": "x"}, None),
    ("auto", {"GPU_VECENV_CUDA_WARMUP": "0"}, None),
    ("cuda:1", {"GPU_VECENV_CUDA_WARMUP": "0"}, None),
])
def test_the_device_a_command_will_use(device, environ, ordinal):
    assert cuda_warmup.device_ordinal(device, environ) == ordinal


def test_nothing_starts_for_a_cpu_device_and_a_failure_raises_nothing(monkeypatch):
    assert cuda_warmup.start("cpu", {}) is None
    assert cuda_warmup.start("cuda", {"GPU_VECENV_CUDA_WARMUP": "0"}) is None

    def no_driver(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(cuda_warmup.ctypes, "CDLL", no_driver)
    assert cuda_warmup.retain_primary_context(0) is False
    thread = cuda_warmup.start("cuda:0", {})
    thread.join(10)
    assert not thread.is_alive() and thread.daemon


@pytest.mark.parametrize("argv, starts", [
    (["train", "cartpole_ppo", "--print-config"], []),
    (["train", "cartpole_ppo", "--help-config"], []),
    (["train", "cartpole_ppo", "--device", "cpu", "--print-config"], []),
])
def test_printing_a_config_starts_no_cuda(monkeypatch, capsys, argv, starts):
    started = []
    monkeypatch.setattr(cuda_warmup, "start", lambda device, *a: started.append(device))
    assert cli_main(argv) == 0
    assert started == starts


@pytest.mark.parametrize("argv, device", [
    (["train", "cartpole_ppo", "--total-steps", "0"], "auto"),
    (["train", "cartpole_ppo", "--total-steps", "0", "--device", "cpu"], "cpu"),
    (["train", "cartpole_ppo", "--total-steps", "0", "--set", "trainer.device=cuda:1"],
     "cuda:1"),
])
def test_train_starts_cuda_for_the_configured_device_before_importing_torch(
        monkeypatch, argv, device):
    """The warm-up is asked for the device of the final config (file, --set, --device),
    before the config is validated (which imports torch)."""
    from gpu_vecenv.train import cli as train_cli

    order = []
    monkeypatch.setattr(cuda_warmup, "start", lambda d, *a: order.append(("start", d)))

    class Stop(Exception):
        pass

    def validated(raw):
        order.append(("validate", raw["trainer"].get("device", "auto")))
        raise Stop

    monkeypatch.setattr("gpu_vecenv.train.config_loading.config_from_dict", validated)
    with pytest.raises(Stop):
        train_cli.main(_train_args(argv[1:]))
    assert order == [("start", device), ("validate", device)]


def _train_args(argv):
    import argparse

    from gpu_vecenv.train import cli as train_cli

    parser = argparse.ArgumentParser()
    train_cli.configure_parser(parser)
    return parser.parse_args(argv)


@pytest.mark.gpu
def test_torch_uses_the_context_the_warmup_made():
    """In a fresh process: the thread makes device 0's primary context before torch is
    imported, and torch's CUDA work then runs in that very context."""
    script = textwrap.dedent("""
        import ctypes, sys
        from gpu_vecenv import cuda_warmup
        thread = cuda_warmup.start("cuda", {})
        thread.join(60)
        assert "torch" not in sys.modules
        driver = ctypes.CDLL("libcuda.so.1")
        flags, active = ctypes.c_uint(), ctypes.c_int()
        assert driver.cuDevicePrimaryCtxGetState(0, ctypes.byref(flags),
                                                 ctypes.byref(active)) == 0
        assert active.value == 1, "no primary context after the warm-up"
        import torch
        assert int((torch.ones(4, device="cuda") * 2).sum()) == 8
        current = ctypes.c_void_p()
        assert driver.cuCtxGetCurrent(ctypes.byref(current)) == 0
        retained = ctypes.c_void_p()
        assert driver.cuDevicePrimaryCtxRetain(ctypes.byref(retained), 0) == 0
        assert current.value == retained.value, (current.value, retained.value)
        print("same context")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "same context" in done.stdout
