"""Config validation at load: numbers in their ranges and finite, env kwargs checked by the
env's params, duplicate YAML keys refused, every file error naming the file, and a
``--run-dir`` that is a file refused; all before an env is built."""

from __future__ import annotations

import pytest

from gpu_vecenv.cli import main as cli_main
from gpu_vecenv.train.config_loading import load_config, load_yaml
from gpu_vecenv.train.config_ranges import RANGES
from gpu_vecenv.train.config_values import NotFiniteError

# Every case of issue 32 that trained and exited 0, or failed late, before.
_OUT_OF_RANGE = [
    ("ppo.learning_rate=-0.001", "ppo.learning_rate must be > 0, got -0.001"),
    ("ppo.learning_rate=0", "ppo.learning_rate must be > 0, got 0"),
    ("ppo.clip_coef=-0.2", "ppo.clip_coef must be > 0, got -0.2"),
    ("ppo.gae_lambda=1.5", "ppo.gae_lambda must be in [0, 1], got 1.5"),
    ("ppo.ent_coef=-0.01", "ppo.ent_coef must be >= 0"),
    ("ppo.vf_coef=-1", "ppo.vf_coef must be >= 0"),
    ("ppo.max_grad_norm=0", "ppo.max_grad_norm must be > 0"),
    ("ppo.target_kl=-1", "ppo.target_kl must be >= 0"),
    ("ppo.reward_scale=0", "ppo.reward_scale must be > 0"),
    ("ppo.update_epochs=0", "ppo.update_epochs must be >= 1"),
    ("trainer.progress_interval=-1", "trainer.progress_interval must be >= 0"),
    ("trainer.torch_threads=-2", "trainer.torch_threads must be >= 0"),
]


@pytest.mark.parametrize("override, message", _OUT_OF_RANGE)
def test_numbers_out_of_range_are_refused_naming_the_key(override, message):
    with pytest.raises(ValueError) as info:
        load_config(None, [override])
    assert message in str(info.value)


@pytest.mark.parametrize("algo, override, message", [
    ("a2c", "a2c.learning_rate=-1", "a2c.learning_rate must be > 0"),
    ("ddpg", "ddpg.actor_learning_rate=0", "ddpg.actor_learning_rate must be > 0"),
    ("ddpg", "ddpg.critic_learning_rate=-3e-4", "ddpg.critic_learning_rate must be > 0"),
    ("ddpg", "ddpg.noise_std=-0.1", "ddpg.noise_std must be >= 0"),
    ("ddpg", "ddpg.learning_starts=-1", "ddpg.learning_starts must be >= 0"),
    ("ddpg", "ddpg.batch_size=512", "need batch_size <= buffer_size"),
])
def test_other_algorithms_ranges(algo, override, message):
    extra = ["ddpg.buffer_size=256"] if override.startswith("ddpg.batch_size") else []
    with pytest.raises(ValueError) as info:
        load_config(None, [f"trainer.algo={algo}", override, *extra])
    assert message in str(info.value)


def test_a_policy_override_out_of_range_names_the_policy():
    with pytest.raises(ValueError, match=r"policies.tagger.ppo.learning_rate must be > 0"):
        load_config(None, ["trainer.env=GPUTag-v0", "policies.tagger.agents=[tagger]",
                           "policies.tagger.ppo.learning_rate=-1",
                           "policies.runner.agents=[runner]"])


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "nan", "1e400"])
@pytest.mark.parametrize("key", ["ppo.learning_rate", "ppo.target_kl", "ppo.init_log_std",
                                 "trainer.stop_at_return", "trainer.progress_interval"])
def test_nan_and_inf_are_refused_everywhere(key, value):
    with pytest.raises(NotFiniteError, match=f"{key} must be a finite number"):
        load_config(None, [f"{key}={value}"])


def test_every_range_names_a_field_of_its_config():
    import dataclasses

    for cls, ranges in RANGES.items():
        names = {f.name for f in dataclasses.fields(cls)}
        assert set(ranges) <= names, (cls.__name__, set(ranges) - names)


def test_the_defaults_are_in_range():
    # (the shipped configs: test_config.py::test_every_registered_env_has_a_valid_shipped_config)
    for algo in ("ppo", "a2c", "ddpg"):
        load_config(None, [f"trainer.algo={algo}"])


# -- env kwargs: checked by the env's params before anything is built --


@pytest.mark.parametrize("env, kwargs, error, message", [
    ("GPUCartPole-v1", "{gravity: heavy}", TypeError,
     "trainer.env_kwargs.gravity must be a number, got 'heavy'"),
    ("GPUCartPole-v1", "{gravity: .nan}", ValueError,
     "trainer.env_kwargs.gravity must be a finite number, got nan"),
    ("GPUCartPole-v1", "{euler: 1}", TypeError,
     "trainer.env_kwargs.euler must be true or false"),
    ("GPUCartPole-v1", "{gravty: 9.8}", TypeError, "did you mean gravity?"),
    ("GPUCartPole-v1", "{device: cpu}", ValueError,
     "trainer.env_kwargs.device is set by trainer.device"),
    ("GPUAcrobot-v1", "{avail_torque: [1, 0]}", TypeError,
     "trainer.env_kwargs.avail_torque must be a list of 3 values"),
    ("GPUAcrobot-v1", "{book_or_nips: both}", ValueError, "book_or_nips must be"),
    ("GPUTag-v0", "{num_taggers: 2.5}", TypeError,
     "trainer.env_kwargs.num_taggers must be an int"),
    ("GPUTag-v0", "{num_taggers: 0}", ValueError, "num_taggers must be >= 1"),
    ("GPUTag-v0", "{preset: nope}", ValueError, "unknown preset 'nope'"),
])
def test_env_kwargs_are_checked_by_the_env_params(env, kwargs, error, message):
    with pytest.raises(error) as info:
        load_config(None, [f"trainer.env={env}", f"trainer.env_kwargs={kwargs}"])
    assert message in str(info.value)


def test_env_kwargs_that_fit_are_converted_to_the_field_types():
    config = load_config(None, ["trainer.env_kwargs={gravity: 10, tau: 1e-2, "
                                "max_episode_steps: 100}"])
    assert config.trainer.env_kwargs == {"gravity": 10.0, "tau": 0.01, "max_episode_steps": 100}
    assert isinstance(config.trainer.env_kwargs["tau"], float)  # "1e-2" is a YAML string
    tag = load_config(None, ["trainer.env=GPUTag-v0", "trainer.env_kwargs={num_taggers: 2, "
                             "preset: warpdrive_training, strict: true}"])
    assert tag.trainer.env_kwargs["num_taggers"] == 2


def test_env_kwargs_are_refused_before_an_env_is_built(tmp_path, capsys):
    code = cli_main(["train", "--device", "cpu", "--run-dir", str(tmp_path / "r"),
                     "--set", "trainer.env_kwargs={gravity: heavy}"])
    err = capsys.readouterr().err
    assert code == 2 and "trainer.env_kwargs.gravity must be a number" in err
    assert not (tmp_path / "r").exists()


# -- YAML files and file errors --


def test_duplicate_yaml_keys_are_refused_naming_file_and_lines(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("trainer:\n  seed: 1\n  num_envs: 8\n  seed: 2\n")
    with pytest.raises(ValueError) as info:
        load_yaml(path)
    text = str(info.value)
    assert str(path) in text and "duplicate key 'seed' (first on line 2)" in text
    assert "line 4" in text
    path.write_text("ppo: {gamma: 0.9, gamma: 0.8}\n")
    with pytest.raises(ValueError, match="duplicate key 'gamma'"):
        load_yaml(path)
    with pytest.raises(ValueError, match="duplicate key 'gravity'"):
        load_config(None, ["trainer.env_kwargs={gravity: 1, gravity: 2}"])


def test_yaml_merge_keys_may_still_be_overridden(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("base: &base {seed: 1, num_envs: 8}\ntrainer:\n  <<: *base\n  seed: 3\n")
    assert load_yaml(path)["trainer"] == {"seed": 3, "num_envs": 8}


def test_a_config_that_is_not_utf8_names_its_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("trainer:\n  env: GPUCartPole-v1  # caf\xe9\n".encode("latin-1"))
    with pytest.raises(ValueError) as info:
        load_yaml(path)
    assert str(path) in str(info.value) and "not UTF-8" in str(info.value)
    with pytest.raises(ValueError, match="is a directory"):
        load_yaml(tmp_path)


def test_a_run_directory_config_that_is_not_utf8_names_its_file(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_bytes(b"trainer:\n  seed: 1\n  \xff\xfe: 2\n")
    assert cli_main(["train", "--resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'config.yaml'} is not UTF-8" in err and "Traceback" not in err


@pytest.mark.parametrize("inside", [False, True])
def test_run_dir_naming_a_file_is_a_clear_error(tmp_path, capsys, inside):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine\n")
    run_dir = existing / "run" if inside else existing
    for extra in ([], ["--overwrite"]):
        code = cli_main(["train", "--device", "cpu", "--no-progress", "--num-envs", "2",
                         "--total-steps", "64", "--run-dir", str(run_dir), *extra])
        err = capsys.readouterr().err
        assert code == 2 and f"{existing} is a file, not a directory" in err
    assert existing.read_text() == "mine\n"  # untouched
