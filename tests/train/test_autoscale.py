"""``trainer.num_envs: auto``: the search on made-up measurements, the config and CLI
hooks, and small runs on the CPU."""

from __future__ import annotations

import pytest
import torch

from gpu_vecenv.cli import main as cli_main
from gpu_vecenv.train import autoscale, probe
from gpu_vecenv.train.autoscale import (
    OutOfMemory,
    fit_memory,
    is_out_of_memory,
    power_of_two_floor,
    search_memory,
    search_throughput,
)
from gpu_vecenv.train.config_loading import load_config
from gpu_vecenv.train.trainer import Trainer

# -- the search, with injected measurements --


def test_power_of_two_floor():
    assert [power_of_two_floor(x) for x in (0, 1, 2, 3, 4, 1023, 1024, 1025.5)] == [
        1, 1, 2, 2, 4, 512, 1024, 1024]


def test_fit_memory_line_through_two_probes_and_least_squares_through_three():
    fit = fit_memory([(1024, 5_000 + 300 * 1024), (4096, 5_000 + 300 * 4096)])
    assert fit.bytes_per_env == pytest.approx(300) and fit.fixed_bytes == pytest.approx(5_000)
    fit = fit_memory([(1, 110), (2, 190), (3, 310)])  # least squares: 100 n + 3.33
    assert fit.bytes_per_env == pytest.approx(100) and fit.fixed_bytes == pytest.approx(10 / 3)
    assert fit.bytes_at(10) == pytest.approx(1003.33, abs=0.01)


def test_fit_memory_one_size_goes_through_the_origin_and_never_slopes_down():
    fit = fit_memory([(8, 800)])
    assert (fit.fixed_bytes, fit.bytes_per_env) == (0.0, 100.0)
    fit = fit_memory([(4, 1000), (8, 900)])  # noise: smaller at the larger size
    assert fit.bytes_per_env == 0.0 and fit.fixed_bytes == pytest.approx(950)


def _fake_memory(fixed: int, per_env: int, fits: int | None = None):
    """measure over a made-up device; sizes above ``fits`` run out of memory."""
    calls: list[int] = []

    def measure(n):
        calls.append(n)
        if fits is not None and n > fits:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2 GiB")
        return fixed + per_env * n

    return measure, calls


def test_search_memory_picks_the_largest_power_of_two_under_the_budget():
    measure, calls = _fake_memory(1000, 100)
    found = search_memory(measure, budget=100_000, cap=2**24, probe_sizes=(4, 16))
    # 1000 + 100 n <= 100,000 -> n <= 990 -> 512, then verified by a run at 512
    assert found.num_envs == 512 and found.failed == [] and found.peak == 1000 + 51_200
    assert found.fit.bytes_per_env == pytest.approx(100)
    assert calls == [4, 16, 512]


def test_search_memory_respects_the_cap_and_runs_a_probe_size_once():
    measure, calls = _fake_memory(1000, 100)
    assert search_memory(measure, 1e12, cap=64, probe_sizes=(4, 16)).num_envs == 64
    assert search_memory(measure, 1e12, cap=100, probe_sizes=(4, 16)).num_envs == 64
    calls.clear()
    assert search_memory(measure, 1e12, cap=16, probe_sizes=(4, 16)).num_envs == 16
    assert calls == [4, 16]


def test_out_of_memory_when_verifying_halves_until_it_fits():
    # The fit says 512 fits; the device (fragmentation, graphs) takes only 128.
    measure, calls = _fake_memory(1000, 100, fits=128)
    found = search_memory(measure, budget=100_000, cap=2**24, probe_sizes=(4, 16))
    assert found.num_envs == 128 and found.failed == [512, 256]
    assert calls == [4, 16, 512, 256, 128]


def test_out_of_memory_in_a_probe_halves_the_probes():
    measure, calls = _fake_memory(1000, 100, fits=8)
    found = search_memory(measure, budget=1e9, cap=2**24, probe_sizes=(8, 32))
    assert [n for n, _ in found.fit.probes] == [2, 8]
    assert found.num_envs == 8 and found.failed[0] == 2**23  # 8 itself: probed already
    assert calls[:5] == [8, 32, 4, 16, 2] and calls[-1] == 16


def test_nothing_fits_is_a_clear_error_and_other_errors_pass_through():
    measure, _ = _fake_memory(1000, 100, fits=0)
    with pytest.raises(OutOfMemory, match="not even 1 env fits"):
        search_memory(measure, budget=1e9, cap=64, probe_sizes=(4, 16))

    def broken(n):
        raise ValueError("PPO: a roll-out of 4 samples ...")

    with pytest.raises(ValueError, match="PPO: a roll-out"):
        search_memory(broken, budget=1e9, cap=64, probe_sizes=(4, 16))


def test_is_out_of_memory():
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:117] "
                                         "DefaultCPUAllocator: can't allocate memory"))
    assert is_out_of_memory(MemoryError())
    assert not is_out_of_memory(RuntimeError("CUDA error: an illegal memory access"))
    try:  # an out of memory inside a CUDA graph capture surfaces as the failed capture
        try:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        finally:
            raise RuntimeError("CUDA error: operation failed due to a previous error "
                               "during capture")
    except RuntimeError as exc:
        assert is_out_of_memory(exc)
    assert not is_out_of_memory(ValueError("out of memory"))


def _fake_rates(table: dict[int, float], oom_from: int | None = None):
    measured: list[int] = []

    def rate(n):
        measured.append(n)
        if oom_from is not None and n >= oom_from:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return table[n]

    return rate, measured


def test_throughput_stops_at_the_first_doubling_that_gains_less_than_ten_percent():
    rate, measured = _fake_rates({1: 10.0, 2: 20.0, 4: 39.0, 8: 42.0, 16: 100.0})
    searched = search_throughput(rate, start=1, cap=16)
    assert searched.num_envs == 4  # 8 gave +7.7 %: stop, never try 16
    assert measured == [1, 2, 4, 8]
    assert searched.rates == [(1, 10.0), (2, 20.0), (4, 39.0), (8, 42.0)]
    rate, _ = _fake_rates({1: 10.0, 2: 11.0, 4: 12.0})
    assert search_throughput(rate, start=1, cap=4).num_envs == 2  # exactly +10 % counts
    rate, _ = _fake_rates({1: 10.0, 2: 10.9, 4: 100.0})
    assert search_throughput(rate, start=1, cap=4).num_envs == 1


def test_throughput_up_to_the_memory_limit_and_out_of_memory_on_the_way():
    rate, measured = _fake_rates({4: 1.0, 8: 2.0, 16: 4.0, 32: 8.0})
    assert search_throughput(rate, start=4, cap=32).num_envs == 32
    assert search_throughput(rate, start=64, cap=32).num_envs == 32  # start above the cap
    rate, _ = _fake_rates({4: 1.0, 8: 2.0, 16: 4.0}, oom_from=16)
    searched = search_throughput(rate, start=4, cap=32)
    assert searched.num_envs == 8 and searched.rates[-1] == (16, None)


# -- config and command line --


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.num_envs=autoo", "trainer.num_envs must be an int or auto, got 'autoo'"),
        ("trainer.autoscale=fast", "trainer.autoscale must be one of ['memory', 'throughput']"),
        ("trainer.autoscale_memory_fraction=-0.5", "autoscale_memory_fraction must be in (0, 1]"),
        ("trainer.autoscale_memory_fraction=0", "autoscale_memory_fraction must be in (0, 1]"),
        ("trainer.autoscale_memory_fraction=1.5", "autoscale_memory_fraction must be in (0, 1]"),
        ("trainer.autoscale_max_envs=0", "trainer.autoscale_max_envs must be >= 1"),
    ],
)
def test_bad_autoscale_values_raise_clear_errors(override, message):
    with pytest.raises((ValueError, TypeError)) as info:
        load_config(None, [override])
    assert message in str(info.value)


def test_auto_is_accepted_from_yaml_set_and_the_cli(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("trainer:\n  num_envs: auto\n  autoscale: throughput\n")
    config = load_config(path)
    assert config.trainer.num_envs == "auto" and config.trainer.autoscale == "throughput"
    assert load_config(None, ["trainer.num_envs=auto"]).trainer.num_envs == "auto"
    assert cli_main(["train", "--num-envs", "auto", "--print-config"]) == 0
    assert "num_envs: auto" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["train", "--num-envs", "autoo", "--print-config"])
    assert exit_info.value.code == 2
    assert "--num-envs: expected an int or auto, got 'autoo'" in capsys.readouterr().err


# -- small runs on the CPU --

_TINY = ["trainer.device=cpu", "trainer.backend=torch", "trainer.progress=false",
         "trainer.tensorboard=false", "trainer.eval_episodes=0", "trainer.log_interval=1",
         "ppo.num_steps=8", "trainer.total_steps=256", "trainer.checkpoint_interval=0"]


def test_auto_run_equals_the_run_with_the_number_it_chose(tmp_path, capsys):
    config = load_config(None, [*_TINY, "trainer.num_envs=auto",
                                "trainer.autoscale_max_envs=16"])
    auto = Trainer(dataclass_with_run_dir(config, tmp_path / "auto"))
    first, line = capsys.readouterr().out.splitlines()
    assert first.startswith("num_envs: auto: building and timing the trainer")
    assert auto.config.trainer.num_envs == 16 and auto.num_slots == 16
    assert line.startswith("num_envs: auto -> 16 (memory: ")
    assert "capped by autoscale_max_envs 16" in line
    assert config.trainer.num_envs == "auto"  # the caller's config is left as it was
    rows = auto.run().metrics
    assert "num_envs: 16" in (tmp_path / "auto" / "config.yaml").read_text()

    fixed = Trainer(dataclass_with_run_dir(
        load_config(None, [*_TINY, "trainer.num_envs=16"]), tmp_path / "fixed"))
    assert capsys.readouterr().out == ""  # a number: nothing is chosen
    # The probes leave no trace: same seed, same size -> the same run, bit for bit.
    assert [r["loss"] for r in rows] == [r["loss"] for r in fixed.run().metrics]

    # Resumed with num_envs: auto, a run keeps the size it started with.
    more = load_config(None, [*_TINY, "trainer.num_envs=auto", "trainer.total_steps=512",
                              f"trainer.run_dir={tmp_path / 'auto'}"])
    resumed = Trainer(more, resume=True)
    assert resumed.num_slots == 16 and resumed.global_step == 256
    assert "num_envs: auto -> 16 (the size the run in" in capsys.readouterr().out


def dataclass_with_run_dir(config, run_dir):
    import dataclasses

    return dataclasses.replace(config, trainer=dataclasses.replace(config.trainer,
                                                                   run_dir=str(run_dir)))


def test_throughput_mode_on_the_cpu_prints_what_it_measured(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(probe, "TIMED_SECONDS", 0.2)
    config = load_config(None, [*_TINY, "trainer.num_envs=auto", "trainer.autoscale=throughput",
                                "trainer.autoscale_max_envs=8"])
    choice = autoscale.choose_num_envs(config, torch.device("cpu"), Trainer)
    out = capsys.readouterr().out.splitlines()[1:]
    assert choice.num_envs in (1, 2, 4, 8) and choice.slots_per_env == 1
    assert out[0] == "num_envs: auto, throughput (training env-steps/s per size):"
    sizes = [int(line.split()[0].replace(",", "")) for line in out[2:-1]]
    assert sizes == [2, 4, 8][:len(sizes)] and len(sizes) >= 2  # from a quarter of 8
    assert choice.num_envs in sizes
    assert out[-1].startswith(f"num_envs: auto -> {choice.num_envs} (")
    assert "throughput: " in out[-1]


def test_probes_run_the_update_eagerly_where_the_run_compiles_it(tmp_path):
    config = load_config(None, [*_TINY, "trainer.compile_update=true"],
                         run_dir=str(tmp_path / "run"))
    built = []
    probes = probe.Probe(config, torch.device("cpu"), lambda c: built.append(c) or c)
    try:
        probes._build(4)
    finally:
        probes.close()
    assert config.trainer.compile_update is True
    assert [(c.trainer.num_envs, c.trainer.compile_update) for c in built] == [(4, False)]


def test_cpu_limit_rollout_rows_and_ddpg_replay_buffer_cap_the_choice(monkeypatch):
    from gpu_vecenv.train.trainer import CPU_SLOTS_WARNING

    assert autoscale.CPU_MAX_SLOTS <= CPU_SLOTS_WARNING  # auto never chooses a warned size
    monkeypatch.setattr(autoscale, "CPU_MAX_SLOTS", 9)
    config = load_config(None, [*_TINY, "trainer.num_envs=auto"])
    choice = autoscale.choose_num_envs(config, torch.device("cpu"), Trainer, log=None)
    assert choice.num_envs == 8
    assert "capped by the CPU limit (fewer than 9 vector slots)" in choice.lines[-1]

    monkeypatch.setattr(autoscale, "MAX_ROLLOUT_ROWS", 63)  # 8 steps: 7 envs, 4 as 2^k
    choice = autoscale.choose_num_envs(config, torch.device("cpu"), Trainer, log=None)
    assert choice.num_envs == 4 and "capped by 64 roll-out rows" in choice.lines[-1]

    config = load_config(None, [
        *_TINY, "trainer.num_envs=auto", "trainer.env=GPUPendulum-v1", "trainer.algo=ddpg",
        "ddpg.buffer_size=6", "ddpg.batch_size=4", "ddpg.hidden_sizes=[8]"])
    choice = autoscale.choose_num_envs(config, torch.device("cpu"), Trainer, log=None)
    assert choice.num_envs == 4 and "ddpg.buffer_size 6" in choice.lines[-1]


def test_out_of_memory_while_verifying_the_choice_is_caught_and_said(monkeypatch, capsys):
    real_peak_bytes = autoscale.Probe.peak_bytes
    tried = []

    def peak_bytes(self, num_envs):  # a device on which only 4 envs fit
        tried.append(num_envs)
        if num_envs > 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 9 GiB")
        return real_peak_bytes(self, num_envs)

    monkeypatch.setattr(autoscale.Probe, "peak_bytes", peak_bytes)
    monkeypatch.setattr(autoscale, "PROBE_SLOTS", {"cpu": (1, 4)})
    config = load_config(None, [*_TINY, "trainer.num_envs=auto", "trainer.autoscale_max_envs=16"])
    assert autoscale.choose_num_envs(config, torch.device("cpu"), Trainer).num_envs == 4
    assert tried == [1, 1, 4, 16, 8]  # warm-up, probes, 16 and 8 out of memory; 4 probed
    assert "out of memory at 16, 8 (halved)" in capsys.readouterr().out


def test_ranks_agree_on_one_number(capsys):
    config = load_config(None, [*_TINY, "trainer.num_envs=auto", "trainer.autoscale_max_envs=8"])
    seen = []

    def minimum_over_ranks(n):  # what an all_reduce(MIN) over the ranks would give
        seen.append(n)
        return 2

    resolved = autoscale.resolve_num_envs(config, torch.device("cpu"), Trainer,
                                          agree=minimum_over_ranks)
    assert seen == [8] and resolved.trainer.num_envs == 2
    assert "num_envs: auto -> 2 agreed between the ranks (this one chose 8)" in (
        capsys.readouterr().out)


def test_where_memory_cannot_be_measured_the_cap_decides(monkeypatch):
    monkeypatch.setattr(autoscale, "memory_is_measurable", lambda device: False)
    config = load_config(None, [*_TINY, "trainer.num_envs=auto", "trainer.autoscale_max_envs=8"])
    choice = autoscale.choose_num_envs(config, torch.device("cpu"), Trainer, log=None)
    assert choice.num_envs == 8
    assert choice.lines[-1] == ("num_envs: auto -> 8 (autoscale_max_envs 8; memory not "
                                "measurable on this host)")


# -- on a CUDA device (-m gpu) --

_GPU = ["trainer.device=cuda", "trainer.progress=false", "trainer.tensorboard=false",
        "trainer.eval_episodes=0", "trainer.checkpoint_interval=0", "trainer.num_envs=auto"]


@pytest.mark.gpu
def test_the_memory_line_predicts_the_measured_peak_on_the_gpu(monkeypatch):
    config = load_config(None, [*_GPU, "ppo.num_steps=16", "trainer.autoscale_max_envs=262144"])
    found = []
    real_search = autoscale.search_memory

    def search(*args, **kwargs):
        found.append(real_search(*args, **kwargs))
        return found[-1]

    monkeypatch.setattr(autoscale, "search_memory", search)
    choice = autoscale.choose_num_envs(config, torch.device("cuda"), Trainer, log=None)
    (result,) = found
    assert choice.num_envs == result.num_envs == 262144  # far below an H200's memory
    assert [n for n, _ in result.fit.probes] == [16384, 65536]
    assert result.fit.bytes_per_env > 0
    predicted = result.fit.bytes_at(choice.num_envs)
    assert 0.8 * result.peak < predicted < 1.25 * result.peak


@pytest.mark.gpu
@pytest.mark.whole_gpu  # beside it, other processes on the GPU run out of memory too
def test_a_real_out_of_memory_on_the_gpu_is_caught_and_halved(monkeypatch):
    # Told that 1 PiB is free, the fit chooses a size that cannot fit: the verification
    # runs out of memory for real, halves, and the memory of the failed tries is freed.
    monkeypatch.setattr(probe.MemoryMeter, "free", lambda self: 2**50)
    config = load_config("tag_ppo", _GPU)  # 110 agents, 256x256 networks, 32 steps
    before = torch.cuda.memory_allocated()
    choice = autoscale.choose_num_envs(config, torch.device("cuda"), Trainer, log=None)
    # The cap: 2^31 roll-out rows / (110 x 32) = 610,080 games -> 524,288 (terabytes).
    assert "out of memory at 524,288, 262,144" in choice.lines[-1]
    assert choice.num_envs < 2**18
    # What the failed tries allocated (tens of GiB each, up to the whole GPU) is free
    # again. About 0.44 GiB stays allocated on an H200 (tensors of the probes' eager
    # warm-up iterations, not yet traced to what holds them), hence the 1 GiB bound.
    assert torch.cuda.memory_allocated() - before < 2**30
    trainer = Trainer(load_config("tag_ppo", [*_GPU[:-1], f"trainer.num_envs={choice.num_envs}"]))
    trainer.phases.collect()
    trainer.phases.update()
    torch.cuda.synchronize()


@pytest.mark.gpu
def test_throughput_mode_on_the_gpu(capsys):
    config = load_config(None, [*_GPU, "ppo.num_steps=16", "trainer.autoscale=throughput",
                                "trainer.autoscale_max_envs=16384"])
    choice = autoscale.choose_num_envs(config, torch.device("cuda"), Trainer)
    out = capsys.readouterr().out
    assert "num_envs: auto, throughput" in out and choice.num_envs <= 16384
    assert out.splitlines()[-1].startswith(f"num_envs: auto -> {choice.num_envs:,} (memory: ")
