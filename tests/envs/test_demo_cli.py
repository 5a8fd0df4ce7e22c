"""trainer-demo, run in-process through main([...])."""
from __future__ import annotations

import json

import numpy as np
import pytest

from envs.demo import check_demo_spec, load_demonstration
from test_demo_support import real_demo
from trainers.cli.demo import main


def _run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_info_json(capsys):
    path = real_demo("testhybridvis__63e810be.demo")
    code, out, err = _run(capsys, ["info", str(path), "--json"])
    assert code == 0 and err == ""
    info = json.loads(out)
    assert info["steps"] == 25 and info["episodes"] == 1 and info["record_format"] == "pair+action_spec"
    # The config section it belongs to, beside the id Unity recorded (FullyQualifiedBehaviorName).
    assert info["behavior_name"] == "VisualFoodCollector" and info["name"] == "testhybridvis"
    assert info["behavior_id"] == "VisualFoodCollector?team=0" and info["team"] == 0
    assert info["observations"] == [
        {"name": "CameraSensor", "kind": "visual", "shape": [84, 84, 3]},
        {"name": "VectorSensor_size1", "kind": "vector", "shape": [1]},
    ]
    assert info["actions"] == {"continuous": 3, "discrete_branches": [2]}
    assert info["mean_reward"] == pytest.approx(4.0) and info["transitions"] == 24


def test_info_text(capsys):
    code, out, _ = _run(capsys, ["info", str(real_demo("Expert3DBallHard__3130d251.demo"))])
    assert code == 0
    for line in ("Name:          Expert3DBallHard", "Record format: legacy", "Steps:         2271",
                 "Episodes:      3", "Mean reward:   75.6682", "vector (45,)", "Actions:       continuous 2",
                 "Behavior:      3DBallHardLearning\n"):
        assert line in out
    code, out, _ = _run(capsys, ["info", str(real_demo("test__8f188ddd.demo"))])
    assert code == 0 and "Behavior:      3DBall (team 0; recorded as 3DBall?team=0)\n" in out


def test_info_errors_are_one_line(capsys, tmp_path):
    code, out, err = _run(capsys, ["info", str(tmp_path / "nope.demo")])
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("trainer-demo: error: ") and "nope.demo" in err and "not found" in err
    (tmp_path / "bad.demo").write_bytes(b"\x05\x08\x01")
    code, _, err = _run(capsys, ["info", str(tmp_path / "bad.demo")])
    assert code == 1 and "bad.demo: byte 0: truncated" in err and "Traceback" not in err


def test_record_run_id_of_a_missing_run_is_one_line(capsys, tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("env_settings: {env_path: builtin:Simple}\n")
    code, _, err = _run(capsys, ["record", str(cfg), "--out", str(tmp_path / "x.demo"), "--run-id=run1",
                                 f"--results-dir={tmp_path}"])
    assert code == 1 and "run1" in err and "not a run directory" in err and err.count("\n") == 1
    assert not (tmp_path / "x.demo").exists()


def test_record_config_errors(capsys, tmp_path):
    code, _, err = _run(capsys, ["record", str(tmp_path / "missing.yaml"), "--env=builtin:Simple",
                                 f"--out={tmp_path / 'x.demo'}"])
    assert code == 1 and "missing.yaml: config file not found" in err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("env_settings: {env_args: [1, 2]}\n")
    code, _, err = _run(capsys, ["record", str(cfg), "--env=builtin:Simple", f"--out={tmp_path / 'x.demo'}"])
    assert code == 1 and "env_settings.env_args: expected a mapping" in err
    cfg.write_text("env_settings: {}\n")
    code, _, err = _run(capsys, ["record", str(cfg), f"--out={tmp_path / 'x.demo'}"])
    assert code == 1 and "no environment" in err
    code, _, err = _run(capsys, ["record", str(cfg), "--env=builtin:Simple", "--steps=abc",
                                 f"--out={tmp_path / 'x.demo'}"])
    assert code == 1 and "--steps must be an integer" in err


def test_record_builtin_simple_expert(capsys, tmp_path):
    registry = pytest.importorskip("envs.registry")
    cfg = tmp_path / "simple.yaml"
    cfg.write_text(
        "behaviors: {Simple: {trainer_type: ppo}}\n"
        "env_settings:\n"
        "  env_args: {continuous: 1, discrete: 1, num_visual: 1, vis_obs_size: [6, 6, 3]}\n"
        "  seed: 5\n"
    )
    out_path = tmp_path / "expert.demo"
    code, out, err = _run(capsys, ["record", str(cfg), "--env=builtin:Simple", "--steps=60", f"--out={out_path}",
                                   "--seed=3"])
    assert code == 0, err
    assert "Recorded 60 steps" in out
    demo = load_demonstration(out_path)
    assert demo.info.number_steps == 60 and demo.info.name == "expert" and demo.info.behavior_name == "Simple"
    env = registry.make_env("builtin:Simple", {"continuous": 1, "discrete": 1, "num_visual": 1,
                                               "vis_obs_size": [6, 6, 3]}, 3, 1)
    try:
        check_demo_spec(demo, "Simple", env.behavior_specs["Simple"])
    finally:
        env.close()
    # The scripted expert is optimal: every finished episode returns about 1.02.
    finished = demo.episode_returns[np.unique(demo.episode_ids[demo.done])]
    assert len(finished) >= 5 and np.all(finished > 0.9)
    assert demo.info.number_episodes == demo.episode_count
    # Expert actions point at the goal shown in the vector observation.
    goal = demo.obs[0][:, 0]
    np.testing.assert_array_equal(np.sign(demo.continuous_actions[:, 0]), np.sign(goal))
    np.testing.assert_array_equal(demo.discrete_actions[:, 0], (goal > 0).astype(int))


def _suffixed_config(tmp_path, names) -> str:
    """A built-in Simple env whose behaviors are named like a Unity build's (``Name?team=N``)."""
    cfg = tmp_path / "suffixed.yaml"
    cfg.write_text("env_settings:\n  env_path: builtin:Simple\n  env_args: {behavior_names: %s}\n" % json.dumps(names))
    return str(cfg)


def test_record_picks_a_team_suffixed_behavior_by_its_config_name(capsys, tmp_path):
    cfg = _suffixed_config(tmp_path, ["Simple?team=0"])
    out_path = tmp_path / "s.demo"
    code, out, err = _run(capsys, ["record", cfg, "--behavior=Simple", "--steps=20", f"--out={out_path}"])
    assert code == 0, err
    assert "of behavior Simple?team=0" in out
    # Written under the id the env reports, as Unity's DemonstrationRecorder writes it.
    info = load_demonstration(out_path).info
    assert info.behavior_name == "Simple?team=0" and info.behavior_id.name == "Simple"

    cfg = _suffixed_config(tmp_path, ["Striker?team=0", "Striker?team=1"])
    code, _, err = _run(capsys, ["record", cfg, "--behavior=Striker", "--steps=5", f"--out={out_path}"])
    assert code == 1 and err.count("\n") == 1
    assert "--behavior: Striker is 2 teams in builtin:Simple (Striker?team=0, Striker?team=1); give one of them" in err
    code, _, err = _run(capsys, ["record", cfg, "--behavior=Striker?team=1", "--steps=5", f"--out={out_path}"])
    assert code == 0, err
    assert load_demonstration(out_path).info.behavior_name == "Striker?team=1"
    code, _, err = _run(capsys, ["record", cfg, "--behavior=Goalie", "--steps=5", f"--out={out_path}"])
    assert code == 1 and "has no behavior 'Goalie' (behaviors: Striker?team=0, Striker?team=1)" in err


def test_record_a_trained_run_from_a_team_suffixed_env(capsys, tmp_path):
    """The run keeps its checkpoints and settings under the config name (``Simple``); a
    game reporting ``Simple?team=0`` plays that run's policy."""
    from trainers.cli.learn import main as learn

    train_cfg = tmp_path / "train.yaml"
    train_cfg.write_text(
        "behaviors:\n"
        "  Simple:\n"
        "    trainer_type: ppo\n"
        "    hyperparameters: {batch_size: 16, buffer_size: 32}\n"
        "    network_settings: {hidden_units: 8, num_layers: 1}\n"
        "    max_steps: 64\n"
        "env_settings: {env_path: builtin:Simple, seed: 1}\n"
    )
    code = learn([str(train_cfg), "--run-id=taught", f"--results-dir={tmp_path}"])
    capsys.readouterr()
    assert code == 0
    out_path = tmp_path / "played.demo"
    code, out, err = _run(capsys, ["record", _suffixed_config(tmp_path, ["Simple?team=0"]), "--run-id=taught",
                                   f"--results-dir={tmp_path}", "--steps=10", f"--out={out_path}"])
    assert code == 0, err
    assert load_demonstration(out_path).info.number_steps == 10
