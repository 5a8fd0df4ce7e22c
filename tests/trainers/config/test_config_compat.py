"""Real configs of every ML-Agents release: duplicate keys, keys of later releases (honoured,
warned about, or refused), reward signals' own networks (ML-Agents 2.0), and every example
in config/ (issues 14 item 10 and 15)."""
from __future__ import annotations

import glob
import os

import pytest

from trainers.exceptions import ConfigError
from trainers.config import NetworkSettings, load_settings, to_dict, write_resolved_config

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "data", "configs")
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def load(path: str, **cli):
    warnings: list = []
    options = load_settings(path, cli or None, on_warning=warnings.append)
    return options, warnings


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(REPO, "config", "**", "*.yaml"), recursive=True)))
def test_every_example_config_loads_without_warnings(path):
    options, warnings = load(path)
    assert options.behaviors and warnings == []


def test_duplicate_keys_keep_the_last_value_with_one_warning_each():
    path = fixture("flat_0.10_duplicate_keys.yaml")
    options, warnings = load(path)
    pyramids = options.behaviors["Pyramids"]
    # Last values: use_recurrent false (so no memory), sequence_length 16 ignored with it.
    assert pyramids.network_settings.memory is None
    assert pyramids.hyperparameters.batch_size == 128
    assert warnings == [
        f"{path}: line 32: duplicate key 'sequence_length'; the last value is used",
        f"{path}: line 33: duplicate key 'use_recurrent'; the last value is used",
    ]


def test_duplicate_keys_are_printed_once_by_default(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text("behaviors:\n  A: {max_steps: 10}\n  A: {max_steps: 20}\n")
    options = load_settings(str(path))
    assert options.behaviors["A"].max_steps == 20
    err = capsys.readouterr().err.splitlines()
    assert err == [f"[WARNING] {path}: line 3: duplicate key 'A'; the last value is used"]


def test_resolved_config_of_mlagents_2x_loads_silently():
    options, warnings = load(fixture("mlagents_2.x_resolved.yaml"))
    assert warnings == []
    ball = options.behaviors["3DBall"]
    assert ball.hyperparameters.beta_schedule == "linear"
    assert ball.network_settings.normalize is True
    assert ball.checkpoint_interval == 500000
    assert options.checkpoint_settings.resume is False
    assert options.engine_settings.no_graphics is False


def test_keys_we_cannot_honour_give_one_warning_line_each():
    path = fixture("mlagents_2.x_not_honoured.yaml")
    options, warnings = load(path)
    assert options.behaviors["CartPole-v1"].max_steps == 1000
    assert options.env_settings.env_args == {}
    expected = [
        "behaviors.CartPole-v1.framework: pytorch: ignored; trainer-learn trains the same algorithm with TensorFlow",
        "env_settings.num_areas: 4: ignored (training areas are instantiated by a Unity build, and "
        "gym:CartPole-v1 is not one); use agents_per_env",
        "env_settings.max_lifetime_restarts: 3: ignored (Unity process restarts and timeouts)",
        "env_settings.env_args: a list (arguments for a Unity executable): ignored",
        "torch_settings.device: 'cuda': ignored; trainer-learn trains with TensorFlow",
        "engine_settings: no_graphics, time_scale: ignored; they configure a Unity build, and gym:CartPole-v1 is not one",
    ]
    assert len(warnings) == len(expected)
    for line in warnings:
        assert "\n" not in line and line.startswith(f"{path}: ")
    for text in expected:
        assert sum(text in line for line in warnings) == 1, (text, warnings)


def test_list_env_args_are_a_unity_builds_command_line(tmp_path):
    config = tmp_path / "unity.yaml"
    config.write_text(
        "behaviors:\n  3DBall:\n    trainer_type: ppo\n"
        "env_settings:\n  env_path: builds/3DBall.x86_64\n  env_args: [-logFile, '-']\n  timeout_wait: 120\n"
    )
    options, warnings = load(str(config))
    assert warnings == []
    assert options.env_settings.env_args == {"args": ["-logFile", "-"]}
    assert options.env_settings.timeout_wait == 120  # honoured by the Unity communicator


def test_keys_we_honour_are_translated():
    options, warnings = load(fixture("mlagents_2.x_honoured.yaml"))
    assert warnings == []
    a = options.behaviors["A"]
    assert a.checkpoint_interval == 100000 // 4  # even_checkpoints
    assert a.hyperparameters.shared_critic is True
    assert options.checkpoint_settings.resume is True  # load_model: ML-Agents' old --load


def test_resolved_config_of_a_translated_file_reads_back_equal(tmp_path):
    options, _ = load(fixture("mlagents_2.x_honoured.yaml"))
    out = tmp_path / "configuration.yaml"
    write_resolved_config(options, str(out))
    again, warnings = load(str(out))
    assert warnings == [] and to_dict(again) == to_dict(options)


def test_release_10_framework_tensorflow_is_accepted():
    options, warnings = load(fixture("release_10_framework.yaml"))
    assert warnings == [] and options.behaviors["3DBall"].hyperparameters.batch_size == 64


def test_deterministic_is_refused_for_training_and_accepted_for_inference():
    path = fixture("deterministic.yaml")
    with pytest.raises(ConfigError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}: behaviors.A.network_settings.deterministic: true is supported with --inference only "
        "(deterministic actions while training are not); remove it to train"
    )
    options, warnings = load(path, inference=True)
    assert options.checkpoint_settings.inference and warnings == []


def test_poca_section_loads_with_ppo_hyperparameters():
    """MA-POCA (trainers/poca/) takes PPO's hyperparameters, as ML-Agents' POCASettings."""
    from trainers.config import POCASettings

    options, warnings = load(fixture("poca.yaml"))
    settings = options.behaviors["SoccerTwos"]
    assert settings.trainer_type == "poca" and warnings == []
    assert isinstance(settings.hyperparameters, POCASettings)
    assert (settings.hyperparameters.batch_size, settings.hyperparameters.buffer_size) == (2048, 20480)


def test_rnd_section_of_pyramids_rnd_loads():
    """Release 22's ppo/PyramidsRND.yaml reward signals (fixture rnd.yaml)."""
    options, warnings = load(fixture("rnd.yaml"))
    rnd = options.behaviors["Pyramids"].reward_signals["rnd"]
    assert warnings == []
    assert (rnd.strength, rnd.gamma, rnd.learning_rate) == (0.01, 0.99, 0.0001)
    assert rnd.network_settings == NetworkSettings(hidden_units=64, num_layers=3)


def test_signal_network_settings_are_read():
    path = fixture("mlagents_2.0_signal_networks.yaml")
    options, warnings = load(path)
    signals = options.behaviors["Simple"].reward_signals
    assert signals["curiosity"].network_settings == NetworkSettings(hidden_units=24, num_layers=3)
    assert signals["gail"].network_settings == NetworkSettings(normalize=True, hidden_units=20, num_layers=2)
    assert not hasattr(signals["extrinsic"], "network_settings")
    # encoding_size beside network_settings is ignored, as in ML-Agents 2.0: one warning.
    assert warnings == [
        f"{path}: behaviors.Simple.reward_signals.gail.encoding_size: ignored: "
        "network_settings.hidden_units sets the encoding size (as in ML-Agents 2.0)"
    ]


def test_signal_normalize_without_a_policy_normaliser_warns(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "behaviors:\n  A:\n    reward_signals:\n      extrinsic: {}\n"
        "      curiosity: {network_settings: {normalize: true}}\n"
    )
    _, warnings = load(str(path))
    assert len(warnings) == 1
    assert "reward_signals.curiosity.network_settings.normalize: true: the signal reads raw observations" in warnings[0]


def test_default_settings_key_warns_once_for_every_behavior(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("default_settings: {framework: pytorch}\nbehaviors: {A: {}, B: {}}\n")
    _, warnings = load(str(path))
    assert warnings == [
        f"{path}: default_settings.framework: pytorch: ignored; trainer-learn trains the same "
        "algorithm with TensorFlow"
    ]


def test_signal_networks_shape_the_graph_and_choose_raw_or_normalised_inputs():
    """ML-Agents 2.0 reward-signal networks: hidden units and layers of each signal's own
    network reach the graph; normalize: false reads raw observations, true the policy's
    running normalisation."""
    from envs.demo import load_demonstration
    from trainers.ppo.trainer import PPOTrainer
    from trainers.stats import StatsReporter
    from trainers.tf import tf

    options, _ = load(fixture("mlagents_2.0_signal_networks.yaml"))
    settings = options.behaviors["Simple"]
    spec = load_demonstration(settings.reward_signals["gail"].demo_path).behavior_spec
    trainer = PPOTrainer("Simple", spec, settings, StatsReporter("Simple", []), 0)
    try:
        with trainer.policy.graph.as_default():
            shapes = {v.op.name: v.shape.as_list() for v in tf.global_variables()}
        # curiosity: 3 encoder layers of 24, the forward model predicts the 24-unit encoding.
        assert [shapes[f"curiosity/encoder/body/dense_{i}/kernel"][1] for i in range(3)] == [24, 24, 24]
        assert "curiosity/encoder/body/dense_3/kernel" not in shapes
        assert shapes["curiosity/forward/next_encoding/kernel"][1] == 24
        # gail: 2 hidden layers of 20 in all (one on the observations, one with actions and done).
        assert shapes["gail/encoder/body/dense_0/kernel"][1] == 20
        assert "gail/encoder/body/dense_1/kernel" not in shapes
        assert shapes["gail/hidden/kernel"][1] == 20
        policy_norm = trainer.policy.normalizers
        assert policy_norm[0] is not None
        assert trainer.signals["curiosity"]._normalizers == [None]
        assert list(trainer.signals["gail"]._normalizers) == list(policy_norm)
    finally:
        trainer.close()


@pytest.mark.parametrize(
    "hyper, beta, epsilon",
    [
        # TF era of the nested format (release 3-10): beta and epsilon follow learning_rate_schedule.
        ("{learning_rate_schedule: constant}", "constant", "constant"),
        ("{learning_rate_schedule: linear}", "linear", "linear"),
        # ML-Agents 2.x keys, when given, are honoured.
        ("{learning_rate_schedule: constant, beta_schedule: linear}", "linear", "constant"),
        ("{learning_rate_schedule: linear, epsilon_schedule: constant}", "linear", "constant"),
    ],
)
def test_schedules_follow_the_tf_era_unless_given(tmp_path, hyper, beta, epsilon):
    path = tmp_path / "c.yaml"
    path.write_text(f"behaviors:\n  A:\n    hyperparameters: {hyper}\n")
    hp = load(str(path))[0].behaviors["A"].hyperparameters
    assert (hp.resolved_beta_schedule, hp.resolved_epsilon_schedule) == (beta, epsilon)


def test_threaded_true_is_honoured_in_both_formats(tmp_path):
    flat = tmp_path / "flat.yaml"
    flat.write_text("default: {trainer: ppo, threaded: true}\nA: {}\nB: {}\n")
    nested = tmp_path / "nested.yaml"
    nested.write_text("default_settings: {threaded: true}\nbehaviors: {A: {}, B: {}}\n")
    for path in (flat, nested):
        options, warnings = load(str(path))
        assert warnings == []
        assert all(b.threaded for b in options.behaviors.values())


def test_deterministic_in_a_signal_network_means_nothing(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(
        "behaviors:\n  A:\n    reward_signals:\n      extrinsic: {}\n"
        "      curiosity: {network_settings: {deterministic: true, goal_conditioning_type: none}}\n"
    )
    options, warnings = load(str(path))
    assert warnings == [] and options.behaviors["A"].reward_signals["curiosity"].network_settings is not None
