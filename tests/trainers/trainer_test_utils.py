"""Helpers shared by the trainer tests: specs, small settings, config paths."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Sequence

import numpy as np
import yaml

from envs.base_env import ActionSpec, BehaviorSpec, ObservationKind, ObservationSpec
from trainers.config import NetworkSettings, PPOSettings, TrainerSettings

CONFIG_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "config")


def make_spec(continuous: int = 0, branches: Sequence[int] = (), vector: int = 3, visual=None) -> BehaviorSpec:
    obs = [ObservationSpec((vector,), "vector", ObservationKind.VECTOR)]
    if visual is not None:
        obs.append(ObservationSpec(visual, "camera", ObservationKind.VISUAL))
    return BehaviorSpec(tuple(obs), ActionSpec(continuous, tuple(branches)))


def small_settings(**hyper) -> TrainerSettings:
    hp = dict(batch_size=16, buffer_size=64, learning_rate=3e-3, num_epoch=2)
    hp.update(hyper)
    return TrainerSettings(
        hyperparameters=PPOSettings(**hp),
        network_settings=NetworkSettings(hidden_units=16, num_layers=1, vis_encode_type="simple"),
        max_steps=1000,
    )


def random_obs(spec: BehaviorSpec, n: int, rng: np.random.Generator) -> List[np.ndarray]:
    return [rng.uniform(-1, 1, size=(n,) + o.shape).astype(np.float32) if o.kind == ObservationKind.VECTOR
            else rng.uniform(0, 1, size=(n,) + o.shape).astype(np.float32) for o in spec.observation_specs]


def config_path(name: str) -> str:
    return os.path.join(CONFIG_DIR, "ppo", name)


def crashing_workers_config(source: str, path: str) -> str:
    """``source`` (a Simple config) on 2 ``builtin:_Crash`` workers whose worker 1 exits
    at its step 300, written to ``path``."""
    with open(source) as f:
        cfg = yaml.safe_load(f)
    cfg["env_settings"] = {"env_path": "builtin:_Crash", "num_envs": 2, "seed": 10,
                           "env_args": {"continuous": 0, "discrete": 1, "behavior_names": ["Simple"],
                                        "exit_at_step": 300, "crash_seed": 11}}
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return str(path)


def _merge(into: Dict[str, Any], overrides: Dict[str, Any]) -> None:
    for key, value in overrides.items():
        if value is None:
            into.pop(key, None)
        elif isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def derived_config(base: str, path, overrides: Dict[str, Any]) -> str:
    """The config file ``base`` with ``overrides`` merged in (nested mappings merge, other
    values replace, ``None`` deletes the key), written to ``path``. Relative demo paths are
    made absolute from ``base``'s folder, so the copy finds the same demos."""
    with open(base) as f:
        cfg = yaml.safe_load(f)
    _merge(cfg, overrides)
    folder = os.path.dirname(os.path.abspath(base))
    for behavior in (cfg.get("behaviors") or {}).values():
        sections = [behavior.get("behavioral_cloning")] + list((behavior.get("reward_signals") or {}).values())
        for section in sections:
            if isinstance(section, dict) and section.get("demo_path") and not os.path.isabs(section["demo_path"]):
                section["demo_path"] = os.path.normpath(os.path.join(folder, section["demo_path"]))
    with open(path, "w") as f:
        yaml.safe_dump(cfg, f)
    return str(path)
