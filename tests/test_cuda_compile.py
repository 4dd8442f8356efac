"""Every kernel file builds with the machine's nvcc for sm_90, warnings as errors (CI, no GPU).

Uses the backend's own command line (gpu_vecenv.backends.compiler.build_command), so what
CI compiles is what users' machines compile.
"""

from __future__ import annotations

import subprocess

import pytest

from gpu_vecenv.backends.compiler import (
    CUDA_SRC,
    CudaCompileError,
    build_command,
    compile_cubin,
    find_nvcc,
)

KERNEL_FILES = sorted(p.stem for p in CUDA_SRC.glob("*.cu") if p.stem != "ppo_mlp")
"""Env kernel files (ppo_mlp.cu, the trainer's, is sized by -D flags: tested below)."""
CLASSIC = ["acrobot", "cartpole", "mountain_car", "mountain_car_continuous", "pendulum"]

nvcc_required = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def test_every_classic_env_has_a_kernel_file():
    assert set(CLASSIC) <= set(KERNEL_FILES)


@nvcc_required
@pytest.mark.parametrize("name", KERNEL_FILES)
def test_kernel_file_compiles_for_sm90_without_warnings(name, tmp_path):
    command = build_command(find_nvcc(), CUDA_SRC / f"{name}.cu", tmp_path / f"{name}.cubin",
                            (9, 0), extra_flags=("-Werror", "all-warnings"))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"{name}.cu does not build:\n{result.stderr}{result.stdout}"
    assert (tmp_path / f"{name}.cubin").stat().st_size > 0


@nvcc_required
def test_cache_reuses_the_cubin_and_reports_compile_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_VECENV_CACHE_DIR", str(tmp_path / "cache"))
    first = compile_cubin("mountain_car", (9, 0))
    assert first.parent == tmp_path / "cache" and first.suffix == ".cubin"
    stamp = first.stat().st_mtime_ns
    assert compile_cubin("mountain_car", (9, 0)) == first
    assert first.stat().st_mtime_ns == stamp  # not rebuilt
    assert compile_cubin("mountain_car", (8, 0)) != first  # another arch, another entry

    import gpu_vecenv.backends.compiler as compiler

    broken = tmp_path / "src"
    (broken / "common").mkdir(parents=True)
    for header in (CUDA_SRC / "common").glob("*.cuh"):
        (broken / "common" / header.name).write_text(header.read_text())
    (broken / "oops.cu").write_text('extern "C" __global__ void oops_step() { int x = ; }\n')
    monkeypatch.setattr(compiler, "CUDA_SRC", broken)
    with pytest.raises(CudaCompileError) as info:
        compile_cubin("oops", (9, 0))
    assert "oops.cu" in str(info.value) and "error" in str(info.value)
    assert not list((tmp_path / "cache").glob("oops*"))  # no half-written cache entry


@nvcc_required
@pytest.mark.parametrize("space, obs_dim, hidden, activation, normalize", [
    ("discrete", 4, (64, 64), "tanh", False),
    ("multidiscrete", 9, (32, 16, 8, 8), "relu", True),
    ("box", 3, (48,), "elu", True),
], ids=["discrete", "multidiscrete", "box"])
def test_fused_ppo_kernels_compile_for_each_head(space, obs_dim, hidden, activation,
                                                 normalize, tmp_path):
    import gymnasium as gym
    import numpy as np

    from gpu_vecenv.train.distributions import ActionSpec
    from gpu_vecenv.train.fused import compile_flags

    spaces = {"discrete": gym.spaces.Discrete(3),
              "multidiscrete": gym.spaces.MultiDiscrete([3, 3], start=[-1, 0]),
              "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    flags = compile_flags(obs_dim, hidden, activation, ActionSpec.from_space(spaces[space]),
                          normalize)
    command = build_command(find_nvcc(), CUDA_SRC / "ppo_mlp.cu", tmp_path / "ppo.cubin",
                            (9, 0), extra_flags=(*flags, "-Werror", "all-warnings"))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"ppo_mlp.cu does not build:\n{result.stderr}{result.stdout}"
