"""``self_play:``: ML-Agents' defaults, the resolved team_change, both formats, the config's
round trip, the trainer-type row that allows it, and one line per bad value."""
from __future__ import annotations

import dataclasses

import pytest

from trainers.config import (
    MAX_SELF_PLAY_WINDOW,
    TRAINER_KINDS,
    SelfPlaySettings,
    TrainerSettings,
    load_settings,
    write_resolved_config,
)
from trainers.exceptions import ConfigError


def _write(tmp_path, text: str, name: str = "c.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _error(path: str) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, on_warning=lambda line: None)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_defaults_are_ml_agents_code_defaults():
    # ML-Agents Release 22's SelfPlaySettings (settings.py): team_change = 5 x save_steps;
    # swap_steps 2000 in the code (its docs say 10000).
    s = SelfPlaySettings()
    assert (s.save_steps, s.team_change, s.swap_steps, s.window) == (20000, 100000, 2000, 10)
    assert (s.play_against_latest_model_ratio, s.initial_elo) == (0.5, 1200.0)
    assert SelfPlaySettings(save_steps=300).team_change == 1500
    assert SelfPlaySettings(save_steps=300, team_change=7).team_change == 7
    assert TrainerSettings().self_play is None


def test_nested_section_loads_and_round_trips(tmp_path):
    path = _write(tmp_path, (
        "behaviors:\n  Tennis:\n    self_play:\n      save_steps: 50000\n      swap_steps: 2000\n"
        "      window: 10\n      play_against_latest_model_ratio: 0.5\n      initial_elo: 1200.0\n"
    ))
    options = load_settings(path)
    s = options.behaviors["Tennis"].self_play
    assert s == SelfPlaySettings(save_steps=50000, team_change=250000)
    resolved = str(tmp_path / "resolved.yaml")
    write_resolved_config(options, resolved)
    assert load_settings(resolved) == options
    # ML-Agents writes `self_play: null` into resolved configs of behaviors without it.
    path = _write(tmp_path, "behaviors:\n  A:\n    self_play: null\n", "null.yaml")
    assert load_settings(path).behaviors["A"].self_play is None


def test_flat_format_section_and_default_settings(tmp_path):
    path = _write(tmp_path, "default:\n  trainer: ppo\nTennis:\n  self_play: {window: 3, swap_steps: 50}\n")
    s = load_settings(path, on_warning=lambda line: None).behaviors["Tennis"].self_play
    assert s is not None and (s.window, s.swap_steps) == (3, 50)
    path = _write(tmp_path, "default_settings:\n  self_play: {window: 4}\nbehaviors:\n  A: {}\n", "d.yaml")
    a = load_settings(path).behaviors["A"].self_play
    assert a is not None and a.window == 4


@pytest.mark.parametrize("key, value, expected", [
    ("save_steps", "0", "expected an integer >= 1, got 0"),
    ("team_change", "-5", "expected an integer >= 1, got -5"),
    ("swap_steps", "2.5", "expected an integer, got 2.5"),
    ("window", "0", "expected an integer >= 1, got 0"),
    ("window", str(MAX_SELF_PLAY_WINDOW + 1), f"expected at most {MAX_SELF_PLAY_WINDOW} snapshots"),
    ("play_against_latest_model_ratio", "1.5", "expected a number in [0, 1], got 1.5"),
    ("play_against_latest_model_ratio", "-0.1", "expected a number in [0, 1], got -0.1"),
    ("initial_elo", "high", "expected a number, got 'high'"),
    ("initial_elo", ".inf", "expected a finite number, got inf"),
])
def test_bad_values_are_one_line_with_the_yaml_path(tmp_path, key, value, expected):
    path = _write(tmp_path, f"behaviors:\n  SoccerTwos:\n    self_play:\n      {key}: {value}\n")
    message = _error(path)
    assert message.startswith(f"{path}: behaviors.SoccerTwos.self_play.{key}: {expected}"), message


def test_unknown_keys_and_wrong_shapes_are_one_line(tmp_path):
    path = _write(tmp_path, "behaviors:\n  A:\n    self_play: {windw: 3}\n")
    assert _error(path) == f"{path}: behaviors.A.self_play.windw: unknown key; did you mean window?"
    path = _write(tmp_path, "behaviors:\n  A:\n    self_play: 5\n", "b.yaml")
    assert _error(path) == f"{path}: behaviors.A.self_play: expected a mapping, got 5"


def test_the_trainer_kind_row_decides_who_may_self_play(monkeypatch, tmp_path):
    assert all(kind.self_play for kind in TRAINER_KINDS.values())  # PPO, SAC and POCA, as ML-Agents
    assert TrainerSettings(trainer_type="sac", self_play=SelfPlaySettings()).self_play is not None
    monkeypatch.setitem(TRAINER_KINDS, "sac", dataclasses.replace(TRAINER_KINDS["sac"], self_play=False))
    path = _write(tmp_path, "behaviors:\n  A:\n    trainer_type: sac\n    self_play: {}\n")
    assert _error(path) == (
        f"{path}: behaviors.A.self_play: not supported for trainer_type sac (self-play is supported for ppo, poca)"
    )
