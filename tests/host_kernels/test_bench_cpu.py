"""``gpu-vecenv bench`` on the CPU (torch backend): table, JSON and plot."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
    from benchmarks import gymnax_peer

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


def test_the_peers_are_benchmark_tools_beside_the_package_not_in_it():
    """gymnax's and WarpDrive's timing code lives in the checkout's benchmarks/ (not in the
    installed package); ``load_peer`` gives the same module an import of it gives."""
    import benchmarks.gymnax_peer
    import benchmarks.warpdrive_peer

    package = Path(bench.__file__).parent
    assert not list(package.glob("*_peer.py"))
    assert bench.load_peer("gymnax_peer") is benchmarks.gymnax_peer
    assert bench.load_peer("warpdrive_peer") is benchmarks.warpdrive_peer


def test_load_peer_from_its_file_without_the_checkout_on_sys_path(monkeypatch):
    """Loaded by file, not through sys.path: a before/after run keeps the other tree's
    gpu_vecenv."""
    monkeypatch.delitem(sys.modules, "benchmarks.gymnax_peer", raising=False)
    path_before = list(sys.path)
    peer = bench.load_peer("gymnax_peer")
    assert peer.__file__ == str(bench.PEERS_DIR / "gymnax_peer.py")
    assert sys.modules["benchmarks.gymnax_peer"] is peer and sys.path == path_before


def test_vs_gymnax_without_a_checkout_says_where_the_peer_lives(tmp_path, monkeypatch, capsys):
    """An installed wheel has no benchmarks/: --vs gymnax says so, and the bench succeeds."""
    monkeypatch.setattr(bench, "PEERS_DIR", tmp_path / "benchmarks")
    monkeypatch.delitem(sys.modules, "benchmarks.gymnax_peer", raising=False)
    assert bench.load_peer("gymnax_peer") is None
    monkeypatch.setattr(bench, "TARGET_SECONDS", 0.005)
    parser = argparse.ArgumentParser()
    bench.configure_parser(parser)
    args = parser.parse_args(["--env", "GPUCartPole-v1", "--sizes", "1", "--device", "cpu",
                              "--repeats", "1", "--vs", "gymnax"])
    assert bench.main(args) == 0
    assert "gymnax not timed: its timing code" in capsys.readouterr().out
