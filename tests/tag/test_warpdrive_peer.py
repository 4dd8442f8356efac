"""``scripts/bench_tag.py --vs warpdrive`` without a GPU: WarpDrive's env arguments from our
params, the missing-peer message, the register cap, the case selection and the ratio
table and plot. (The timing itself runs only where WarpDrive and a GPU are.)"""

from __future__ import annotations

import sys
from dataclasses import fields

import pytest

from benchmarks import warpdrive_peer
from gpu_vecenv.envs.tag import TagParams
from tests.script_modules import load_script


@pytest.fixture(scope="module")
def bench_tag():
    return load_script("bench_tag")


def test_every_tag_param_is_a_warpdrive_argument_or_declared_ours_only():
    """A field added to TagParams must be mapped to WarpDrive or named in OURS_ONLY."""
    ours = {f.name for f in fields(TagParams)}
    assert ours - warpdrive_peer.OURS_ONLY <= warpdrive_peer.WARPDRIVE_TAG_KWARGS
    assert warpdrive_peer.OURS_ONLY <= ours


def test_training_preset_maps_to_warpdrives_training_configuration():
    params = TagParams.warpdrive_training(num_taggers=5, num_runners=100)
    kwargs = warpdrive_peer.warpdrive_env_kwargs(params, seed=3)
    assert set(kwargs) <= warpdrive_peer.WARPDRIVE_TAG_KWARGS
    assert not set(kwargs) & warpdrive_peer.OURS_ONLY
    assert kwargs["seed"] == 3 and kwargs["env_backend"] == "pycuda"
    expected = dict(num_taggers=5, num_runners=100, grid_length=20.0, episode_length=500,
                    min_acceleration=-0.1, max_acceleration=0.1, num_acceleration_levels=20,
                    min_turn=-2.356, max_turn=2.356, num_turn_levels=20,
                    use_full_observation=False, num_other_agents_observed=10,
                    tagging_distance=0.02, tag_reward_for_tagger=10.0,
                    tag_penalty_for_runner=-10.0, end_of_game_reward_for_runner=1.0,
                    runner_exits_game_after_tagged=True, edge_hit_penalty=0.0)
    assert {k: kwargs[k] for k in expected} == expected


def test_a_field_warpdrive_lacks_is_refused_not_passed_on(monkeypatch):
    monkeypatch.setattr(warpdrive_peer, "OURS_ONLY", frozenset({"fixed_start_positions"}))
    with pytest.raises(ValueError, match="observe_own_role"):
        warpdrive_peer.warpdrive_env_kwargs(TagParams())


def test_missing_warpdrive_is_named_with_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "warp_drive", None)  # import warp_drive -> ImportError
    problem = warpdrive_peer.warpdrive_problem()
    assert problem is not None
    assert "rl-warp-drive 2.7.1" in problem and ".device-kit/peers/setup.sh" in problem
    with pytest.raises(RuntimeError, match="rl-warp-drive 2.7.1"):
        warpdrive_peer.time_tag(1, TagParams(num_taggers=1, num_runners=4), 10, 1, 1 << 20)


@pytest.mark.parametrize("threads, cap", [(5, None), (105, None), (256, None), (288, 224),
                                          (513, 120), (1000, 64), (1024, 64)])
def test_register_cap_lets_the_block_launch(threads, cap):
    assert warpdrive_peer.register_cap(threads) == cap
    if cap:
        assert cap % 8 == 0 and cap * (-(-threads // 32) * 32) <= 65536


def test_curand_heap_holds_a_state_per_agent_thread_beyond_the_default():
    threads = 2000 * 105 + 200 * 1000
    assert warpdrive_peer.curand_heap_bytes(threads) >= 48 * threads + (8 << 20)


def test_the_100x105_case_is_warpdrives_5_plus_100(bench_tag):
    cases = {label: (games, params) for label, _, games, params in bench_tag.CASES}
    games, params = cases["tag 100x105"]
    assert games == 100
    assert bench_tag.tag_params(params) == dict(num_taggers=5, num_runners=100,
                                                num_other_agents_observed=10)
    assert bench_tag.tag_params(cases["tag 1x5"][1])["num_other_agents_observed"] == 4


def test_arguments(bench_tag):
    args = bench_tag.parse_args([])
    assert (args.vs, args.action_sources, args.repeats) == (None, ["pool"], 5)
    args = bench_tag.parse_args(["--vs", "warpdrive", "--actions", "both", "--plot", "r.png"])
    assert args.action_sources == ["pool", "per-step"] and args.plot == "r.png"
    args = bench_tag.parse_args(["--actions", "all"])
    assert args.action_sources == ["pool", "per-step", "captured", "sampled"]
    for wrong in (["--plot", "r.png"], ["--vs", "gymnax"], ["--case", "tag 3x3"],
                  ["--actions", "fresh"]):
        with pytest.raises(SystemExit):
            bench_tag.parse_args(wrong)


def test_warpdrive_runs_the_continuous_cases_of_one_block_with_one_heap(bench_tag,
                                                                        monkeypatch, capsys):
    calls = []

    def fake_time_tag(games, params, steps, repeats, heap_bytes):
        calls.append((games, params.num_agents, params.num_other_agents_observed, heap_bytes))
        form = {"env_steps_per_s": 1.0}
        return dict(games=games, agents=params.num_agents, steps=steps, trainer=form,
                    step_only=form, registers=40, register_cap=None)

    monkeypatch.setattr(warpdrive_peer, "warpdrive_problem", lambda: None)
    monkeypatch.setattr(warpdrive_peer, "time_tag", fake_time_tag)
    peers = bench_tag.time_warpdrive(bench_tag.CASES, 100, 2)
    assert [p["case"] for p in peers] == ["tag 1x5", "tag 100x105", "tag 2000x5",
                                          "tag 2000x105", "tag 200x1000"]
    assert [c[:3] for c in calls] == [(1, 5, 4), (100, 105, 10), (2000, 5, 4),
                                      (2000, 105, 10), (200, 1000, 10)]
    heap = warpdrive_peer.curand_heap_bytes(5 + 100 * 105 + 2000 * 5 + 2000 * 105 + 200_000)
    assert {c[3] for c in calls} == {heap}
    assert "tag 1x16384: WarpDrive not timed" in capsys.readouterr().out


def test_without_warpdrive_nothing_is_timed_and_the_reason_is_printed(bench_tag, monkeypatch,
                                                                      capsys):
    monkeypatch.setattr(warpdrive_peer, "warpdrive_problem", lambda: "no peer here")
    assert bench_tag.time_warpdrive(bench_tag.CASES, 100, 2) == []
    assert "WarpDrive not timed: no peer here" in capsys.readouterr().out


def test_ratio_table_and_plot(bench_tag, tmp_path):
    rows = [dict(case="tag 1x5", actions="pool", env_steps_per_s=2e6),
            dict(case="tag 1x5", actions="per-step", env_steps_per_s=1e6),
            dict(case="grid 1x5", actions="pool", env_steps_per_s=9e9)]
    peers = [dict(case="tag 1x5", trainer={"env_steps_per_s": 1e5},
                  step_only={"env_steps_per_s": 2e5})]
    ratios = bench_tag.ratio_rows(rows, peers)
    assert [(r["actions"], r["ratio"], r["ratio_step"]) for r in ratios] == [
        ("pool", 20.0, 10.0), ("per-step", 10.0, 5.0)]
    lines = bench_tag.format_ratios(ratios)
    assert len(lines) == 3 and "sampler+step" in lines[0]
    assert lines[1].split() == ["tag", "1x5", "2,000,000", "(pool)", "100,000", "20.0x",
                                "200,000", "10.0x"]
    path = tmp_path / "ratios.png"
    bench_tag.plot_ratios(ratios, str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000
