"""``scripts/bench_vs_purejaxrl.py`` and its vendored PureJaxRL (``benchmarks/purejaxrl_ppo.py``)
without a GPU.

Without JAX (CI): the command line, the alternating plan of runs, the medians and ratios,
the table and the JSON, that both sides get the same PPO, and our side's worker on the
CPU. Where JAX, flax, optax and gymnax import: the gymnax 1.0 patch of PureJaxRL's wrappers,
the distrax stand-in, and (slow: JAX compiles PPO for 10-20 s on 2 cores) PureJaxRL's
training in chunks and the whole script on the CPU."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import purejaxrl_ppo
from gpu_vecenv.train.config import PPOConfig
from gpu_vecenv.train.config_loading import config_from_dict
from tests.script_modules import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bench_vs_purejaxrl.py"


@pytest.fixture(scope="module")
def bench():
    return load_script("bench_vs_purejaxrl")


def _run(bench, size, mode, side, repeat, value):
    """A finished run as a worker reports it (``value``: None = failed / not reached)."""
    run = {"num_envs": size, "mode": mode, "side": side, "repeat": repeat}
    if value is None and mode == "throughput":
        return {**run, "error": "Traceback ...\nRuntimeError: boom"}
    if mode == "throughput":
        return {**run, "env_steps_per_second": value}
    return {**run, "reached": value is not None, "updates": 7,
            **({"seconds_since_process_start": value, "env_steps": 7000} if value else {})}


# -- the command line --

def test_defaults_are_the_issues_sizes_and_five_alternating_repeats(bench):
    args = bench.parse_args(["out.json"])
    assert args.sizes == [2048, 16384] and args.repeats == 5
    assert args.modes == ["throughput", "time_to_475"]
    assert args.learning_rate == 2.5e-4 and args.device == "auto" and args.chunk_updates == 1


@pytest.mark.parametrize("argv, message", [
    (["--sizes", "2048,lots"], "--sizes"),
    (["--sizes", "2"], "at least 4 envs"),
    (["--modes", "throughput,speed"], "speed"),
    (["--repeats", "0"], "--repeats"),
    (["--device", "cuda:1"], "--device"),
    (["--matmul-precision", "low"], "--matmul-precision"),
])
def test_bad_arguments_are_refused_by_name(bench, capsys, argv, message):
    with pytest.raises(SystemExit):
        bench.parse_args(["out.json", *argv])
    assert message in capsys.readouterr().err


def test_a_worker_gets_the_callers_settings(bench):
    args = bench.parse_args(["out.json", "--num-steps", "32", "--learning-rate", "1e-3",
                             "--total-steps", "12345", "--max-updates", "77",
                             "--chunk-updates", "3", "--warmup-calls", "2", "--seed", "9",
                             "--device", "cpu", "--matmul-precision", "high"])
    run = {"num_envs": 512, "mode": "time_to_475", "side": "purejaxrl", "repeat": 1}
    command = bench.worker_command(args, run)
    assert command[:2] == [sys.executable, str(SCRIPT)]
    worker = bench.parse_args(command[2:])
    assert (worker.worker, worker.mode, worker.num_envs) == ("purejaxrl", "time_to_475", 512)
    assert bench.ppo_settings(worker) == bench.ppo_settings(args)
    for name in ("total_steps", "max_updates", "chunk_updates", "warmup_calls", "seed",
                 "device", "matmul_precision"):
        assert getattr(worker, name) == getattr(args, name)


def test_seed_per_repeat_gives_each_pair_its_seed(bench):
    fixed = bench.parse_args(["out.json", "--seed", "5"])
    varied = bench.parse_args(["out.json", "--seed", "5", "--seed-per-repeat"])
    for repeat in range(3):
        for side in ("ours", "purejaxrl"):
            run = {"num_envs": 64, "mode": "time_to_475", "side": side, "repeat": repeat}
            assert bench.parse_args(bench.worker_command(fixed, run)[2:]).seed == 5
            assert bench.parse_args(bench.worker_command(varied, run)[2:]).seed == 5 + repeat


def test_jax_goes_to_the_cpu_only_for_purejaxrl_runs_asked_to(bench):
    args = bench.parse_args(["out.json", "--device", "cpu", "--jax-cache", "cache"])
    assert bench.worker_environment(args, "purejaxrl")["JAX_PLATFORMS"] == "cpu"
    assert bench.worker_environment(args, "purejaxrl")["JAX_COMPILATION_CACHE_DIR"].endswith(
        "cache")
    assert "JAX_COMPILATION_CACHE_DIR" not in bench.worker_environment(args, "ours")
    on_gpu = bench.worker_environment(bench.parse_args(["out.json"]), "purejaxrl")
    assert on_gpu.get("JAX_PLATFORMS") == os.environ.get("JAX_PLATFORMS")


# -- the same PPO on both sides --

def test_both_sides_get_purejaxrls_cartpole_ppo(bench):
    settings = bench.ppo_settings(bench.parse_args(["out.json"]))
    # PureJaxRL's own CartPole config is what our settings translate to ...
    upstream = purejaxrl_ppo.cartpole_config(2048, 16, 2048 * 16 * 10)
    translated = purejaxrl_ppo.cartpole_config(2048, 16, 2048 * 16 * 10,
                                               **bench.purejaxrl_overrides(settings))
    assert translated == upstream
    # ... and our trainer takes every one of them as a PPO setting.
    ppo = config_from_dict({"ppo": settings}).ppo
    assert isinstance(ppo, PPOConfig)
    assert ppo.ent_coef == 0.01 and ppo.learning_rate == 2.5e-4 and ppo.anneal_lr
    assert tuple(ppo.hidden_sizes) == (64, 64) and not ppo.bootstrap_truncated


def test_purejaxrl_config_refuses_unknown_keys_and_less_than_one_update():
    with pytest.raises(KeyError, match="LEARNING_RATE"):
        purejaxrl_ppo.cartpole_config(4, 128, 10_000, LEARNING_RATE=1e-3)
    with pytest.raises(ValueError, match="less than one update"):
        purejaxrl_ppo.cartpole_config(64, 16, 1000)


# -- plan, medians, table --

def test_runs_alternate_which_side_goes_first(bench):
    runs = bench.plan_runs([64, 128], ["throughput", "time_to_475"], 3)
    assert len(runs) == 2 * 2 * 3 * 2
    first = [(r["side"], r["repeat"]) for r in runs[:6]]
    assert first == [("ours", 0), ("purejaxrl", 0), ("purejaxrl", 1), ("ours", 1),
                     ("ours", 2), ("purejaxrl", 2)]
    assert {(r["num_envs"], r["mode"]) for r in runs[:6]} == {(64, "throughput")}
    assert [r["num_envs"] for r in runs[::6]] == [64, 64, 128, 128]


def test_a_missing_value_counts_as_the_worst(bench):
    assert bench.median_value([3.0, 1.0, 2.0], higher_is_better=True) == 2.0
    assert bench.median_value([3.0, None, 2.0], higher_is_better=True) == 2.0
    assert bench.median_value([3.0, None, 2.0], higher_is_better=False) == 3.0
    assert bench.median_value([None, None, 2.0], higher_is_better=False) is None
    assert bench.median_value([], higher_is_better=True) is None


def test_summary_gives_ours_over_purejaxrl_and_the_goal(bench):
    values = {("throughput", "ours"): [30.0, 10.0, 20.0], ("throughput", "purejaxrl"): [8.0,
              9.0, 10.0], ("time_to_475", "ours"): [2.0, None, 3.0],
              ("time_to_475", "purejaxrl"): [6.0, 5.0, None]}
    runs = [_run(bench, 64, mode, side, i, v) for (mode, side), vs in values.items()
            for i, v in enumerate(vs)]
    throughput, time_to = bench.summarize(runs)
    assert (throughput["ours"], throughput["purejaxrl"]) == (20.0, 9.0)
    assert math.isclose(throughput["ratio"], 20 / 9) and throughput["goal_met"]
    # Time: lower is better, so the ratio is PureJaxRL's seconds over ours.
    assert (time_to["ours"], time_to["purejaxrl"]) == (3.0, 6.0)
    assert time_to["ratio"] == 2.0 and time_to["goal_met"]
    table = bench.format_table([throughput, time_to])
    assert "20" in table and "2.22x" in table and "3.00 s" in table and "6.00 s" in table
    assert "2/3, 2/3" in table and "3/3, 3/3" in table


def test_a_side_without_a_median_has_no_ratio(bench):
    runs = [_run(bench, 2048, "throughput", "ours", i, v) for i, v in enumerate([5.0, None,
                                                                               None])]
    runs += [_run(bench, 2048, "throughput", "purejaxrl", i, 4.0) for i in range(3)]
    (row,) = bench.summarize(runs)
    assert row["ours"] is None and row["ratio"] is None and row["goal_met"] is None
    line = bench.format_table([row]).splitlines()[-1]
    assert line.split()[:4] == ["2,048", "training", "env-steps/s", "-"]
    assert "1/3, 3/3" in line
    below = bench.summarize([_run(bench, 64, "throughput", "ours", 0, 3.0),
                             _run(bench, 64, "throughput", "purejaxrl", 0, 2.0)])
    assert below[0]["ratio"] == 1.5 and below[0]["goal_met"] is False
    assert "not met" in bench.format_table(below)


def test_main_writes_every_run_the_summary_and_the_versions(bench, tmp_path, monkeypatch,
                                                            capsys):
    values = iter([10.0, 4.0, 3.0, 5.0])  # ours, PJX, PJX, ours (alternating)
    monkeypatch.setattr(bench, "run_one", lambda args, run: _run(
        bench, run["num_envs"], run["mode"], run["side"], run["repeat"], next(values)))
    monkeypatch.setattr(bench, "machine", lambda device: {"gpu": "none"})
    out = tmp_path / "out.json"
    assert bench.main([str(out), "--sizes", "64", "--repeats", "2",
                       "--modes", "throughput"]) == 0
    record = json.loads(out.read_text())
    assert [r["side"] for r in record["runs"]] == ["ours", "purejaxrl", "purejaxrl", "ours"]
    (row,) = record["summary"]
    assert (row["ours"], row["purejaxrl"], row["ratio"]) == (7.5, 3.5, 7.5 / 3.5)
    assert record["purejaxrl_commit"] == purejaxrl_ppo.UPSTREAM_COMMIT
    assert set(record["versions"]) == {"jax", "jaxlib", "flax", "optax", "gymnax"}
    assert record["ppo"]["learning_rate"] == 2.5e-4 and record["machine"] == {"gpu": "none"}
    assert "2.14x" in capsys.readouterr().out
    monkeypatch.setattr(bench, "run_one", lambda args, run: _run(
        bench, run["num_envs"], run["mode"], run["side"], run["repeat"], None))
    assert bench.main([str(out), "--sizes", "64", "--repeats", "1",
                       "--modes", "throughput"]) == 1  # a failed run fails the call


# -- our side's worker, on the CPU --

def test_our_worker_measures_the_rate_between_logged_rows(bench):
    args = bench.parse_args(["out.json", "--worker", "ours", "--mode", "throughput",
                             "--num-envs", "16", "--num-steps", "8", "--total-steps",
                             str(16 * 8 * 8), "--device", "cpu"])
    result = bench.ours_worker(args)
    assert result["device"] == "cpu" and result["backend"] == "torch"
    # rows 2, 4, 6, 8: from the second (the first's reads load kernels) to the last
    assert result["updates"] == 4 and result["env_steps"] == 4 * 16 * 8
    assert result["matmul_precision"] == "highest"
    assert result["env_steps_per_second"] == result["env_steps"] / result["seconds"] > 0


def test_our_worker_stops_at_the_mean_of_the_last_100_episodes(bench, monkeypatch):
    args = bench.parse_args(["out.json", "--worker", "ours", "--mode", "time_to_475",
                             "--num-envs", "64", "--num-steps", "16", "--max-updates", "6",
                             "--device", "cpu"])
    assert not bench.ours_worker(args)["reached"]  # 6 updates do not learn CartPole
    monkeypatch.setattr(bench, "TARGET_RETURN", 1.0)  # any 100 episodes reach it
    result = bench.ours_worker(args)
    assert result["reached"] and 1 <= result["updates"] < 6
    assert result["env_steps"] == result["updates"] * 64 * 16
    assert result["seconds_since_process_start"] > result["training_seconds"] > 0


# -- the vendored PureJaxRL --

def test_the_peer_imports_without_jax_and_says_what_is_missing(monkeypatch):
    code = ("import sys; import benchmarks.purejaxrl_ppo; "
            "assert not {'jax', 'flax', 'gymnax'} & set(sys.modules)")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)
    purejaxrl_ppo._upstream.cache_clear()
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax -> ImportError
    try:
        problem = purejaxrl_ppo.purejaxrl_problem()
    finally:
        purejaxrl_ppo._upstream.cache_clear()
    assert problem is not None and "jax" in problem and "gymnax" in problem


@pytest.fixture(scope="module")
def upstream():
    """PureJaxRL's classes (JAX imported once for the module's tests), or a skip saying
    which package is missing."""
    problem = purejaxrl_ppo.purejaxrl_problem()
    if problem:
        pytest.skip(problem)
    return purejaxrl_ppo._upstream()


def test_wrappers_end_an_episode_at_termination_and_at_truncation(upstream):
    up = upstream
    jax, jnp = up.jax, up.jnp
    env, params = up.gymnax.make("CartPole-v1")
    env = up.LogWrapper(up.FlattenObservationWrapper(env))
    key = jax.random.PRNGKey(0)
    obs, state = env.reset(key, params)
    obs, state, reward, done, info = env.step(key, state, 1, params)
    assert obs.shape == (4,) and not done and not info["returned_episode"]
    assert float(state.episode_returns) == 1.0
    # One step before the time limit: truncated, not terminated.
    # (full_like: the same types, so the step's compiled program serves these states too)
    time_limit = jnp.full_like(state.env_state.time, params.max_steps_in_episode - 1)
    late = state.replace(env_state=state.env_state.replace(time=time_limit),
                         episode_returns=jnp.full_like(state.episode_returns, 499.0))
    _, after, _, done, info = env.step(key, late, 1, params)
    assert done and info["truncated"] and not info["terminated"]
    assert info["returned_episode"] and float(info["returned_episode_returns"]) == 500.0
    assert float(after.episode_returns) == 0.0
    # Pole past its limit: terminated.
    fallen = state.replace(env_state=state.env_state.replace(
        theta=jnp.full_like(state.env_state.theta, 0.5)))
    _, _, _, done, info = env.step(key, fallen, 1, params)
    assert done and info["terminated"] and not info["truncated"]


def test_categorical_stand_in_matches_the_distribution(upstream):
    jax, jnp = upstream.jax, upstream.jnp
    logits = jnp.log(jnp.array([[0.25, 0.75]]))
    pi = upstream.Categorical(logits=logits + 5.0)  # unnormalized, as the network gives
    assert math.isclose(float(pi.log_prob(jnp.array([1]))[0]), math.log(0.75), rel_tol=1e-5)
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert math.isclose(float(pi.entropy()[0]), entropy, rel_tol=1e-5)
    many = upstream.Categorical(logits=jnp.repeat(logits, 4000, axis=0))
    share = float(many.sample(seed=jax.random.PRNGKey(1)).mean())
    assert abs(share - 0.75) < 0.03


@pytest.mark.slow
def test_purejaxrl_trains_in_chunks_and_stops_where_told(upstream):
    config = purejaxrl_ppo.cartpole_config(8, 8, 8 * 8 * 4)
    timed = purejaxrl_ppo.time_training(dict(config), seed=0, warmup_calls=1)
    assert timed["env_steps"] == 4 * 64 and timed["updates"] == 4
    assert timed["env_steps_per_second"] > 0 and len(timed["warmup_seconds"]) == 1
    seen = []
    result = purejaxrl_ppo.train_until(dict(config), lambda s, n: seen.append(n) or False)
    assert not result["reached"] and result["updates"] == result["updates_run"] == 4
    assert len(seen) == 4 and sum(seen) > 0  # 8 envs of 8 steps: a few episodes end
    result = purejaxrl_ppo.train_until(dict(config), lambda s, n: True, updates_per_chunk=2)
    assert result["reached"] and (result["updates"], result["updates_run"]) == (1, 2)
    assert result["env_steps"] == 64


@pytest.mark.slow
def test_the_script_runs_both_sides_on_the_cpu(upstream, tmp_path):
    out = tmp_path / "out.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out), "--sizes", "8", "--repeats", "1",
         "--num-steps", "8", "--total-steps", "512", "--max-updates", "3", "--device", "cpu"],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    record = json.loads(out.read_text())
    assert [(r["mode"], r["side"]) for r in record["runs"]] == [
        ("throughput", "ours"), ("throughput", "purejaxrl"),
        ("time_to_475", "ours"), ("time_to_475", "purejaxrl")]
    assert all(r["device"] == "cpu" for r in record["runs"])
    assert all(not r["reached"] for r in record["runs"][2:])  # 3 updates: too few
    assert record["runs"][1]["default_f32_dot"] == "float32"  # JAX on a CPU
    assert record["summary"][0]["ratio"] > 0
