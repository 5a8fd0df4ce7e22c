"""One place per fact in the configuration: the trainer-type capability table and the
engine settings, both checked when the config loads (file and YAML path in the line)."""
from __future__ import annotations

import dataclasses

import pytest

from envs.unity.environment import EngineConfig
from envs.unity.options import ENGINE_KEYS, engine_config
from trainers.config import (
    HYPERPARAMETER_TYPES,
    TRAINER_KINDS,
    TRAINER_TYPES,
    EngineSettings,
    MemorySettings,
    POCASettings,
    PPOSettings,
    SACSettings,
    TrainerSettings,
    load_settings,
    to_dict,
)
from trainers.exceptions import ConfigError


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def _error(path: str, cli=None) -> str:
    with pytest.raises(ConfigError) as info:
        load_settings(path, cli, on_warning=lambda line: None)
    message = str(info.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------ trainer types


def test_every_trainer_type_has_one_row_and_the_tables_agree():
    assert tuple(TRAINER_KINDS) == TRAINER_TYPES
    # POCA takes PPO's keys and defaults (its settings class refuses two of them).
    assert HYPERPARAMETER_TYPES == {"ppo": PPOSettings, "sac": SACSettings, "poca": POCASettings}
    assert issubclass(POCASettings, PPOSettings)
    assert TrainerSettings(trainer_type="sac").kind is TRAINER_KINDS["sac"]


def test_recurrent_sac_loads_and_its_buffer_must_hold_a_sequence(tmp_path):
    sac = "default_settings:\n  trainer_type: sac\n  network_settings:\n    memory: {memory_size: 16}\n"
    path = _write(tmp_path, sac)
    assert load_settings(path).default_settings.network_settings.memory == MemorySettings(16, 64)
    path = _write(tmp_path, sac + "  hyperparameters: {batch_size: 32, buffer_size: 32}\n")
    assert _error(path) == (
        f"{path}: default_settings.hyperparameters.buffer_size: must hold at least one sequence "
        "(network_settings.memory.sequence_length 64), got 32"
    )
    # Recurrent PPO loads.
    path = _write(tmp_path, "behaviors:\n  A:\n    network_settings:\n      memory: {memory_size: 16}\n")
    assert load_settings(path).behaviors["A"].network_settings.memory.memory_size == 16


def test_threaded_is_honoured_where_the_table_says():
    assert TrainerSettings(threaded=True).updates_in_thread
    assert not TrainerSettings(trainer_type="sac", threaded=True).updates_in_thread


def test_cluster_sac_is_refused_at_load(tmp_path):
    cluster = "cluster_settings:\n  chief: localhost:2222\n  workers: [localhost:2223]\n"
    path = _write(tmp_path, "behaviors:\n  A: {trainer_type: ppo}\n  B: {trainer_type: sac}\n" + cluster)
    assert _error(path) == (
        f"{path}: behaviors.B.trainer_type: sac runs on local devices only; "
        "cluster_settings (--cluster) is supported for ppo"
    )
    path = _write(tmp_path, "default_settings: {trainer_type: sac}\n" + cluster)
    assert _error(path).startswith(f"{path}: default_settings.trainer_type: sac runs on local devices only")
    path = _write(tmp_path, "behaviors:\n  A: {trainer_type: ppo}\n" + cluster)
    assert load_settings(path).cluster_settings.enabled


# ------------------------------------------------------------------ engine settings


def test_engine_settings_have_ml_agents_keys():
    """The schema's keys are the env layer's (what a Unity build is sent)."""
    assert [f.name for f in dataclasses.fields(EngineSettings)] == list(ENGINE_KEYS)


def test_engine_settings_are_checked_at_load_with_the_yaml_path(tmp_path):
    for text, expected in [
        ("width: 0", "engine_settings.width: expected a size > 0, got 0"),
        ("time_scale: 0", "engine_settings.time_scale: expected a number > 0, got 0.0"),
        ("quality_level: high", "engine_settings.quality_level: expected an integer"),
        ("no_graphics: 1", "engine_settings.no_graphics: expected true or false, got 1"),
        ("widht: 3", "engine_settings.widht: unknown key"),
    ]:
        path = _write(tmp_path, f"behaviors: {{}}\nengine_settings:\n  {text}\n")
        message = _error(path)
        assert message.startswith(f"{path}: {expected}"), message


def test_engine_flags_are_overrides_like_any_other(tmp_path):
    path = _write(tmp_path, "behaviors: {}\nengine_settings: {time_scale: 5, width: 64}\n")
    options = load_settings(path, {"time_scale": 1.5, "no_graphics_monitor": True})
    assert options.engine_settings == EngineSettings(width=64, time_scale=1.5, no_graphics_monitor=True)
    assert engine_config(options.engine_settings.given()) == EngineConfig(
        width=64, time_scale=1.5, no_graphics_monitor=True
    )
    assert _error(path, {"height": -2}) == "command line: --height: expected a size > 0, got -2"


def test_resolved_config_records_only_the_engine_keys_given(tmp_path):
    path = _write(tmp_path, "behaviors: {}\nengine_settings: {time_scale: 20}\n")
    assert to_dict(load_settings(path))["engine_settings"] == {"time_scale": 20.0}
    assert to_dict(load_settings(_write(tmp_path, "behaviors: {}\n")))["engine_settings"] == {}
