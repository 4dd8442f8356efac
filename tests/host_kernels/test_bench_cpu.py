"""``gpu-vecenv bench`` on the CPU (torch backend): table, JSON and plot."""

from __future__ import annotations

import argparse
import json

from gpu_vecenv import bench


def test_bench_cpu_writes_table_json_and_plot(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "TARGET_SECONDS", 0.005)
    parser = argparse.ArgumentParser()
    bench.configure_parser(parser)
    args = parser.parse_args([
        "--env", "GPUCartPole-v1", "GPUPendulum-v1", "--sizes", "1,16", "--device", "cpu",
        "--repeats", "2", "--vs", "gymnasium", "--json", str(tmp_path / "b.json"),
        "--plot", str(tmp_path / "b.png"),
    ])
    assert bench.main(args) == 0
    table = capsys.readouterr().out
    assert "GPUCartPole-v1" in table and "gymnasium-vector_entry_point" in table
    results = json.loads((tmp_path / "b.json").read_text())["results"]
    assert {(r["env"], r["backend"], r["num_envs"]) for r in results} >= {
        ("GPUCartPole-v1", "torch", 1), ("GPUPendulum-v1", "torch", 16),
        ("GPUPendulum-v1", "gymnasium-sync", 16)}
    assert all(r["env_steps_per_s"] > 0 for r in results)
    assert (tmp_path / "b.png").stat().st_size > 1000


def test_bench_vs_gymnax_times_it_with_ratios_or_says_why_not(monkeypatch, capsys):
    """``--vs gymnax``: where JAX and gymnax import, one gymnax row per size with our rate
    over it; elsewhere one line saying why, and the bench still succeeds."""
    from gpu_vecenv import gymnax_peer

    monkeypatch.setattr(bench, "TARGET_SECONDS", 0.005)
    parser = argparse.ArgumentParser()
    bench.configure_parser(parser)
    args = parser.parse_args(["--env", "GPUCartPole-v1", "--sizes", "1", "--device", "cpu",
                              "--repeats", "1", "--vs", "gymnax", "--gymnax-steps", "4"])
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    if gymnax_peer.gymnax_problem() is None:
        assert "ours / gymnax: torch " in out
    else:
        assert "GPUCartPole-v1: gymnax not timed: jax and gymnax must import" in out
