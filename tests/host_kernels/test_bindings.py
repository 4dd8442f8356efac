"""The Python side of the kernel bindings, and its check against the kernel files' layout
tables (no GPU; the layout texts come from the host harness, built with nvcc)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpu_vecenv.backends.cuda import binding_for
from gpu_vecenv.env_ids import load_module, shipped_ids
from gpu_vecenv.kernel_binding import (
    KernelBinding,
    KernelLayoutError,
    check_layout,
    f32,
    parse_layout,
    reciprocal,
)

from . import harness

CLASSIC_IDS = shipped_ids(single_agent=True)


def test_reciprocal_is_rounded_once_from_double_like_torch_cuda():
    # torch 2.11 on CUDA computes tensor / 1.1 as tensor * float32(1 / 1.1); the float32
    # reciprocal of float32(1.1) is one ulp away and would differ in most products.
    assert reciprocal(1.1) == np.float32(1.0 / 1.1)
    assert reciprocal(1.1) != np.float32(1.0) / np.float32(1.1)


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_every_classic_env_has_a_binding_with_float32_constants(env_id):
    module = load_module(env_id)
    definition = module.DEFINITION
    binding = binding_for(definition)
    assert binding is definition.kernel_binding and binding.consts is module.kernel_consts
    assert binding.source == definition.name and binding.path is None
    fmt, values = binding.pack_format(definition.make_params())
    assert len(fmt) == len(values) and set(fmt) <= {"f", "i"}
    for char, value in zip(fmt, values, strict=True):
        if char == "f":
            assert np.float32(value) == value  # exactly representable: rounded in Python


def test_params_reach_the_constants():
    definition = load_module("GPUCartPole-v1").DEFINITION
    fields = dict(definition.kernel_binding.consts(
        definition.make_params(force_mag=20.0, masscart=2.0)))
    assert fields["force_mag"] == np.float32(20.0)
    assert fields["inv_total_mass"] == np.float32(1.0 / 2.1)


def test_env_without_kernels_is_a_clear_error():
    definition = dataclasses.replace(load_module("GPUCartPole-v1").DEFINITION,
                                     kernel_binding=None)
    with pytest.raises(RuntimeError, match="backend='torch'"):
        binding_for(definition)


# -- the layout check --


@pytest.mark.parametrize("env_id", CLASSIC_IDS)
def test_every_classic_binding_matches_its_kernel_files_layout(env_id, host_harness, tmp_path):
    """What the CUDA backend checks at load, with the text the kernels export (the host
    harness compiles the same GV_CONSTS declarations)."""
    definition = load_module(env_id).DEFINITION
    binding = definition.kernel_binding
    text = harness.run_layout(host_harness, tmp_path, binding.source)
    assert text.endswith(";") and len(parse_layout(text)) == len(
        binding.pack_format(definition.make_params())[0])
    check_layout(definition.name, binding, definition.make_params(), text)


def test_acrobot_torques_are_the_elements_of_a_c_array(host_harness, tmp_path):
    definition = load_module("GPUAcrobot-v1").DEFINITION
    text = harness.run_layout(host_harness, tmp_path, "acrobot")
    assert text.startswith("float torque[3];float dt;")
    names = [name for name, _ in definition.kernel_binding.consts(definition.make_params())]
    assert names[:4] == ["torque[0]", "torque[1]", "torque[2]", "dt"]


def test_parse_layout_expands_arrays_and_rejects_junk():
    assert parse_layout("float a;int b[2];") == [("float", "a"), ("int", "b[0]"),
                                                  ("int", "b[1]")]
    assert parse_layout("") == []
    with pytest.raises(ValueError, match="not a field"):
        parse_layout("float a b;")


def _consts(p) -> list:
    return [("gravity", f32(9.8)), ("tau", f32(0.02)), ("euler", 1)]


BINDING = KernelBinding("toy", _consts)
C_TEXT = "float gravity;float tau;int euler;"


def test_matching_layout_passes():
    check_layout("toy", BINDING, None, C_TEXT)


@pytest.mark.parametrize("c_text, position, c_side, python_side", [
    # a field added on the C side only
    ("float gravity;float length;float tau;int euler;", 1, "'float length'", "'float tau'"),
    # a field at the end on the C side only
    ("float gravity;float tau;int euler;int extra;", 3, "'int extra'", "nothing"),
    # a field dropped from the C side
    ("float gravity;float tau;", 2, "nothing", "'int euler'"),
    # the same fields in another order
    ("float tau;float gravity;int euler;", 0, "'float tau'", "'float gravity'"),
    # another type (an int packed where C reads a float: another bit pattern)
    ("float gravity;float tau;float euler;", 2, "'float euler'", "'int euler'"),
])
def test_mismatch_names_the_env_the_field_and_both_sides(c_text, position, c_side,
                                                         python_side):
    with pytest.raises(KernelLayoutError) as info:
        check_layout("toy", BINDING, None, c_text)
    message = str(info.value)
    assert message.startswith("toy: the kernel constants of cuda_src/toy.cu and of its "
                              f"binding {__name__}._consts differ at field {position}: ")
    assert f"the kernel file declares {c_side}, the binding packs {python_side}" in message
    assert "float gravity; float tau; int euler" in message  # the binding's whole list
