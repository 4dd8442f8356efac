"""The Python side of the kernel bindings (no GPU, no nvcc)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpu_vecenv.backends.cuda import BINDINGS, binding_for, reciprocal
from gpu_vecenv.registry import load_module

CLASSIC_IDS = ["GPUCartPole-v1", "GPUAcrobot-v1", "GPUMountainCar-v0",
               "GPUMountainCarContinuous-v0", "GPUPendulum-v1"]


def test_reciprocal_is_rounded_once_from_double_like_torch_cuda():
    # torch 2.11 on CUDA computes tensor / 1.1 as tensor * float32(1 / 1.1); the float32
    # reciprocal of float32(1.1) is one ulp away and would differ in most products.
    assert reciprocal(1.1) == np.float32(1.0 / 1.1)
    assert reciprocal(1.1) != np.float32(1.0) / np.float32(1.1)


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_every_classic_env_has_a_binding_with_float32_constants(env_id):
    definition = load_module(env_id).DEFINITION
    binding = binding_for(definition)
    fmt, values = binding.pack_format(definition.make_params())
    assert len(fmt) == len(values) and set(fmt) <= {"f", "i"}
    for char, value in zip(fmt, values, strict=True):
        if char == "f":
            assert np.float32(value) == value  # exactly representable: rounded in Python


def test_params_reach_the_constants():
    definition = load_module("GPUCartPole-v1").DEFINITION
    binding = BINDINGS["cartpole"]
    fields = dict(binding.consts(definition.make_params(force_mag=20.0, masscart=2.0)))
    assert fields["force_mag"] == np.float32(20.0)
    assert fields["inv_total_mass"] == np.float32(1.0 / 2.1)


def test_env_without_kernels_is_a_clear_error():
    definition = dataclasses.replace(load_module("GPUCartPole-v1").DEFINITION, name="nokernel")
    with pytest.raises(RuntimeError, match="backend='torch'"):
        binding_for(definition)
