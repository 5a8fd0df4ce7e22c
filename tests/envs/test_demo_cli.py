"""trainer-demo, run in-process through main([...])."""
from __future__ import annotations

import json

import numpy as np
import pytest

from envs.demo import check_demo_spec, load_demonstration
from test_demo_support import real_demo
from trainers.demo_cli import main


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
    assert info["behavior_name"] == "VisualFoodCollector?team=0" and info["name"] == "testhybridvis"
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
                 "Episodes:      3", "Mean reward:   75.6682", "vector (45,)", "Actions:       continuous 2"):
        assert line in out


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
