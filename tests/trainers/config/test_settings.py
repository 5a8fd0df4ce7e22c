"""Tests for trainers/settings.py: both YAML formats, defaults, validation, overrides."""

import dataclasses
import os
import textwrap

import pytest
import yaml

from trainers.exceptions import ConfigError, TrainerError
from trainers.config import (
    BehavioralCloningSettings,
    CheckpointSettings,
    CuriositySettings,
    DeviceSettings,
    EnvSettings,
    ExtrinsicSettings,
    GAILSettings,
    MemorySettings,
    NetworkSettings,
    PPOSettings,
    RunOptions,
    SACSettings,
    TrainerSettings,
    load_settings,
    to_dict,
    write_resolved_config,
)

NESTED_EXAMPLE = """
behaviors:
  CartPole:
    trainer_type: ppo
    hyperparameters:
      batch_size: 64
      buffer_size: 2048
      learning_rate: 3.0e-4
      learning_rate_schedule: linear
      beta: 5.0e-3
      epsilon: 0.2
      lambd: 0.95
      num_epoch: 3
    network_settings:
      normalize: false
      hidden_units: 128
      num_layers: 2
      vis_encode_type: simple
      memory:
        memory_size: 128
        sequence_length: 64
    reward_signals:
      extrinsic: {strength: 1.0, gamma: 0.99}
      curiosity: {strength: 0.02, gamma: 0.99, encoding_size: 64, learning_rate: 3.0e-4}
      gail: {strength: 0.01, gamma: 0.99, demo_path: demos/Expert.demo, encoding_size: 128,
             learning_rate: 3.0e-4, use_actions: false, use_vail: false}
    behavioral_cloning: {demo_path: demos/Expert.demo, strength: 0.5, steps: 10000}
    keep_checkpoints: 5
    checkpoint_interval: 500000
    max_steps: 500000
    time_horizon: 64
    summary_freq: 50000
env_settings: {env_path: null, num_envs: 1, seed: -1}
engine_settings: {}
"""

FLAT_EXAMPLE = """
default:
    trainer: ppo
    batch_size: 1024
    beta: 5.0e-3
    buffer_size: 10240
    epsilon: 0.2
    hidden_units: 128
    lambd: 0.95
    learning_rate: 3.0e-4
    max_steps: 5.0e4
    memory_size: 256
    normalize: false
    num_epoch: 3
    num_layers: 2
    time_horizon: 64
    sequence_length: 64
    summary_freq: 1000
    use_recurrent: false
    vis_encode_type: simple
    reward_signals:
        extrinsic:
            strength: 1.0
            gamma: 0.99
"""


def write(tmp_path, text, name="config.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def config_error(path, cli=None):
    """The ConfigError message of loading `path`; it must be one line naming the file."""
    with pytest.raises(ConfigError) as info:
        load_settings(path, cli)
    message = str(info.value)
    assert "\n" not in message
    return message


# ----------------------------------------------------------------------------- defaults


def test_defaults_match_ml_agents():
    ppo = PPOSettings()
    assert (ppo.batch_size, ppo.buffer_size, ppo.learning_rate) == (1024, 10240, 3e-4)
    assert (ppo.beta, ppo.epsilon, ppo.lambd, ppo.num_epoch) == (5e-3, 0.2, 0.95, 3)
    assert ppo.learning_rate_schedule == "linear" and not ppo.shared_critic
    sac = SACSettings()
    assert (sac.batch_size, sac.buffer_size, sac.buffer_init_steps) == (128, 50000, 0)
    assert (sac.tau, sac.steps_per_update, sac.init_entcoef) == (0.005, 1.0, 1.0)
    assert sac.learning_rate_schedule == "constant" and not sac.save_replay_buffer
    net = NetworkSettings()
    assert (net.hidden_units, net.num_layers, net.normalize) == (128, 2, False)
    assert (net.vis_encode_type, net.memory, net.activation) == ("simple", None, "swish")
    assert MemorySettings() == MemorySettings(memory_size=128, sequence_length=64)
    t = TrainerSettings()
    assert t.trainer_type == "ppo" and t.hyperparameters == PPOSettings()
    assert (t.max_steps, t.time_horizon, t.summary_freq) == (500000, 64, 50000)
    assert (t.keep_checkpoints, t.checkpoint_interval) == (5, 500000)
    assert t.reward_signals == {"extrinsic": ExtrinsicSettings()}
    assert t.behavioral_cloning is None and t.init_path is None
    assert EnvSettings() == EnvSettings(None, {}, 1, 1, -1, 5005)
    assert CheckpointSettings().run_id == "ppo"
    assert DeviceSettings() == DeviceSettings(None, None)


def test_sac_trainer_gets_sac_defaults_and_mismatch_is_an_error():
    assert TrainerSettings(trainer_type="sac").hyperparameters == SACSettings()
    with pytest.raises(ConfigError, match="hyperparameters: expected SACSettings"):
        TrainerSettings(trainer_type="sac", hyperparameters=PPOSettings(batch_size=16))


def test_schedules_resolve_through_properties_and_are_not_written_back():
    ppo = PPOSettings(learning_rate_schedule="constant")
    assert ppo.resolved_beta_schedule == ppo.resolved_epsilon_schedule == "constant"
    assert ppo.beta_schedule is None
    ppo = PPOSettings(beta_schedule="linear", learning_rate_schedule="constant")
    assert ppo.resolved_beta_schedule == "linear"
    assert ppo.resolved_epsilon_schedule == "constant"
    sac = SACSettings(steps_per_update=4.0)
    assert sac.resolved_reward_signal_steps_per_update == 4.0
    assert to_dict(sac)["reward_signal_steps_per_update"] is None


def test_settings_are_frozen_and_validated_in_code():
    with pytest.raises(dataclasses.FrozenInstanceError):
        PPOSettings().batch_size = 3  # type: ignore[misc]
    with pytest.raises(ConfigError, match="batch_size: expected an integer >= 1, got 0"):
        PPOSettings(batch_size=0)
    with pytest.raises(ConfigError, match="memory_size: expected an even integer"):
        MemorySettings(memory_size=127)
    with pytest.raises(ConfigError, match="devices: cannot be combined with num_gpus"):
        DeviceSettings(num_gpus=1, devices=("/cpu:0",))
    assert DeviceSettings(devices=["/cpu:0", "/cpu:1"]).devices == ("/cpu:0", "/cpu:1")
    assert issubclass(ConfigError, TrainerError)


def test_behavior_settings_fallbacks_and_run_dir():
    named = TrainerSettings(max_steps=10)
    default = TrainerSettings(max_steps=20)
    options = RunOptions(behaviors={"A": named}, default_settings=default)
    assert options.behavior_settings("A") is named
    assert options.behavior_settings("B") is default
    assert RunOptions().behavior_settings("B") == TrainerSettings()
    options = RunOptions(checkpoint_settings=CheckpointSettings(run_id="r1", results_dir="out"))
    assert options.run_dir == os.path.join("out", "r1")


# ------------------------------------------------------------------------ nested format


def test_nested_example_loads(tmp_path):
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "Expert.demo").write_bytes(b"")
    options = load_settings(write(tmp_path, NESTED_EXAMPLE))
    cart = options.behaviors["CartPole"]
    assert cart.hyperparameters == PPOSettings(batch_size=64, buffer_size=2048)
    assert cart.network_settings.memory == MemorySettings(128, 64)
    assert list(cart.reward_signals) == ["extrinsic", "curiosity", "gail"]
    assert cart.reward_signals["curiosity"] == CuriositySettings(strength=0.02)
    gail = cart.reward_signals["gail"]
    assert isinstance(gail, GAILSettings) and gail.encoding_size == 128
    demo = str(tmp_path / "demos" / "Expert.demo")
    assert gail.demo_path == demo
    assert cart.behavioral_cloning == BehavioralCloningSettings(demo, strength=0.5, steps=10000)
    assert options.default_settings is None
    assert options.env_settings == EnvSettings()
    assert options.behavior_settings("Other") == TrainerSettings()


def test_floats_that_are_whole_numbers_become_ints_and_exponents_parse(tmp_path):
    path = write(
        tmp_path,
        """
        behaviors:
          A:
            max_steps: 5.0e4
            summary_freq: 1e3
            hyperparameters: {learning_rate: 3e-4, batch_size: 64.0, buffer_size: 1.0e+3}
        """,
    )
    a = load_settings(path).behaviors["A"]
    assert a.max_steps == 50000 and isinstance(a.max_steps, int)
    assert a.summary_freq == 1000 and isinstance(a.summary_freq, int)
    assert a.hyperparameters.learning_rate == pytest.approx(3e-4)
    assert a.hyperparameters.batch_size == 64 and isinstance(a.hyperparameters.batch_size, int)
    assert a.hyperparameters.buffer_size == 1000


def test_default_settings_are_deep_merged_into_behaviors(tmp_path):
    path = write(
        tmp_path,
        """
        default_settings:
          max_steps: 1000
          hyperparameters: {batch_size: 32, buffer_size: 320, beta: 0.01}
          network_settings: {hidden_units: 64}
        behaviors:
          A:
            hyperparameters: {batch_size: 16}
          B:
            trainer_type: sac
            hyperparameters: {tau: 0.01}
          C:
        """,
    )
    options = load_settings(path)
    a = options.behaviors["A"]
    assert a.hyperparameters == PPOSettings(batch_size=16, buffer_size=320, beta=0.01)
    assert a.max_steps == 1000 and a.network_settings.hidden_units == 64
    # PPO hyperparameters of the default are not inherited by a SAC behavior.
    assert options.behaviors["B"].hyperparameters == SACSettings(tau=0.01)
    assert options.behaviors["B"].network_settings.hidden_units == 64
    assert options.behaviors["C"] == options.default_settings
    assert options.behavior_settings("Unnamed").max_steps == 1000


def test_behavior_reward_signals_are_the_ones_it_lists(tmp_path):
    path = write(
        tmp_path,
        """
        default_settings:
          reward_signals:
            extrinsic: {gamma: 0.995}
            curiosity: {strength: 0.1}
        behaviors:
          A:
            reward_signals:
              extrinsic: {strength: 2.0}
          B:
            reward_signals:
              curiosity:
          C: {}
        """,
    )
    options = load_settings(path)
    assert options.behaviors["A"].reward_signals == {
        "extrinsic": ExtrinsicSettings(strength=2.0, gamma=0.995)
    }
    assert options.behaviors["B"].reward_signals == {"curiosity": CuriositySettings(strength=0.1)}
    assert list(options.behaviors["C"].reward_signals) == ["extrinsic", "curiosity"]


def test_sac_behavior(tmp_path):
    path = write(
        tmp_path,
        """
        behaviors:
          Ball:
            trainer_type: sac
            hyperparameters: {batch_size: 8, buffer_init_steps: 100, learning_rate: 5.0e-3,
                              steps_per_update: 2, reward_signal_steps_per_update: 4}
        """,
    )
    hyper = load_settings(path).behaviors["Ball"].hyperparameters
    assert isinstance(hyper, SACSettings)
    assert (hyper.batch_size, hyper.buffer_init_steps, hyper.buffer_size) == (8, 100, 50000)
    assert hyper.steps_per_update == 2.0 and isinstance(hyper.steps_per_update, float)
    assert hyper.resolved_reward_signal_steps_per_update == 4.0


def test_other_sections(tmp_path):
    path = write(
        tmp_path,
        """
        behaviors: {}
        env_settings: {env_path: "builtin:Simple", env_args: {step_size: 0.5}, num_envs: 2,
                       agents_per_env: 3, seed: 7, base_port: 6000}
        engine_settings: {time_scale: 20}
        checkpoint_settings: {run_id: r, results_dir: out, inference: true}
        device_settings: {devices: [/cpu:0, /cpu:1]}
        debug: true
        """,
    )
    options = load_settings(path)
    assert options.env_settings == EnvSettings("builtin:Simple", {"step_size": 0.5}, 2, 3, 7, 6000)
    assert options.engine_settings.given() == {"time_scale": 20}
    assert options.checkpoint_settings == CheckpointSettings("r", "out", inference=True)
    assert options.device_settings.devices == ("/cpu:0", "/cpu:1")
    assert options.debug is True


# -------------------------------------------------------------------------- flat format


def test_flat_example_loads(tmp_path):
    options = load_settings(write(tmp_path, FLAT_EXAMPLE))
    default = options.default_settings
    assert default is not None
    assert default.max_steps == 50000 and isinstance(default.max_steps, int)
    assert default.summary_freq == 1000
    assert default.hyperparameters == PPOSettings()
    assert default.network_settings.memory is None  # use_recurrent: false
    assert default.reward_signals == {"extrinsic": ExtrinsicSettings()}
    assert options.behaviors == {}
    assert options.behavior_settings("Anything") == default


def test_flat_behavior_sections_override_default(tmp_path):
    (tmp_path / "Expert.demo").write_bytes(b"")
    path = write(
        tmp_path,
        FLAT_EXAMPLE
        + """
Pyramids:
    use_recurrent: true
    memory_size: 128
    batch_size: 128
    pretraining:
        demo_path: Expert.demo
        strength: 0.5
        steps: 10000
    reward_signals:
        curiosity:
            strength: 0.02
            gamma: 0.99
            encoding_size: 256
Walker:
    trainer: sac
    tau: 0.01
    buffer_size: 1.0e5
    behavioral_cloning: {demo_path: missing.demo}
""",
    )
    options = load_settings(path)
    pyramids = options.behaviors["Pyramids"]
    assert pyramids.hyperparameters == PPOSettings(batch_size=128)
    assert pyramids.network_settings.memory == MemorySettings(128, 64)
    assert pyramids.max_steps == 50000
    # A behavior's reward_signals replace the default's (shallow override, as ML-Agents).
    assert list(pyramids.reward_signals) == ["curiosity"]
    assert pyramids.reward_signals["curiosity"].encoding_size == 256
    bc = pyramids.behavioral_cloning
    assert bc == BehavioralCloningSettings(str(tmp_path / "Expert.demo"), 0.5, 10000)
    walker = options.behaviors["Walker"]
    # PPO keys inherited from default: are ignored for a SAC behavior.
    assert walker.hyperparameters == SACSettings(tau=0.01, buffer_size=100000, batch_size=1024)
    assert walker.behavioral_cloning.demo_path == "missing.demo"


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "behaviors: {CartPole: {hyperparameters: {lr: 0.1}}}",
            "behaviors.CartPole.hyperparameters.lr: unknown key; did you mean learning_rate?",
        ),
        (
            "behaviors: {CartPole: {hyperparameters: {batch_size: abc}}}",
            "behaviors.CartPole.hyperparameters.batch_size: expected an integer, got 'abc'",
        ),
        (
            "behaviors: {A: {hyperparameters: {num_epoch: 5.5}}}",
            "behaviors.A.hyperparameters.num_epoch: expected an integer, got 5.5",
        ),
        (
            "behaviors: {A: {network_settings: {normalize: 1}}}",
            "behaviors.A.network_settings.normalize: expected true or false, got 1",
        ),
        (
            "behaviors: {A: {network_settings: {normalize: 'true'}}}",
            "behaviors.A.network_settings.normalize: expected true or false, got 'true'",
        ),
        ("behaviors: {A: {hyperparameters: {batch_size: 0}}}", "batch_size: expected an integer >= 1, got 0"),
        ("behaviors: {A: {hyperparameters: {buffer_size: -5}}}", "A.hyperparameters.buffer_size"),
        ("behaviors: {A: {hyperparameters: {num_epoch: 0}}}", "A.hyperparameters.num_epoch"),
        ("behaviors: {A: {network_settings: {hidden_units: 0}}}", "A.network_settings.hidden_units"),
        ("behaviors: {A: {network_settings: {num_layers: 0}}}", "A.network_settings.num_layers"),
        ("behaviors: {A: {time_horizon: 0}}", "behaviors.A.time_horizon: expected an integer >= 1"),
        ("behaviors: {A: {summary_freq: 0}}", "behaviors.A.summary_freq"),
        ("behaviors: {A: {max_steps: -1}}", "behaviors.A.max_steps: expected an integer >= 0"),
        ("behaviors: {A: {keep_checkpoints: 0}}", "behaviors.A.keep_checkpoints"),
        ("behaviors: {A: {checkpoint_interval: 0}}", "behaviors.A.checkpoint_interval"),
        (
            "behaviors: {A: {evaluation: {interval: 0}}}",
            "behaviors.A.evaluation.interval: expected an integer >= 1, got 0",
        ),
        (
            "behaviors: {A: {evaluation: {episodes: 0}}}",
            "behaviors.A.evaluation.episodes: expected an integer >= 1, got 0",
        ),
        ("behaviors: {A: {evaluation: {episodes: 2.5}}}", "behaviors.A.evaluation.episodes: expected an integer"),
        (
            "behaviors: {A: {evaluation: {episodes: 10001}}}",
            "behaviors.A.evaluation.episodes: expected at most 10000 episodes, got 10001",
        ),
        (
            "behaviors: {A: {evaluation: {intervall: 5}}}",
            "behaviors.A.evaluation.intervall: unknown key; did you mean interval?",
        ),
        ("behaviors: {A: {evaluation: 5}}", "behaviors.A.evaluation: expected a mapping, got 5"),
        ("default_settings: {evaluation: {interval: -1}}\nbehaviors: {}", "default_settings.evaluation.interval"),
        ("default: {evaluation: {episodes: 0}}\nA: {}", "default.evaluation.episodes: expected an integer >= 1"),
        (
            "behaviors: {A: {network_settings: {memory: {memory_size: 127}}}}",
            "behaviors.A.network_settings.memory.memory_size: expected an even integer >= 2, got 127",
        ),
        (
            "behaviors: {A: {network_settings: {memory: {sequence_length: 0}}}}",
            "behaviors.A.network_settings.memory.sequence_length",
        ),
        ("env_settings: {num_envs: 0}", "env_settings.num_envs: expected an integer >= 1, got 0"),
        ("env_settings: {agents_per_env: 0}", "env_settings.agents_per_env"),
        (
            "behaviors: {A: {hyperparameters: {batch_size: 512, buffer_size: 256}}}",
            "behaviors.A.hyperparameters.batch_size: must not exceed buffer_size (256), got 512",
        ),
        (
            "behaviors: {A: {trainer_type: ppo2}}",
            "behaviors.A.trainer_type: unknown value 'ppo2'; expected one of ppo, sac, poca; "
            "did you mean ppo?",
        ),
        (
            "behaviors: {A: {hyperparameters: {learning_rate_schedule: linaer}}}",
            "learning_rate_schedule: unknown value 'linaer'; expected one of linear, constant; "
            "did you mean linear?",
        ),
        ("behaviors: {A: {hyperparameters: {beta_schedule: cosine}}}", "A.hyperparameters.beta_schedule"),
        (
            "behaviors: {A: {network_settings: {vis_encode_type: nature}}}",
            "vis_encode_type: unknown value 'nature'; expected one of simple, nature_cnn, resnet, "
            "resnet_tf, match3, fully_connected; did you mean nature_cnn?",
        ),
        (
            "behaviors: {A: {network_settings: {vis_encode_type: resnet-tf}}}",
            "behaviors.A.network_settings.vis_encode_type: unknown value 'resnet-tf'; expected one of simple, "
            "nature_cnn, resnet, resnet_tf, match3, fully_connected; did you mean resnet_tf?",
        ),
        ("behaviors: {A: {network_settings: {activation: gelu}}}", "A.network_settings.activation"),
        (
            "behaviors: {A: {reward_signals: {extrinsic: {gamma: 1.0}}}}",
            "behaviors.A.reward_signals.extrinsic.gamma: expected a number in [0, 1), got 1.0",
        ),
        (
            "behaviors: {A: {hyperparameters: {lambd: 1.5}}}",
            "behaviors.A.hyperparameters.lambd: expected a number in [0, 1], got 1.5",
        ),
        (
            "behaviors: {A: {hyperparameters: {epsilon: 0}}}",
            "behaviors.A.hyperparameters.epsilon: expected a number in (0, 1), got 0.0",
        ),
        (
            "behaviors: {A: {hyperparameters: {learning_rate: 0}}}",
            "behaviors.A.hyperparameters.learning_rate: expected a number > 0, got 0.0",
        ),
        (
            "behaviors: {A: {reward_signals: {curiosty: {}}}}",
            "behaviors.A.reward_signals.curiosty: unknown reward signal; expected one of "
            "extrinsic, curiosity, gail, rnd; did you mean curiosity?",
        ),
        ("behaviors: {A: {reward_signals: {}}}", "behaviors.A.reward_signals: expected at least one"),
        (
            "behaviors: {A: {reward_signals: {curiosity: {network_settings: {memory: {}}}}}}",
            "behaviors.A.reward_signals.curiosity.network_settings.memory: not supported",
        ),
        (
            "behaviors: {A: {reward_signals: {rnd: {learning_rate: 0}}}}",
            "behaviors.A.reward_signals.rnd.learning_rate: expected a number > 0",
        ),
        (
            "behaviors: {A: {trainer_type: poca, network_settings: {memory: {}}, "
            "hyperparameters: {pack_sequences: true}}}",
            "behaviors.A.hyperparameters.pack_sequences: true is not supported with trainer_type poca and "
            "network_settings.memory",
        ),
        (
            "behaviors: {A: {trainer_type: poca, hyperparameters: {shared_critic: true}}}",
            "behaviors.A.hyperparameters.shared_critic: true is not supported with trainer_type poca",
        ),
        ("default: {trainer: offline_bc}", "default.trainer: offline_bc: not supported"),
        (
            "behaviors: {A: {network_settings: {deterministic: true}}}",
            "behaviors.A.network_settings.deterministic: true is supported with --inference only",
        ),
        ("behaviors: {A: {framework: jax}}", "behaviors.A.framework: unknown value 'jax'"),
        ("behaviors: {}\ntorch_settings: {gpu: 1}", "torch_settings.gpu: unknown key"),
        (
            "behaviors: {A: {reward_signals: {gail: {strength: 0.1}}}}",
            "behaviors.A.reward_signals.gail.demo_path: required key is missing",
        ),
        (
            "behaviors: {A: {behavioral_cloning: {strength: 0.1}}}",
            "behaviors.A.behavioral_cloning.demo_path: required key is missing",
        ),
        (
            "behaviors: {A: {hyperparameters: {tau: 0.1}}}",
            "behaviors.A.hyperparameters.tau: is a sac hyperparameter, but the trainer type is ppo",
        ),
        ("behaviors: {A: {trainer: sac}}", "behaviors.A.trainer: unknown key; did you mean trainer_type?"),
        ("behaviors: {A: {self_play: {window: 0}}}", "behaviors.A.self_play.window: expected an integer >= 1, got 0"),
        (
            "behaviors: {A: {batch_size: 64}}",
            "behaviors.A.batch_size: unknown key; did you mean hyperparameters.batch_size?",
        ),
        (
            "behaviors: {A: {memory_size: 64}}",
            "behaviors.A.memory_size: unknown key; did you mean network_settings.memory.memory_size?",
        ),
        ("behaviors: {A: {network_settings: 3}}", "behaviors.A.network_settings: expected a mapping, got 3"),
        ("behaviors: [A, B]", "behaviors: expected a mapping, got a list"),
        ("behaviors: {}\nenv_setings: {}", "env_setings: unknown key; did you mean env_settings?"),
        ("behaviors: {}\ndevice_settings: {num_gpus: 1, devices: [/cpu:0]}", "device_settings.devices"),
        ("behaviors: {}\ncheckpoint_settings: {resume: true, force: true}", "checkpoint_settings.force"),
        ("behaviors: {}\ndebug: yes please", "debug: expected true or false"),
        ("behaviors: {}\nengine_settings: 5", "engine_settings: expected a mapping"),
        ("behaviors: {}\nenv_settings: {env_args: 5}", "env_settings.env_args: expected a mapping"),
        ("default_settings: {max_steps: x}\nbehaviors: {}", "default_settings.max_steps"),
        # flat format
        ("default: {trainer: ppo, batch_sise: 5}", "default.batch_sise: unknown key; did you mean batch_size?"),
        ("default: {trainer: ppo2}", "default.trainer: unknown value 'ppo2'"),
        ("default: {trainer: ppo, tau: 0.1}", "default.tau: is a sac hyperparameter, but the trainer is ppo"),
        ("default: {max_steps: 5.0e4}\nA: {max_steps: 5.5}", "A.max_steps: expected an integer, got 5.5"),
        ("default: {hidden_units: 0}\nA: {}", "default.hidden_units: expected an integer >= 1, got 0"),
        ("default: {use_recurrent: true, memory_size: 3}", "default.memory_size: expected an even integer"),
        ("default: {use_recurrent: 2}", "default.use_recurrent: expected true or false, got 2"),
        ("default: {}\nA: {trainer_type: sac}", "A.trainer_type: unknown key; did you mean trainer?"),
        ("default: {}\nA: 5", "config.yaml: A: expected a mapping, got 5"),
        ("default: {}\nA: {reward_signals: {gail: {}}}", "A.reward_signals.gail.demo_path: required key"),
        (
            "default: {pretraining: {demo_path: a}, behavioral_cloning: {demo_path: b}}",
            "default.pretraining: pretraining and behavioral_cloning are the same setting",
        ),
        # file level
        ("- a\n- b\n", "config.yaml: expected a mapping at the top level, got a list"),
        ("", "config.yaml: the file is empty"),
        ("default: {}\nbehaviors: {}", "mixes the flat format (default:) with the nested format"),
        ("behavior: {A: {}}", "not a trainer configuration"),
        ("behaviors:\n  A: {max_steps: [1, 2}\n", "config.yaml: line 2"),
    ],
)
def test_errors_are_one_line_and_name_file_and_path(tmp_path, text, expected):
    message = config_error(write(tmp_path, text))
    assert message.startswith(str(tmp_path / "config.yaml") + ": ")
    assert expected in message


def test_evaluation_section(tmp_path):
    """``evaluation:`` is off unless given; given, its keys merge like any section's and the
    resolved config reads back equal."""
    from trainers.config import MAX_EVALUATION_EPISODES, EvaluationSettings

    assert TrainerSettings().evaluation is None
    assert EvaluationSettings() == EvaluationSettings(interval=10000, episodes=5)
    assert MAX_EVALUATION_EPISODES == 10_000
    path = write(
        tmp_path,
        """
        default_settings:
          evaluation: {interval: 2000}
        behaviors:
          A: {evaluation: {episodes: 3}}
          B: {max_steps: 100}
          C: {evaluation: null}
        """,
    )
    options = load_settings(path)
    assert options.behaviors["A"].evaluation == EvaluationSettings(interval=2000, episodes=3)
    assert options.behaviors["B"].evaluation == EvaluationSettings(interval=2000, episodes=5)
    assert options.behaviors["C"].evaluation is None
    resolved = str(tmp_path / "resolved.yaml")
    write_resolved_config(options, resolved)
    assert load_settings(resolved) == options
    flat = load_settings(write(tmp_path, "default: {evaluation: {interval: 50}}\nA: {}", "flat.yaml"))
    assert flat.behaviors["A"].evaluation == EvaluationSettings(interval=50)
    with pytest.raises(ConfigError, match="interval: expected an integer >= 1, got 0"):
        EvaluationSettings(interval=0)


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    assert config_error(path) == f"{path}: no such file"


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, "behaviors:\n  A:\n    max_steps: 5\n   bad indent: [\n")
    message = config_error(path)
    assert "line 4" in message and "invalid YAML" in message


def test_suggestion_on_unknown_top_level_key_in_neither_format(tmp_path):
    message = config_error(write(tmp_path, "behaviours: {A: {}}"))
    assert "did you mean behaviors?" in message


# ---------------------------------------------------------------- command-line overrides


def test_cli_overrides_beat_the_file(tmp_path):
    path = write(
        tmp_path,
        """
        default_settings: {max_steps: 100}
        behaviors: {A: {max_steps: 200}, B: {}}
        env_settings: {env_path: "builtin:One", num_envs: 1, seed: 1}
        checkpoint_settings: {run_id: file, resume: true}
        device_settings: {devices: [/cpu:0]}
        """,
    )
    cli = {
        "env_path": "gym:CartPole-v1",
        "num_envs": "4",
        "seed": 3,
        "run_id": "cli",
        "results_dir": None,
        "resume": False,  # an absent on/off flag does not switch the file's setting off
        "max_steps": "1000",
        "num_gpus": 2,
        "debug": True,
    }
    options = load_settings(path, cli)
    assert options.env_settings.env_path == "gym:CartPole-v1"
    assert options.env_settings.num_envs == 4 and options.env_settings.seed == 3
    assert options.checkpoint_settings.run_id == "cli"
    assert options.checkpoint_settings.results_dir == "results"
    assert options.checkpoint_settings.resume is True
    assert {b.max_steps for b in options.behaviors.values()} == {1000}
    assert options.default_settings.max_steps == 1000
    assert options.device_settings == DeviceSettings(num_gpus=2)
    assert options.debug is True


def test_cli_max_steps_reaches_unnamed_behaviors_and_flat_files(tmp_path):
    options = load_settings(write(tmp_path, "behaviors: {}"), {"max_steps": 7})
    assert options.behavior_settings("Unnamed").max_steps == 7
    options = load_settings(write(tmp_path, FLAT_EXAMPLE + "A: {max_steps: 9}\n"), {"max_steps": 7})
    assert options.behaviors["A"].max_steps == 7 and options.default_settings.max_steps == 7


def test_cli_devices_string_and_errors(tmp_path):
    path = write(tmp_path, "behaviors: {}\ndevice_settings: {num_gpus: 1}")
    options = load_settings(path, {"devices": "/cpu:0,/cpu:1"})
    assert options.device_settings == DeviceSettings(devices=("/cpu:0", "/cpu:1"))
    message = config_error(path, {"devices": "/cpu:0", "num_gpus": 1})
    assert "command line: --devices: cannot be combined with num_gpus" in message
    message = config_error(path, {"num_envs": "four"})
    assert message == "command line: --num-envs: expected an integer, got 'four'"
    message = config_error(path, {"max_steps": -2})
    assert message == "command line: --max-steps: expected an integer >= 0, got -2"
    with pytest.raises(ValueError, match="unknown cli_overrides key"):
        load_settings(path, {"num_env": 3})


def test_cli_value_can_fix_a_bad_file_value(tmp_path):
    path = write(tmp_path, "behaviors: {}\nenv_settings: {num_envs: 0}")
    assert load_settings(path, {"num_envs": 2}).env_settings.num_envs == 2


# -------------------------------------------------------------------------- round trip


def test_round_trip_nested(tmp_path):
    (tmp_path / "demos").mkdir()
    (tmp_path / "demos" / "Expert.demo").write_bytes(b"")
    extra = """
default_settings:
  trainer_type: sac
  hyperparameters: {tau: 0.02, reward_signal_steps_per_update: 3}
checkpoint_settings: {run_id: rt, initialize_from: old}
device_settings: {devices: [/cpu:0, /cpu:1]}
"""
    options = load_settings(write(tmp_path, NESTED_EXAMPLE + extra), {"seed": 5})
    out = tmp_path / "results" / "rt" / "configuration.yaml"
    write_resolved_config(options, str(out))
    again = load_settings(str(out))
    assert again == options
    data = yaml.safe_load(out.read_text())
    assert data["device_settings"]["devices"] == ["/cpu:0", "/cpu:1"]
    assert data["behaviors"]["CartPole"]["hyperparameters"]["beta_schedule"] is None
    assert data["default_settings"]["hyperparameters"]["tau"] == 0.02
    assert to_dict(options) == data


def test_round_trip_flat_and_defaults(tmp_path):
    flat = FLAT_EXAMPLE + """
A: {use_recurrent: true}
C: {trainer: sac}
B:
    reward_signals: {curiosity: {strength: 0.1}}
    pretraining: {demo_path: x.demo}
"""
    for text in (flat, "behaviors: {}\n"):
        options = load_settings(write(tmp_path, text))
        out = str(tmp_path / "resolved.yaml")
        write_resolved_config(options, out)
        assert load_settings(out) == options


# -------------------------------------------------------------------------- demo paths


def test_demo_path_resolution(tmp_path, monkeypatch):
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "beside.demo").write_bytes(b"")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "in_cwd.demo").write_bytes(b"")
    monkeypatch.chdir(cwd)
    path = write(
        config_dir,
        """
        behaviors:
          A:
            reward_signals:
              gail: {demo_path: beside.demo}
              extrinsic: {}
            behavioral_cloning: {demo_path: in_cwd.demo}
          B:
            behavioral_cloning: {demo_path: nowhere.demo}
        """,
    )
    options = load_settings(path)
    a = options.behaviors["A"]
    assert a.reward_signals["gail"].demo_path == str(config_dir / "beside.demo")
    assert a.behavioral_cloning.demo_path == str(cwd / "in_cwd.demo")
    assert options.behaviors["B"].behavioral_cloning.demo_path == "nowhere.demo"
