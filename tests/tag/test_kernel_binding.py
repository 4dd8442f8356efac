"""The Tag kernels' bindings (envs/tag.py, envs/tag_grid.py) agree with their .cu files, and
the layout facts Python reads from C are the ones the reference uses (no GPU needed)."""

from __future__ import annotations

import re
import subprocess

import pytest

from gpu_vecenv.backends.compiler import CUDA_SRC, build_command, find_nvcc
from gpu_vecenv.envs import tag, tag_grid, tag_launch
from gpu_vecenv.multi_agent.definition import MultiAgentDefinition
from gpu_vecenv.multi_agent.kernel_binding import GameLaunch, check_consts_layout
from gpu_vecenv.multi_agent.kernel_constants import enum_values, int_constant

GAMES = {"tag": tag, "tag_grid": tag_grid}


def _kernel_text(name: str) -> str:
    """``cuda_src/<name>.cu`` and the headers beside it that it includes (tag_layout.cuh)."""
    text = (CUDA_SRC / f"{name}.cu").read_text()
    for header in re.findall(r'^#include "(\w+\.cuh)"', text, re.M):
        text += (CUDA_SRC / header).read_text()
    return text


def _consts_macro_fields(name: str) -> str:
    """The constants field list of ``cuda_src/<name>.cu`` as its layout table spells it."""
    text = _kernel_text(name)
    body = re.search(r"#define \w+_CONSTS\(FIELD\)(.*?)\n\s*\n", text, re.S).group(1)
    return "".join(f"{kind} {field};"
                   for kind, field in re.findall(r"\bFIELD\((int|float), (\w+)\)", body))


@pytest.mark.parametrize("name", sorted(GAMES))
def test_binding_lists_the_constants_struct_of_its_kernel_file(name):
    binding = GAMES[name].KERNEL_BINDING
    check_consts_layout(name, binding, _consts_macro_fields(name))
    values, kinds = binding.pack_constants(GAMES[name].DEFINITION.make_params(),
                                           GameLaunch(block=32, blocks_per_game=1))
    assert len(values) == len(kinds) == len(binding.constants)
    assert len(kinds) * 4 % 8 == 0  # the pointer structs after it stay 8-byte aligned


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("name", sorted(GAMES))
def test_the_table_the_kernel_file_exports_matches_the_binding(name, tmp_path):
    """What the CUDA backend checks at load, read here from the compiled PTX."""
    ptx = tmp_path / f"{name}.ptx"
    command = build_command(find_nvcc(), CUDA_SRC / f"{name}.cu", ptx, (9, 0))
    command[command.index("-cubin")] = "-ptx"
    if name == "tag":
        command[1:1] = list(tag.KERNEL_BINDING.flags_for("tag_run_full"))
    subprocess.run(command, check=True, capture_output=True)
    found = re.search(rf"{name}_consts_layout\[\d+\] = \{{([^}}]*)\}}", ptx.read_text())
    table = bytes(int(v) for v in found.group(1).split(","))
    check_consts_layout(name, GAMES[name].KERNEL_BINDING, table)


def test_a_mismatch_fails_with_both_field_lists():
    layout = tag.KERNEL_BINDING.expected_layout()
    assert len(layout.split(";")) == 33 and layout.startswith("int num_agents;")
    exported = layout.replace("float two_pi;float half_pi;", "float half_pi;float two_pi;")
    with pytest.raises(RuntimeError, match=r"differ at field 19: the kernel file declares "
                                           r"'float half_pi', the binding packs "
                                           r"'float two_pi'") as caught:
        check_consts_layout("tag", tag.KERNEL_BINDING, exported.encode() + b"\0")
    assert "cuda_src/tag.cu (32 fields)" in str(caught.value)


def test_layout_facts_come_from_the_kernel_sources():
    assert tag.NUM_FEATURES == int_constant("tag_layout.cuh", "kTagFeatures") == 7
    assert int_constant("tag_layout.cuh", "kTagDiffFeatures") == len(tag._features(
        tag.TagParams(), tag.reset(tag.TagParams(), _uniforms(tag.TagParams()))))
    params = tag.TagParams(use_full_observation=False, num_other_agents_observed=3)
    assert params.obs_dim == 7 * 3 + 2
    phases = enum_values("common/games.cuh", "GvGamePhase")
    assert list(phases.values()) == list(range(10)) and phases["kObserveOnly"] == 9
    with pytest.raises(LookupError, match="no integer constant"):
        int_constant("tag.cu", "kNoSuchThing")


def _uniforms(params):
    import torch

    return torch.rand((2, params.num_agents, tag.DEFINITION.reset_draws_per_agent))


def test_the_generic_layer_takes_roles_and_draws_from_the_definition():
    base = tag_grid.DEFINITION
    params = base.make_params(num_taggers=2)
    assert base.role_ids(params) == [0, 0, 1]
    assert base.agent_names(params) == ["tagger_0", "tagger_1", "runner_0"]
    fields = {f: getattr(base, f) for f in MultiAgentDefinition.__dataclass_fields__}
    runners_first = MultiAgentDefinition(**{**fields, "role_names": ("runner", "tagger")})
    assert runners_first.role_ids(params) == [1, 1, 0]
    unnamed = MultiAgentDefinition(**{**fields, "role_names": None})  # order of appearance
    assert unnamed.role_ids(params) == [0, 0, 1]
    with pytest.raises(ValueError, match="reset_draws_per_agent"):
        MultiAgentDefinition(**{**fields, "reset_draws_per_agent": 5})


def test_scan_helpers_only_where_the_kernel_has_them(monkeypatch):
    """``$GPU_VECENV_TAG_SCAN_HELPERS`` (a number of helpers, or auto): H threads per agent
    only for partial observations of K <= 16 whose H * A threads fit one block, as many as
    fit where fewer do (auto needs a GPU: the GPU tests check it)."""
    import torch

    cpu = torch.device("cpu")
    partial = tag.TagParams(num_taggers=10, num_runners=95, use_full_observation=False,
                            num_other_agents_observed=10)
    full = tag.TagParams(num_taggers=10, num_runners=95)
    wide = tag.TagParams(num_taggers=10, num_runners=190, use_full_observation=False)
    too_big = tag.TagParams(num_taggers=10, num_runners=247, use_full_observation=False)
    k17 = tag.TagParams(num_taggers=10, num_runners=95, use_full_observation=False,
                        num_other_agents_observed=17)
    launch = tag_launch
    assert launch.SCAN_MAX_PARTS == 4 and launch.MAX_SPLIT_BLOCK == 512
    for helpers in range(launch.SCAN_MAX_PARTS):
        monkeypatch.setenv(launch.SCAN_HELPERS_VARIABLE, str(helpers))
        assert launch.threads_per_agent(partial, 100, cpu) == helpers + 1
        assert launch.threads_per_agent(wide, 100, cpu) == min(helpers + 1, 2)  # 200 agents
        assert launch.threads_per_agent(full, 100, cpu) == 1
        assert launch.threads_per_agent(too_big, 1, cpu) == 1
    assert launch.threads_per_agent(k17, 1, cpu) == 1 and launch.SCAN_HELPERS_MAX_OBSERVED == 16
    for text in ("yes", "4", "-1"):
        monkeypatch.setenv(launch.SCAN_HELPERS_VARIABLE, text)
        with pytest.raises(ValueError, match="must be auto or a number of helpers"):
            launch.threads_per_agent(partial, 100, cpu)
    for parts, split in ((2, 53), (3, 35), (4, 27)):
        on = GameLaunch(block=32 * -(-parts * 105 // 32), blocks_per_game=1,
                        threads_per_agent=parts)
        values = dict(zip([c.name for c in tag.KERNEL_CONSTANTS],
                          tag.KERNEL_BINDING.pack_constants(partial, on)[0], strict=True))
        assert values["scan_helpers"] == parts - 1 and values["scan_split"] == split


def test_one_block_step_entries_exist_and_are_chosen_for_large_games():
    """``tag.cu`` defines ``tag_step_<suffix>`` (``TAG_KERNELS``) for every kernel but the
    scan helpers' (``TAG_HELPERS_KERNELS``), each also as an ``_options`` twin; games of at
    least ``ONE_BLOCK_STEP_MIN_AGENTS`` agents step through it, smaller ones and the
    helpers' kernels through ``tag_run_<suffix>``."""
    text = (CUDA_SRC / "tag.cu").read_text()
    with_step = set(re.findall(r"^TAG_KERNELS\((\w+),", text, re.M))
    without = set(re.findall(r"^TAG_HELPERS_KERNELS\((\w+),", text, re.M))
    suffixes = {k.removeprefix("tag_run_") for k in tag.KERNELS}
    options = tag_launch.OPTIONS_SUFFIX
    assert {s + options for s in with_step | without} | with_step | without == suffixes
    assert not with_step & without and len(suffixes) == 2 * len(with_step | without) == 30
    assert without == {s for s in suffixes if s.endswith("_helpers")}
    large = tag.TagParams(num_taggers=5, num_runners=100, use_full_observation=False,
                          num_other_agents_observed=10)
    small = tag.TagParams(num_taggers=1, num_runners=4, use_full_observation=False,
                          num_other_agents_observed=4)
    edge = tag.TagParams(num_taggers=1, num_runners=tag_launch.ONE_BLOCK_STEP_MIN_AGENTS - 1)
    step = tag.KERNEL_BINDING.one_block_step
    assert step(large, "tag_run_k10") == "tag_step_k10"
    assert step(large, "tag_run_k10_wide") == "tag_step_k10_wide"
    assert step(edge, "tag_run_full") == "tag_step_full"
    assert step(small, "tag_run_k4") is None
    assert step(large, "tag_run_k10_helpers") is None
    assert step(large, "tag_run_k10_options") == "tag_step_k10_options"
    assert step(large, "tag_run_k10_helpers_options") is None


def test_the_options_have_kernels_of_their_own(monkeypatch):
    """``observe_own_state`` and ``egocentric`` launch the ``_options`` twin of the kernel
    the params would launch without them (built with ``-DTAG_ONLY_OPTIONS``), its step
    and packed entries too; the kernels without the options carry none of their code."""
    import torch

    cpu = torch.device("cpu")
    options = tag_launch.OPTIONS_SUFFIX
    plain = dict(num_taggers=10, num_runners=95, use_full_observation=False,
                 num_other_agents_observed=10)
    monkeypatch.setenv(tag_launch.SCAN_HELPERS_VARIABLE, "3")  # no GPU asked
    name = tag.KERNEL_BINDING.kernel_name
    assert name(tag.TagParams(**plain), 100, cpu) == "tag_run_k10_helpers"
    assert name(tag.TagParams(), 100, cpu) == "tag_run_full"
    for own_state, egocentric in ((True, False), (False, True), (True, True)):
        flags = dict(observe_own_state=own_state, egocentric=egocentric)
        params = tag.TagParams(**plain, **flags)
        assert name(params, 100, cpu) == "tag_run_k10_helpers" + options
        assert name(tag.TagParams(**flags), 100, cpu) == "tag_run_full" + options
        assert tag.check_kernel_params(params) is None  # no longer refused
    for base in ("tag_run_full", "tag_run_k10", "tag_run_k10_wide", "tag_run_k10_helpers"):
        assert base in tag.KERNELS and base + options in tag.KERNELS
        assert tag.kernel_flags(base + options) == (*tag.kernel_flags(base), "-DTAG_ONLY_OPTIONS")
    assert tag.kernel_flags("tag_run_k10_wide") == ("-DTAG_ONLY", "-DTAG_ONLY_k10_wide")
    monkeypatch.setenv(tag_launch.PACKED_VARIABLE, "4")
    small = tag.TagParams(num_taggers=1, num_runners=4, use_full_observation=False,
                          num_other_agents_observed=4, observe_own_state=True)
    packed = tag_launch.packed_step_kernel
    assert packed(small, "tag_run_k4" + options, 100, cpu) == ("tag_step_packed_k4" + options, 4)
    assert packed(small, "tag_run_k4", 100, cpu) == ("tag_step_packed_k4", 4)
    assert packed(small, "tag_run_k32" + options, 100, cpu) is None
    base = tag.TagParams(**plain)
    assert tag.TagParams(**plain, egocentric=True).obs_dim == base.obs_dim
    assert tag.TagParams(**plain, observe_own_state=True).obs_dim == (
        base.obs_dim + int_constant("tag_layout.cuh", "kTagOwnStateFeatures"))


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
@pytest.mark.parametrize("kernel", ["tag_run_k4", "tag_run_k4_options",
                                    "tag_run_k4_helpers_options"])
def test_a_kernels_flags_build_the_entries_its_launches_name(kernel, tmp_path):
    """The module ``flags_for(kernel)`` builds holds the kernel, the step and packed entries
    the launch rules name for it, and nothing else (PTX of nvcc: seconds, not the cubin)."""
    ptx = tmp_path / "tag.ptx"
    command = build_command(find_nvcc(), CUDA_SRC / "tag.cu", ptx, (9, 0),
                            tag.KERNEL_BINDING.flags_for(kernel))
    command[command.index("-cubin")] = "-ptx"
    subprocess.run(command, check=True, capture_output=True)
    entries = set(re.findall(r"^\.visible \.entry (\w+)\(", ptx.read_text(), re.M))
    large = tag.TagParams(num_taggers=5, num_runners=100)
    want = {kernel, tag_launch.one_block_step_kernel(large, kernel)} - {None}
    if kernel.removesuffix(tag_launch.OPTIONS_SUFFIX) in tag_launch.PACKED_KERNELS:
        want.add("tag_step_packed_" + kernel.removeprefix("tag_run_"))
    assert entries == want
