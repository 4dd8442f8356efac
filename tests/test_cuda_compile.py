"""Every kernel file builds, with NVRTC and with nvcc, and the compile cache behaves (CI, no
GPU: both compilers run without one).

Uses the backend's own compile path (gpu_vecenv.backends.compiler), so what CI compiles is
what users' machines compile. The NVRTC tests need ``libnvrtc``: the ``test`` extra
installs NVIDIA's ``nvidia-cuda-nvrtc`` wheel on Linux, and a test fails if that wheel is
installed but not found.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from gpu_vecenv.backends import compiler, nvrtc
from gpu_vecenv.backends.compiler import (
    CUDA_SRC,
    CudaCompileError,
    KernelsUnavailable,
    Target,
    build_command,
    choose_compiler,
    compile_kernel,
    find_nvcc,
    parse_arch,
    target_for,
)

KERNEL_FILES = sorted(p.stem for p in CUDA_SRC.glob("*.cu") if p.stem != "ppo_mlp")
"""Env kernel files (ppo_mlp.cu, the trainer's, is sized by -D flags: tested below)."""
CUSTOM_ENV_KERNEL = Path(__file__).resolve().parents[1] / "examples/custom_env/point_reach.cu"

nvcc_required = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
nvrtc_required = pytest.mark.skipif(nvrtc.find_nvrtc() is None,
                                    reason="NVRTC is not installed (pip install nvidia-cuda-nvrtc)")


def _nvrtc_wheel_installed() -> bool:
    try:
        importlib.metadata.distribution("nvidia-cuda-nvrtc")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_every_shipped_env_has_a_kernel_file_named_like_its_module():
    from gpu_vecenv.env_ids import ENVS, SHIPPED_IDS

    names = {ENVS[env_id].module.rpartition(".")[2] for env_id in SHIPPED_IDS}
    assert names and names <= set(KERNEL_FILES), names - set(KERNEL_FILES)


@pytest.mark.skipif(not _nvrtc_wheel_installed(), reason="the nvidia-cuda-nvrtc wheel is absent")
def test_nvrtc_is_found_where_its_wheel_is_installed():
    found = nvrtc.find_nvrtc()
    assert found is not None, f"not found among {nvrtc.candidate_paths()}"
    assert found.version >= (11, 2) and 90 in found.archs


@nvrtc_required
@pytest.mark.parametrize("name", [n for n in KERNEL_FILES
                                  if "GV_DEFINE_KERNELS" in (CUDA_SRC / f"{n}.cu").read_text()])
@pytest.mark.parametrize("per_thread", [2, 4])
def test_envs_per_thread_builds_with_nvrtc_without_warnings(name, per_thread, tmp_path,
                                                            monkeypatch):
    """The step kernel's E-envs-per-thread builds (GPU_VECENV_ENVS_PER_THREAD, and with a
    min-blocks launch bound) compile under NVRTC, which has no C library."""
    from gpu_vecenv.backends.cuda import kernel_flags

    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("GPU_VECENV_ENVS_PER_THREAD", str(per_thread))
    monkeypatch.setenv("GPU_VECENV_STEP_MIN_BLOCKS", "2")
    flags = kernel_flags()
    assert f"-DGV_ENVS_PER_THREAD={per_thread}" in flags and "-DGV_STEP_MIN_BLOCKS=2" in flags
    build = compile_kernel(name, (9, 0), flags, compiler=choose_compiler("nvrtc"))
    assert build.path.stat().st_size > 0 and not build.log.strip(), build.log


def test_envs_per_thread_setting_is_checked(monkeypatch):
    from gpu_vecenv.backends.cuda import envs_per_thread, kernel_flags

    monkeypatch.delenv("GPU_VECENV_ENVS_PER_THREAD", raising=False)
    monkeypatch.delenv("GPU_VECENV_STEP_MIN_BLOCKS", raising=False)
    assert envs_per_thread() == 1 and kernel_flags() == ()  # the default: today's cache key
    monkeypatch.setenv("GPU_VECENV_ENVS_PER_THREAD", "3")
    with pytest.raises(ValueError, match="1, 2 or 4"):
        envs_per_thread()
    monkeypatch.setenv("GPU_VECENV_ENVS_PER_THREAD", "4")
    monkeypatch.setenv("GPU_VECENV_STEP_MIN_BLOCKS", "many")
    with pytest.raises(ValueError, match="positive integer"):
        kernel_flags()


def test_step_grid_follows_what_the_kernel_was_built_with():
    """The loader reads <source>_envs_per_thread from the module; a kernel file without it
    (hand-written kernels, one env per thread) counts as 1 whatever the setting."""
    from gpu_vecenv.backends.cuda import built_envs_per_thread
    from gpu_vecenv.backends.driver import DriverError

    class Module:
        def __init__(self, value):
            self.value = value

        def read_global(self, name):
            if self.value is None:
                raise DriverError(f"no {name}", 500)
            assert name == "cartpole_envs_per_thread"
            return self.value.to_bytes(4, "little")

    # (both alive at once: the answer is kept per module id, as loaded modules live on)
    built_for_four, hand_written = Module(4), Module(None)
    assert built_envs_per_thread(built_for_four, "cartpole") == 4
    assert built_envs_per_thread(hand_written, "cartpole") == 1


@nvcc_required
def test_kernels_export_their_envs_per_thread(tmp_path):
    command = build_command(find_nvcc(), CUDA_SRC / "pendulum.cu", tmp_path / "p.cubin", (9, 0),
                            extra_flags=("-DGV_ENVS_PER_THREAD=2",))
    assert subprocess.run(command, capture_output=True, check=False).returncode == 0
    cuobjdump = Path(find_nvcc()).parent / "cuobjdump"
    if not cuobjdump.is_file():
        pytest.skip("cuobjdump is not beside nvcc")
    symbols = subprocess.run([str(cuobjdump), "-symbols", str(tmp_path / "p.cubin")],
                             capture_output=True, text=True, check=False).stdout
    assert "pendulum_envs_per_thread" in symbols


TAG_FORMS_FOR_NVCC = ("-DTAG_ONLY", "-DTAG_ONLY_k10", "-DTAG_ONLY_k10_helpers",
                      "-DTAG_ONLY_k32_wide", "-DTAG_ONLY_PLAIN", "-DTAG_ONLY_OPTIONS")
"""tag.cu's sixty kernels are one template in a few forms (run, one-block step, packed step,
scan helpers, wide; each with and without the observation options) at several sizes: every
one of them builds through NVRTC below (test_compile_command_builds_every_shipped_kernel_
with_nvrtc); nvcc, reading the same source, builds each form at one size here (all sixty
took 142 s of nvcc on 2 cores)."""


@nvcc_required
@pytest.mark.parametrize("name", [  # Tag's forms: about a minute of nvcc on 2 cores
    pytest.param(n, marks=pytest.mark.slow) if n == "tag" else n for n in KERNEL_FILES])
def test_kernel_file_compiles_with_nvcc_for_sm90_without_warnings(name, tmp_path):
    only = TAG_FORMS_FOR_NVCC if name == "tag" else ()
    command = build_command(find_nvcc(), CUDA_SRC / f"{name}.cu", tmp_path / f"{name}.cubin",
                            (9, 0), extra_flags=("-Werror", "all-warnings", *only))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{name}.cu does not build:\n{result.stderr}{result.stdout}"
    assert (tmp_path / f"{name}.cubin").stat().st_size > 0


@pytest.mark.slow  # 3-5 minutes on 2 cores: every kernel for two architectures
@nvrtc_required
def test_compile_command_builds_every_shipped_kernel_with_nvrtc(tmp_path):
    """What CI promises: `gpu-vecenv compile` for sm_80 and sm_90 through NVRTC, the
    custom-env example's kernel included, with no compiler message at all (--strict)."""
    env = {**os.environ, "GPU_VECENV_COMPILER": "nvrtc",
           "GPU_VECENV_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, "-m", "gpu_vecenv.cli", "compile", "--arch", "sm_80",
               "--arch", "sm_90", "--kernel", str(CUSTOM_ENV_KERNEL), "--strict", "-j", "2"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compiler: NVRTC" in result.stdout
    built = sorted(p.name for p in (tmp_path / "cache").iterdir())
    for arch in ("sm_80", "sm_90"):
        for name in [*KERNEL_FILES, "point_reach"]:
            assert any(f.startswith(f"{name}-{arch}-nvrtc-") and f.endswith(".cubin")
                       for f in built), (name, arch, built)
        # cartpole, acrobot and mountain car train on the fused kernels: one network each
        assert sum(f.startswith(f"ppo_mlp-{arch}-nvrtc-") for f in built) == 3
    again = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert again.returncode == 0 and "built" not in again.stdout  # all from the cache


def test_compile_builds_the_fused_kernels_only_for_single_agent_ppo_configs():
    """Multi-agent policies train on torch ops (the fused kernels do not mask idle slots),
    so `gpu-vecenv compile` builds no fused kernel for a shipped Tag config, even one that
    fits."""
    from gpu_vecenv.compile_cli import fused_ppo_jobs
    from gpu_vecenv.env_ids import ENVS, shipped_ids
    from gpu_vecenv.train.config_loading import load_config

    jobs, _ = fused_ppo_jobs((9, 0))
    configs = sorted(job.label.split("[")[1].split(":")[0] for job in jobs)
    single_agent_ppo = sorted(name for env_id in shipped_ids(single_agent=True)
                              for name in ENVS[env_id].train_configs
                              if load_config(name).trainer.algo == "ppo")
    assert "cartpole_ppo" in single_agent_ppo and configs == single_agent_ppo


@nvrtc_required
def test_nvrtc_cache_reuses_the_image_and_keys_by_compiler_and_target(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path / "cache"))
    rtc = choose_compiler("nvrtc")
    first = compile_kernel("mountain_car", (9, 0), compiler=rtc)
    assert not first.cached and first.path.parent == tmp_path / "cache"
    assert first.path.name.startswith("mountain_car-sm_90-nvrtc-") and first.path.suffix == ".cubin"
    assert first.path.read_bytes()[:4] == b"\x7fELF"  # a cubin is an ELF image
    stamp = first.path.stat().st_mtime_ns
    again = compile_kernel("mountain_car", (9, 0), compiler=rtc)
    assert again.cached and again.path == first.path and first.path.stat().st_mtime_ns == stamp
    assert compile_kernel("mountain_car", (8, 0), compiler=rtc).path != first.path
    flagged = compile_kernel("mountain_car", (9, 0), ("-DUNUSED_FLAG=1",), compiler=rtc)
    assert flagged.path != first.path
    if find_nvcc() is not None:
        by_nvcc = compile_kernel("mountain_car", (9, 0), compiler=choose_compiler("nvcc"))
        assert by_nvcc.path != first.path and "-nvcc-" in by_nvcc.path.name


@nvrtc_required
def test_nvrtc_emits_ptx_for_a_gpu_newer_than_it_knows(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path))
    rtc = choose_compiler("nvrtc")
    newest = max(rtc.nvrtc.archs)
    future = (newest // 10 + 1, 0)
    build = compile_kernel("cartpole", future, compiler=rtc)
    assert build.target == Target(newest, ptx=True) and build.path.suffix == ".ptx"
    text = build.path.read_bytes().rstrip(b"\0").decode()
    assert f".target sm_{newest}" in text and ".entry cartpole_step" in text


def _broken_source_tree(tmp_path: Path) -> Path:
    broken = tmp_path / "src"
    (broken / "common").mkdir(parents=True)
    for header in (CUDA_SRC / "common").glob("*.cuh"):
        (broken / "common" / header.name).write_text(header.read_text())
    (broken / "oops.cu").write_text('extern "C" __global__ void oops_step() { int x = ; }\n')
    return broken


@pytest.mark.parametrize("kind", [
    pytest.param("nvrtc", marks=nvrtc_required), pytest.param("nvcc", marks=nvcc_required)])
def test_a_rejected_kernel_names_file_compiler_and_log_and_caches_nothing(kind, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiler, "CUDA_SRC", _broken_source_tree(tmp_path))
    with pytest.raises(CudaCompileError) as info:
        compile_kernel("oops", (9, 0), compiler=choose_compiler(kind))
    message = str(info.value)
    assert "oops.cu" in message and "error" in message and "expected an expression" in message
    assert ("NVRTC" if kind == "nvrtc" else "nvcc") in message
    assert not list((tmp_path / "cache").glob("oops*"))  # no half-written cache entry


@nvcc_required
def test_the_cache_key_follows_every_header_of_the_kernel_tree(tmp_path, monkeypatch):
    """A header beside the kernel files (tag.cu's tag_layout.cuh), not only common/*.cuh, is
    part of the key: editing it must not reuse a stale image."""
    tree = tmp_path / "src"
    (tree / "common").mkdir(parents=True)
    (tree / "common" / "shared.cuh").write_text("// shared\n")
    (tree / "game.cu").write_text('#include "game_layout.cuh"\n')
    (tree / "game_layout.cuh").write_text("// one\n")
    monkeypatch.setattr(compiler, "CUDA_SRC", tree)
    nvcc = compiler.Compiler("nvcc", "13.0", "nvcc", "nvcc 13.0")
    first = compiler.cache_key(tree / "game.cu", Target(90), nvcc)
    (tree / "game_layout.cuh").write_text("// two\n")
    assert compiler.cache_key(tree / "game.cu", Target(90), nvcc) != first


def test_nvcc_cache_reuses_the_cubin(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path / "cache"))
    nvcc = choose_compiler("nvcc")
    first = compile_kernel("mountain_car", (9, 0), compiler=nvcc)
    assert not first.cached and first.path.parent == tmp_path / "cache"
    stamp = first.path.stat().st_mtime_ns
    assert compile_kernel("mountain_car", (9, 0), compiler=nvcc).path == first.path
    assert first.path.stat().st_mtime_ns == stamp  # not rebuilt
    assert compile_kernel("mountain_car", (8, 0), compiler=nvcc).path != first.path


FUSED_HEADS = [
    ("discrete", 4, (64, 64), "tanh", False),
    ("multidiscrete", 9, (32, 16, 8, 8), "relu", True),
    ("box", 3, (48,), "elu", True),
]


def _fused_flags(space, obs_dim, hidden, activation, normalize, mma=3):
    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.ppo_mlp_kernels import compile_flags

    spaces = {"discrete": gym.spaces.Discrete(3),
              "multidiscrete": gym.spaces.MultiDiscrete([3, 3], start=[-1, 0]),
              "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    return compile_flags(obs_dim, hidden, activation, ActionSpec.from_space(spaces[space]),
                         normalize, mma=mma)


@nvcc_required
@pytest.mark.parametrize("mma", [0, 1, 3])
@pytest.mark.parametrize("arch", [(9, 0), (7, 5)], ids=["sm_90", "sm_75"])
def test_fused_ppo_kernels_compile_for_each_product_precision(mma, arch, tmp_path):
    """Tensor-core products (sm_80+) or FMAs (mma=0, or sm_75 whatever mma asks)."""
    command = build_command(find_nvcc(), CUDA_SRC / "ppo_mlp.cu", tmp_path / "ppo.cubin",
                            arch, extra_flags=(*_fused_flags(*FUSED_HEADS[1], mma=mma),
                                               "-Werror", "all-warnings"))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"ppo_mlp.cu does not build:\n{result.stderr}{result.stdout}"


def test_compile_flags_take_the_product_precision_of_the_matmul_precision():
    from gpu_vecenv.train.ppo_mlp_kernels import mma_precision

    assert "-DMMA_PRECISION=3" in _fused_flags(*FUSED_HEADS[0])
    assert "-DMMA_PRECISION=0" in _fused_flags(*FUSED_HEADS[0], mma=0)
    assert [mma_precision(p) for p in ("highest", "high", "medium")] == [3, 1, 1]
    with pytest.raises(ValueError, match="mma is 0"):
        _fused_flags(*FUSED_HEADS[0], mma=2)
    with pytest.raises(ValueError, match="not one of"):
        mma_precision("low")


@nvcc_required
@pytest.mark.parametrize("case", FUSED_HEADS, ids=[c[0] for c in FUSED_HEADS])
def test_fused_ppo_kernels_compile_with_nvcc_for_each_head(case, tmp_path):
    command = build_command(find_nvcc(), CUDA_SRC / "ppo_mlp.cu", tmp_path / "ppo.cubin",
                            (9, 0), extra_flags=(*_fused_flags(*case), "-Werror", "all-warnings"))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"ppo_mlp.cu does not build:\n{result.stderr}{result.stdout}"


@nvrtc_required
@pytest.mark.parametrize("case", FUSED_HEADS, ids=[c[0] for c in FUSED_HEADS])
def test_fused_ppo_kernels_compile_with_nvrtc_for_each_head(case, tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path))
    build = compile_kernel("ppo_mlp", (9, 0), (*_fused_flags(*case), "-Werror=all-warnings"),
                           compiler=choose_compiler("nvrtc"))
    assert build.path.stat().st_size > 0 and build.log == ""


# -- choosing the compiler and the target (no compiler needed) --


def _fake_nvrtc(archs=(75, 80, 86, 89, 90, 100, 120), version=(13, 0)) -> compiler.Compiler:
    fake = nvrtc.Nvrtc(library=None, path="/fake/libnvrtc.so.13", version=version,
                       archs=tuple(archs))
    return compiler.Compiler("nvrtc", "13.0", fake.path, "nvrtc 13.0 fake", fake)


def test_target_is_the_gpus_own_cubin_else_a_compatible_one_else_ptx():
    rtc = _fake_nvrtc()
    assert target_for((9, 0), rtc) == Target(90)
    assert target_for((8, 7), rtc) == Target(86)  # same major, lower minor: binary compatible
    assert target_for((12, 9), rtc) == Target(120)
    assert target_for((13, 0), rtc) == Target(120, ptx=True)  # newer than NVRTC: PTX, JIT
    assert Target(120, ptx=True).name == "compute_120" and Target(90).suffix == "cubin"
    with pytest.raises(KernelsUnavailable, match="sm_75 and newer.*sm_70"):
        target_for((7, 0), rtc)
    nvcc = compiler.Compiler("nvcc", "13.0.88", "/usr/bin/nvcc", "nvcc")
    assert target_for((8, 7), nvcc) == Target(87)


@pytest.mark.parametrize("text, capability", [("sm_90", (9, 0)), ("90", (9, 0)),
                                              ("9.0", (9, 0)), ("sm_121", (12, 1)),
                                              ("compute_86", (8, 6))])
def test_parse_arch(text, capability):
    assert parse_arch(text) == capability


@pytest.mark.parametrize("text", ["sm_9", "hopper", "", "sm_90a"])
def test_parse_arch_rejects_nonsense(text):
    with pytest.raises(ValueError, match="sm_90"):
        parse_arch(text)


def test_compiler_setting_and_missing_compilers(monkeypatch):
    monkeypatch.setenv("GPU_VECENV_COMPILER", "clang")
    with pytest.raises(ValueError, match="auto.*nvrtc.*nvcc"):
        choose_compiler()
    monkeypatch.setattr(nvrtc, "find_nvrtc", lambda: None)
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    with pytest.raises(KernelsUnavailable, match="NVRTC.*not found"):
        choose_compiler("nvrtc")
    with pytest.raises(KernelsUnavailable, match="nvcc"):
        choose_compiler("nvcc")
    with pytest.raises(KernelsUnavailable, match="no CUDA compiler"):
        choose_compiler("auto")


def test_auto_prefers_nvrtc_and_falls_back_to_nvcc(monkeypatch):
    rtc = _fake_nvrtc()
    monkeypatch.setattr(compiler, "_nvrtc_compiler", lambda: rtc)
    assert choose_compiler("auto") is rtc
    nvcc = compiler.Compiler("nvcc", "13.0.88", "/usr/bin/nvcc", "nvcc")
    monkeypatch.setattr(compiler, "_nvrtc_compiler", lambda: None)
    monkeypatch.setattr(compiler, "_nvcc_compiler", lambda: nvcc)
    assert choose_compiler("auto") is nvcc


@pytest.mark.parametrize("cuda, package", [("13.0", "nvidia-cuda-nvrtc==13.*"),
                                           ("12.8", "nvidia-cuda-nvrtc-cu12==12.*"),
                                           (None, "CUDA build of torch")])
def test_install_hint_names_the_nvrtc_of_torchs_cuda(cuda, package, monkeypatch):
    import torch

    monkeypatch.setattr(torch.version, "cuda", cuda)
    assert package in nvrtc.install_hint()


def test_nvrtc_of_torchs_cuda_version_is_tried_first(tmp_path, monkeypatch):
    import torch

    for version in ("12", "13"):
        folder = tmp_path / "nvidia" / f"cu{version}" / "lib"
        folder.mkdir(parents=True)
        (folder / f"libnvrtc.so.{version}").write_bytes(b"")
        (folder / f"libnvrtc-builtins.so.{version}.0").write_bytes(b"")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    monkeypatch.delenv("GPU_VECENV_NVRTC", raising=False)
    for var in ("CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    paths = nvrtc.candidate_paths()
    assert paths[0].endswith("cu12/lib/libnvrtc.so.12") and not any("builtins" in p for p in paths)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    assert nvrtc.candidate_paths()[0].endswith("cu13/lib/libnvrtc.so.13")
    monkeypatch.setenv("GPU_VECENV_NVRTC", "/opt/my/libnvrtc.so.13")
    assert nvrtc.candidate_paths()[0] == "/opt/my/libnvrtc.so.13"


def test_kernels_problem_names_a_driver_older_than_nvrtc(monkeypatch):
    import torch

    from gpu_vecenv.backends import driver

    monkeypatch.setattr(driver, "libcuda", lambda: object())
    monkeypatch.setattr(driver, "driver_version", lambda: (12, 4))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))
    monkeypatch.setattr(compiler, "choose_compiler", lambda setting=None: _fake_nvrtc())
    problem = compiler.kernels_problem(0)
    assert "CUDA 13.0" in problem and "CUDA 12.4" in problem and "update the driver" in problem
    monkeypatch.setattr(compiler, "choose_compiler",
                        lambda setting=None: _fake_nvrtc(version=(12, 8)))
    assert compiler.kernels_problem(0) is None  # a newer minor version loads (cubin)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (13, 0))
    assert "update the driver" in compiler.kernels_problem(0)  # but not as PTX


def test_compile_command_without_a_gpu_asks_for_an_arch(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "GPU_VECENV_CACHE_DIR": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "gpu_vecenv.cli", "compile"],
                            capture_output=True, text=True, env=env, check=False)
    assert result.returncode == 2 and "--arch" in result.stderr


def test_fused_flags_carry_every_array_element_and_the_launch_block_sizes():
    """ppo_mlp.cu has no defaults: every element of its size arrays comes as a flag (0 past
    the network's layers and the space's dimensions), and its block sizes are the ones
    ppo_mlp_kernels.py launches with, from the same constants."""
    from gpu_vecenv.train import ppo_mlp_kernels as fused

    flags = dict(f[2:].split("=") for f in _fused_flags(*FUSED_HEADS[1]))
    assert [flags[f"H{k}"] for k in range(fused.MAX_HIDDEN_LAYERS)] == ["32", "16", "8", "8"]
    assert [flags[f"SEG{c}"] for c in range(fused.MAX_SEGMENTS)] == ["3", "3", *["0"] * 6]
    assert [flags[f"START{c}"] for c in range(fused.MAX_SEGMENTS)] == ["-1", "0", *["0"] * 6]
    assert flags["REDUCE_THREADS"] == str(fused.REDUCE_THREADS)
    assert flags["STATS_THREADS"] == str(fused.STATS_THREADS)
    assert flags["REDUCE_SLICES"] == str(fused.REDUCE_SLICES)
    box = dict(f[2:].split("=") for f in _fused_flags(*FUSED_HEADS[2]))
    assert box["NUM_SEG"] == "1" and box["H1"] == box["SEG0"] == "0"


@nvcc_required
def test_fused_ppo_kernels_refuse_to_build_without_their_block_sizes(tmp_path):
    flags = [f for f in _fused_flags(*FUSED_HEADS[0]) if not f.startswith("-DREDUCE_THREADS")]
    command = build_command(find_nvcc(), CUDA_SRC / "ppo_mlp.cu", tmp_path / "ppo.cubin",
                            (9, 0), extra_flags=tuple(flags))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "needs its sizes as -D flags" in result.stderr
