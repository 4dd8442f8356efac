"""``scripts/profile_train.py`` splits an iteration into roll-out and update and lists each
phase's kernels (on a CPU: torch's ops), from a shipped config with overrides."""

from __future__ import annotations

import json
import sys

from tests.script_modules import load_script


def test_profiles_a_shipped_config_on_the_cpu(tmp_path, monkeypatch, capsys):
    module = load_script("profile_train")
    out = tmp_path / "profile.json"
    monkeypatch.setattr(sys, "argv", [
        "profile_train.py", "cartpole_ppo", str(out), "--device", "cpu", "--warmup", "1",
        "--iterations", "2", "--top", "3", "--set", "trainer.num_envs=8",
        "--set", "trainer.matmul_precision=high"])
    assert module.main() == 0
    result = json.loads(out.read_text())
    phases = result["phases"]
    assert result["steps_per_iteration"] == 8 * 32 and result["device"] == "cpu"
    assert result["float32_matmul_precision"] == "high"  # while the trainer lived
    assert phases["iterations"] == 2 and phases["steps_per_second"] > 0
    assert 0 < phases["rollout_share"] < 1
    for phase in ("rollout", "update"):
        table = result["kernels"][phase]
        assert len(table["top"]) == 3 and table["total_seconds"] > 0
        assert 0 < table["gemm_share"] < 1  # the MLP's products are among the ops
    assert "cartpole_ppo on cpu" in capsys.readouterr().out


def test_matrix_products_are_told_from_compiled_elementwise_kernels():
    module = load_script("profile_train")
    for name in ("aten::addmm", "aten::mm", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n",
                 "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>"):
        assert module.is_gemm(name), name
    for name in ("triton_poi_fused_addmm_relu_0", "aten::relu",
                 "void at::native::reduce_kernel<128, 4>"):
        assert not module.is_gemm(name), name
